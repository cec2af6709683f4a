package quantize

import "github.com/gquant/gquant/formats/gguf"

// q6_KCodec is Q6_K: super-blocks of 256 = 16 sub-blocks of 16 with int8 scales. Layout (210
// bytes): ql[128] low nibbles, qh[64] high two bits, int8 scales[16], fp16 d;
// w = d·sc_j·(q − 32).
type q6_KCodec struct{ blockCodec }

func init() { register(q6_KCodec{blockCodec{gguf.Q6_K}}) }

// Quantize is quantize_q6_K: make_qx_quants per sub-block, weighted by x² without an imatrix
// and by the imatrix itself with one.
func (c q6_KCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		for i := 0; i < len(x)/256; i++ {
			var bqw []float32
			if qw != nil {
				bqw = qw[256*i : 256*i+256]
			}
			quantizeBlockQ6_K(dst[210*i:210*i+210], x[256*i:256*i+256], bqw)
		}
	})
}

// quantizeBlockQ6_K is one super-block of quantize_row_q6_K_ref / quantize_row_q6_K_impl.
func quantizeBlockQ6_K(y []byte, x, qw []float32) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbsScale float32
	for ib := 0; ib < 16; ib++ {
		var w []float32
		if qw != nil {
			w = qw[16*ib : 16*ib+16]
		}
		scale := makeQxQuants(x[16*ib:16*ib+16], 32, L[16*ib:16*ib+16], w)
		scales[ib] = scale
		if as := abs32(scale); as > maxAbsScale {
			maxAbsScale, maxScale = as, scale
		}
	}
	if maxAbsScale < groupMaxEps {
		clear(y[:210])
		return
	}
	sc := y[192:208]
	iscale := -128 / maxScale
	putF16(y[208:], 1/iscale)
	for ib := 0; ib < 16; ib++ {
		sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
	}
	d0 := getF16(y[208:])
	for j := 0; j < 16; j++ {
		d := float32(d0 * float32(int8(sc[j])))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			L[16*j+ii] = int8(clamp(nearestInt(x[16*j+ii]/d), -32, 31) + 32)
		}
	}
	packQ6_K(y, L[:])
}

// packQ6_K writes the 256 levels L (0…63, the code plus 32) of a Q6_K super-block into y's
// ql and qh.
func packQ6_K(y []byte, L []int8) {
	ql, qh := y[0:128], y[128:192]
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			q1, q2 := uint8(L[j+l])&0xF, uint8(L[j+l+32])&0xF
			q3, q4 := uint8(L[j+l+64])&0xF, uint8(L[j+l+96])&0xF
			ql[j/2+l] = q1 | q3<<4
			ql[j/2+l+32] = q2 | q4<<4
			qh[j/4+l] = uint8(L[j+l])>>4 | (uint8(L[j+l+32])>>4)<<2 |
				(uint8(L[j+l+64])>>4)<<4 | (uint8(L[j+l+96])>>4)<<6
		}
	}
}

// Dequantize is dequantize_row_q6_K.
func (c q6_KCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[210*i:210*i+210], dst[256*i:256*i+256]
		d := getF16(b[208:])
		ql, qh, sc := b[0:128], b[128:192], b[192:208]
		for n := 0; n < 256; n += 128 {
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(ql[l]&0xF|(qh[l]>>0&3)<<4) - 32
				q2 := int(ql[l+32]&0xF|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[n+l] = d * float32(int8(sc[is])) * float32(q1)
				y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
			ql, qh, sc = ql[64:], qh[32:], sc[8:]
		}
	}
}
