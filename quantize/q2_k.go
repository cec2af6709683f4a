package quantize

import "github.com/gquant/gquant/formats/gguf"

// q2_KCodec is Q2_K: super-blocks of 256 = 16 sub-blocks of 16. Layout (84 bytes): scales[16]
// (low nibble scale, high nibble min), qs[64] 2-bit levels (for each 128 elements, 32 bytes
// holding elements l, l+32, l+64, l+96 at shifts 0, 2, 4, 6), fp16 d, fp16 dmin;
// w = d·sc_j·q − dmin·m_j.
type q2_KCodec struct{ blockCodec }

func init() { register(q2_KCodec{blockCodec{gguf.Q2_K}}) }

// Quantize is quantize_q2_K: quantize_row_q2_K_ref without an imatrix, quantize_row_q2_K_impl
// with one.
func (c q2_KCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		for i := 0; i < len(x)/256; i++ {
			y, xb := dst[84*i:84*i+84], x[256*i:256*i+256]
			if qw == nil {
				quantizeBlockQ2_KRef(y, xb)
			} else {
				quantizeBlockQ2_KImpl(y, xb, qw[256*i:256*i+256])
			}
		}
	})
}

func quantizeBlockQ2_KRef(y []byte, x []float32) {
	var L [256]uint8
	var weights [256]float32
	var mins, scales [16]float32
	const q4scale = 15
	sc := y[0:16]
	for l, v := range x[:256] {
		weights[l] = abs32(v)
	}
	qkxSearch(x[:256], weights[:], 16, L[:], scales[:], mins[:], qkxQ2KRef)
	var maxScale, maxMin float32
	for j := 0; j < 16; j++ {
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	if maxScale > 0 {
		iscale := q4scale / maxScale
		for j := 0; j < 16; j++ {
			sc[j] = uint8(nearestInt(iscale * scales[j]))
		}
		putF16(y[80:], maxScale/q4scale)
	} else {
		clear(sc)
		putF16(y[80:], 0)
	}
	if maxMin > 0 {
		iscale := q4scale / maxMin
		for j := 0; j < 16; j++ {
			sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
		}
		putF16(y[82:], maxMin/q4scale)
	} else {
		putF16(y[82:], 0)
	}
	requantizeQ2_K(y, x, &L)
}

func quantizeBlockQ2_KImpl(y []byte, x, qw []float32) {
	var L [256]uint8
	var weights [256]float32
	var mins, scales, sw [16]float32
	var ls, lm [16]uint8
	var sumX2 float32
	for _, v := range x {
		sumX2 += float32(v * v)
	}
	sigma2 := float32(sumX2 / 256)
	for j := 0; j < 16; j++ {
		xs, ws := x[16*j:16*j+16], weights[16*j:16*j+16]
		for l, v := range xs {
			ws[l] = qw[16*j+l] * sqrt32(sigma2+float32(v*v))
		}
		for _, w := range ws {
			sw[j] += w
		}
	}
	p := qkxImatrix
	p.nmax = 3
	qkxSearch(x[:256], weights[:], 16, L[:], scales[:], mins[:], p)
	dm := makeQpQuants(scales[:], 15, ls[:], sw[:])
	mm := makeQpQuants(mins[:], 15, lm[:], sw[:])
	putF16(y[80:], dm)
	putF16(y[82:], mm)
	for j := 0; j < 16; j++ {
		y[j] = ls[j] | lm[j]<<4
	}
	requantizeQ2_K(y, x, &L)
}

// requantizeQ2_K recomputes the levels against the stored scales and mins (where the scale is
// not zero) and packs them.
func requantizeQ2_K(y []byte, x []float32, L *[256]uint8) {
	d0, dmin0 := getF16(y[80:]), getF16(y[82:])
	for j := 0; j < 16; j++ {
		d := float32(d0 * float32(y[j]&0xF))
		if d == 0 {
			continue
		}
		dm := float32(dmin0 * float32(y[j]>>4))
		for ii := 0; ii < 16; ii++ {
			L[16*j+ii] = uint8(clamp(nearestInt((x[16*j+ii]+dm)/d), 0, 3))
		}
	}
	qs := y[16:80]
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

// Dequantize is dequantize_row_q2_K.
func (c q2_KCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[84*i:84*i+84], dst[256*i:256*i+256]
		d, dmin := getF16(b[80:]), getF16(b[82:])
		q := b[16:80]
		is, k := 0, 0
		for n := 0; n < 256; n += 128 {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					s := b[is]
					is++
					dl, ml := d*float32(s&0xF), dmin*float32(s>>4)
					for l := 0; l < 16; l++ {
						y[k] = float32(dl*float32(q[16*half+l]>>shift&3)) - ml
						k++
					}
				}
			}
			q = q[32:]
		}
	}
}
