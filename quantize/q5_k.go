package quantize

import "github.com/gquant/gquant/formats/gguf"

// q5_KCodec is Q5_K: as Q4_K with 5-bit levels. Layout (176 bytes): fp16 d, fp16 dmin, 12 scale
// bytes, qh[32] (bit 2k and 2k+1 of qh[l] are the fifth bits of elements 64k+l and 64k+l+32),
// qs[128] low nibbles as in Q4_K; w = d·sc_j·q − dmin·m_j.
type q5_KCodec struct{ blockCodec }

func init() { register(q5_KCodec{blockCodec{gguf.Q5_K}}) }

// Quantize is quantize_q5_K (see quantizeKMin).
func (c q5_KCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		for i := 0; i < len(x)/256; i++ {
			var bqw []float32
			if qw != nil {
				bqw = qw[256*i : 256*i+256]
			}
			quantizeKMin(dst[176*i:176*i+176], x[256*i:256*i+256], bqw, 31)
		}
	})
}

// Dequantize is dequantize_row_q5_K.
func (c q5_KCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[176*i:176*i+176], dst[256*i:256*i+256]
		d, dmin := getF16(b), getF16(b[2:])
		qh, ql := b[16:48], b[48:176]
		u1, u2 := uint8(1), uint8(2)
		for j, is := 0, 0; j < 256; j, is = j+64, is+2 {
			sc, m := getScaleMinK4(is, b[4:16])
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = getScaleMinK4(is+1, b[4:16])
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				h1, h2 := 0, 0
				if qh[l]&u1 != 0 {
					h1 = 16
				}
				if qh[l]&u2 != 0 {
					h2 = 16
				}
				y[j+l] = float32(d1*float32(int(ql[l]&0xF)+h1)) - m1
				y[j+32+l] = float32(d2*float32(int(ql[l]>>4)+h2)) - m2
			}
			ql = ql[32:]
			u1 <<= 2
			u2 <<= 2
		}
	}
}
