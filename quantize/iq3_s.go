package quantize

import "github.com/gquant/gquant/formats/gguf"

// iq3SCodec is IQ3_S: super-blocks of 256 = 8 sub-blocks of 32 = 64 groups of 4 on a grid of
// 512 points. Layout (110 bytes): fp16 d, qs[64] the low 8 bits of each group's grid index,
// qh[8] the ninth bits (bit k of qh[ib] for group k of sub-block ib), signs[32] one bit per
// element, scales[4] a 4-bit ls per sub-block (low nibble first); w = d·(1 + 2·ls)·grid·sign.
type iq3SCodec struct{ blockCodec }

func init() { register(iq3SCodec{blockCodec{gguf.IQ3_S}}) }

// Quantize is quantize_iq3_s (quantize_row_iq3_s_impl with block size 32), with or without
// an imatrix.
func (c iq3SCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	lat := iq3SGrid()
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		var b iq3Block
		for ibl := 0; ibl < len(x)/256; ibl++ {
			var bqw *[256]float32
			if qw != nil {
				bqw = (*[256]float32)(qw[256*ibl:])
			}
			quantizeBlockIQ3S(lat, (*[110]byte)(dst[110*ibl:]), (*[256]float32)(x[256*ibl:]), bqw, &b)
		}
	})
}

// quantizeBlockIQ3S is the super-block body of quantize_row_iq3_s_impl. As in ggml, a
// sub-block of zeros stores nothing and does not advance the qs and signs positions, so the
// next sub-block's indices and signs take its place (the decoder then reads them for the
// wrong sub-block; ggml's layout, kept byte for byte).
func quantizeBlockIQ3S(lat *iq3Lattice, y *[110]byte, x, qw *[256]float32, b *iq3Block) {
	*y = [110]byte{}
	qs, qh, signs := y[2:66], y[66:74], y[74:106]
	var sumx2 float32
	for _, v := range x {
		sumx2 += float32(v * v)
	}
	sigma2 := float32(2*sumx2) / 256

	var scales [8]float32
	var maxScale float32
	p := iq3Params{ntry: 9}
	pos := 0 // ggml's qs and signs pointers, in sub-blocks
	for ib := 0; ib < 8; ib++ {
		var bqw *[32]float32
		if qw != nil {
			bqw = (*[32]float32)(qw[32*ib:])
		}
		scale, zero := lat.search(b, p, (*[32]float32)(x[32*ib:]), bqw, sigma2)
		if zero {
			continue
		}
		for k := 0; k < 8; k++ {
			qs[8*pos+k] = byte(b.index[k])
			qh[ib] |= byte(b.index[k]>>8) << k
		}
		copy(signs[4*pos:4*pos+4], b.signs[:])
		pos++
		scales[ib] = scale
		if !(maxScale > scale) { // MAX(max_scale, scale)
			maxScale = scale
		}
	}
	if maxScale == 0 {
		return
	}
	d := maxScale / 31
	putF16(y[0:2], float32(d*1.033)) // ggml's fudge factor
	id := 1 / d
	for ib := 0; ib < 8; ib += 2 {
		l1 := clamp(nearestInt(0.5*(float32(id*scales[ib])-1)), 0, 15)
		l2 := clamp(nearestInt(0.5*(float32(id*scales[ib+1])-1)), 0, 15)
		y[106+ib/2] = byte(l1 | l2<<4)
	}
}

// Dequantize is dequantize_row_iq3_s.
func (c iq3SCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := (*[110]byte)(src[110*i:]), (*[256]float32)(dst[256*i:])
		d := getF16(b[0:2])
		qs, qh, signs, scales := b[2:66], b[66:74], b[74:106], b[106:110]
		for ib := 0; ib < 8; ib++ {
			db := d * float32(1+2*int(scales[ib/2]>>(4*(ib%2))&0xf))
			for l := 0; l < 4; l++ {
				g1 := gguf.IQ3SGrid[int(qs[8*ib+2*l])|int(qh[ib])<<(8-2*l)&256]
				g2 := gguf.IQ3SGrid[int(qs[8*ib+2*l+1])|int(qh[ib])<<(7-2*l)&256]
				s := signs[4*ib+l]
				yl := y[32*ib+8*l : 32*ib+8*l+8]
				for j := 0; j < 4; j++ {
					yl[j] = float32(db*float32(uint8(g1>>(8*j)))) * signIQ(s, j)
					yl[j+4] = float32(db*float32(uint8(g2>>(8*j)))) * signIQ(s, j+4)
				}
			}
		}
	}
}
