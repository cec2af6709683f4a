package quantize

import "github.com/gquant/gquant/formats/gguf"

// q4_KCodec is Q4_K: super-blocks of 256 = 8 sub-blocks of 32. Layout (144 bytes): fp16 d,
// fp16 dmin, 12 bytes of 6-bit sub-block scales and mins (get_scale_min_k4), 128 bytes of
// nibbles (for each 64 elements, 32 bytes: low nibble element l, high nibble element l+32);
// w = d·sc_j·q − dmin·m_j.
type q4_KCodec struct{ blockCodec }

func init() { register(q4_KCodec{blockCodec{gguf.Q4_K}}) }

// Quantize is quantize_q4_K: quantize_row_q4_K_ref (make_qkx2_quants, scales rounded to 6 bits)
// without an imatrix; quantize_row_q4_K_impl (make_qkx3_quants, scales by make_qp_quants)
// with one.
func (c q4_KCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		for i := 0; i < len(x)/256; i++ {
			var bqw []float32
			if qw != nil {
				bqw = qw[256*i : 256*i+256]
			}
			quantizeKMin(dst[144*i:144*i+144], x[256*i:256*i+256], bqw, 15)
		}
	})
}

// Dequantize is dequantize_row_q4_K.
func (c q4_KCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[144*i:144*i+144], dst[256*i:256*i+256]
		d, dmin := getF16(b), getF16(b[2:])
		q := b[16:]
		for j, is := 0, 0; j < 256; j, is = j+64, is+2 {
			sc, m := getScaleMinK4(is, b[4:16])
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = getScaleMinK4(is+1, b[4:16])
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				y[j+l] = float32(d1*float32(q[l]&0xF)) - m1
				y[j+32+l] = float32(d2*float32(q[l]>>4)) - m2
			}
			q = q[32:]
		}
	}
}
