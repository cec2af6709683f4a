package kernels

import "encoding/binary"

// The generic integer dot products below follow ggml-cpu's ggml_vec_dot_*_generic: the sum of
// each block (or sub-block) is an exact integer, scaled and added in float32. Products are
// wrapped in float32() so that the compiler does not fuse them into FMAs (same result on every
// GOAMD64 level). Each returns the dot product of one weight row with one activation row.

// dotQ4_0Q8_0 also serves IQ4_NL when lut is not nil.
func dotQ4_0Q8_0(w []byte, q []int8, d []float32, lut *[16]int8) float32 {
	var sumf float32
	for b := range d {
		blk := w[18*b : 18*b+18]
		qb := q[32*b : 32*b+32]
		var sumi int32
		for j := 0; j < 16; j++ {
			v := blk[2+j]
			var v0, v1 int32
			if lut == nil {
				v0, v1 = int32(v&15)-8, int32(v>>4)-8
			} else {
				v0, v1 = int32(lut[v&15]), int32(lut[v>>4])
			}
			sumi += v0*int32(qb[j]) + v1*int32(qb[j+16])
		}
		sumf += float32(float32(sumi) * float32(f16ToF32(le16(blk))*d[b]))
	}
	return sumf
}

// dotQ4_1Q8_1 is ggml_vec_dot_q4_1_q8_1: d_w·d_a·Σq·a + m_w·s_a per block.
func dotQ4_1Q8_1(w []byte, q []int8, d, s []float32) float32 {
	var sumf float32
	for b := range d {
		blk := w[20*b : 20*b+20]
		qb := q[32*b : 32*b+32]
		var sumi int32
		for j := 0; j < 16; j++ {
			v := blk[4+j]
			sumi += int32(v&15)*int32(qb[j]) + int32(v>>4)*int32(qb[j+16])
		}
		dw, mw := f16ToF32(le16(blk)), f16ToF32(le16(blk[2:]))
		sumf += float32(float32(dw*d[b])*float32(sumi)) + float32(mw*s[b])
	}
	return sumf
}

// dotQ5Q8 is ggml_vec_dot_q5_0_q8_0 (s == nil) or ggml_vec_dot_q5_1_q8_1.
func dotQ5Q8(w []byte, q []int8, d, s []float32) float32 {
	bs, off, bias := 22, 2, int32(16)
	if s != nil {
		bs, off, bias = 24, 4, 0
	}
	var sumf float32
	for b := range d {
		blk := w[bs*b : bs*b+bs]
		qh := binary.LittleEndian.Uint32(blk[off:])
		qs := blk[off+4:]
		qb := q[32*b : 32*b+32]
		var sumi int32
		for j := 0; j < 16; j++ {
			x0 := int32(qs[j]&15) | int32((qh>>j)<<4)&0x10
			x1 := int32(qs[j]>>4) | int32(qh>>(j+12))&0x10
			sumi += (x0-bias)*int32(qb[j]) + (x1-bias)*int32(qb[j+16])
		}
		dd := float32(f16ToF32(le16(blk)) * d[b])
		if s == nil {
			sumf += float32(dd * float32(sumi))
		} else {
			sumf += float32(dd*float32(sumi)) + float32(f16ToF32(le16(blk[2:]))*s[b])
		}
	}
	return sumf
}

func dotQ8_0Q8_0(w []byte, q []int8, d []float32) float32 {
	var sumf float32
	for b := range d {
		blk := w[34*b : 34*b+34]
		qb := q[32*b : 32*b+32]
		var sumi int32
		for j, v := range qb {
			sumi += int32(int8(blk[2+j])) * int32(v)
		}
		sumf += float32(float32(sumi) * float32(f16ToF32(le16(blk))*d[b]))
	}
	return sumf
}

// dotQ45KQ8K is ggml_vec_dot_q4_K_q8_K (q5 false) or ggml_vec_dot_q5_K_q8_K (q5 true):
// per super-block d·d_a·Σ_j sc_j·(Σq·a)_j − dmin·d_a·Σ_j m_j·(Σa)_j.
func dotQ45KQ8K(w []byte, q []int8, d []float32, bsums []int16, q5 bool) float32 {
	bs := 144
	if q5 {
		bs = 176
	}
	var sumf float32
	for b := range d {
		blk := w[bs*b : bs*b+bs]
		sc := blk[4:16]
		qs, qh := blk[16:], []byte(nil)
		if q5 {
			qh, qs = blk[16:48], blk[48:]
		}
		qb := q[256*b : 256*b+256]
		bsb := bsums[16*b : 16*b+16]
		var sumi, summ int32
		for j := 0; j < 8; j++ {
			s, m := scaleMinK4(j, sc)
			summ += int32(m) * (int32(bsb[2*j]) + int32(bsb[2*j+1]))
			var dot int32
			for l := 0; l < 32; l++ {
				v := qs[32*(j/2)+l]
				var x int32
				if j%2 == 0 {
					x = int32(v & 15)
				} else {
					x = int32(v >> 4)
				}
				if qh != nil {
					x += int32(qh[l]>>j&1) << 4
				}
				dot += x * int32(qb[32*j+l])
			}
			sumi += int32(s) * dot
		}
		dw, dmin := f16ToF32(le16(blk)), f16ToF32(le16(blk[2:]))
		sumf += float32(float32(dw*d[b])*float32(sumi)) - float32(float32(dmin*d[b])*float32(summ))
	}
	return sumf
}

// dotQ6KQ8K is ggml_vec_dot_q6_K_q8_K: d·d_a·Σ_j sc_j·(Σ(q−32)·a)_j over 16 sub-blocks of 16.
func dotQ6KQ8K(w []byte, q []int8, d []float32) float32 {
	var sumf float32
	var vals [256]int32
	for b := range d {
		blk := w[210*b : 210*b+210]
		for n := 0; n < 2; n++ {
			ql, qh := blk[64*n:], blk[128+32*n:]
			v := vals[128*n:]
			for l := 0; l < 32; l++ {
				v[l] = int32(ql[l]&15|(qh[l]&3)<<4) - 32
				v[l+32] = int32(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				v[l+64] = int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				v[l+96] = int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
		}
		qb := q[256*b : 256*b+256]
		var sumi int32
		for j := 0; j < 16; j++ {
			var dot int32
			for l := 16 * j; l < 16*j+16; l++ {
				dot += vals[l] * int32(qb[l])
			}
			sumi += int32(int8(blk[192+j])) * dot
		}
		sumf += float32(float32(f16ToF32(le16(blk[208:]))*d[b]) * float32(sumi))
	}
	return sumf
}

// dotF32 returns Σ w[i]·x[i] in float32, summed in order.
func dotF32(w, x []float32) float32 {
	var s float32
	for i, v := range w {
		s += float32(v * x[i])
	}
	return s
}

// dotQ2KQ8K is ggml_vec_dot_q2_K_q8_K_generic: per super-block
// d_a·d·Σ_j sc_j·(Σq·a)_j − d_a·dmin·Σ_j m_j·bsum_j over 16 sub-blocks of 16.
func dotQ2KQ8K(w []byte, q []int8, d []float32, bsums []int16) float32 {
	var sumf float32
	for b := range d {
		blk := w[84*b : 84*b+84]
		sc, qs := blk[:16], blk[16:80]
		qb := q[256*b : 256*b+256]
		var summs int32
		for j := 0; j < 16; j++ {
			summs += int32(bsums[16*b+j]) * int32(sc[j]>>4)
		}
		dall := float32(d[b] * f16ToF32(le16(blk[80:])))
		dmin := float32(d[b] * f16ToF32(le16(blk[82:])))
		var isum int32
		is := 0
		for c := 0; c < 2; c++ {
			for j := 0; j < 4; j++ {
				for h := 0; h < 2; h++ {
					var s int32
					for l := 0; l < 16; l++ {
						s += int32(qb[128*c+32*j+16*h+l]) * int32(qs[32*c+16*h+l]>>(2*j)&3)
					}
					isum += int32(sc[is]&15) * s
					is++
				}
			}
		}
		sumf += float32(dall*float32(isum)) - float32(dmin*float32(summs))
	}
	return sumf
}

// dotQ3KQ8K is ggml_vec_dot_q3_K_q8_K_generic: eight int32 lanes (element mod 8) accumulate
// (sc−32)·q·a per super-block, are scaled by d·d_a into eight float sums, added at the end.
func dotQ3KQ8K(w []byte, q []int8, d []float32) float32 {
	var sums [8]float32
	for b := range d {
		blk := w[110*b : 110*b+110]
		hm, qs := blk[:32], blk[32:96]
		qb := q[256*b : 256*b+256]
		var aux32 [8]int32
		for c := 0; c < 2; c++ {
			for j := 0; j < 4; j++ {
				m := byte(1) << (4*c + j)
				for h := 0; h < 2; h++ {
					sc := int32(q3KScale(blk[96:108], 8*c+2*j+h) - 32)
					for l := 16 * h; l < 16*h+16; l++ {
						v := int32(qs[32*c+l] >> (2 * j) & 3)
						if hm[l]&m == 0 {
							v -= 4
						}
						aux32[l%8] += sc * int32(int16(int32(qb[128*c+32*j+l])*v))
					}
				}
			}
		}
		dd := float32(f16ToF32(le16(blk[108:])) * d[b])
		for l := range sums {
			sums[l] += float32(dd * float32(aux32[l]))
		}
	}
	var sumf float32
	for _, v := range sums {
		sumf += v
	}
	return sumf
}

// dotIQ4XSQ8K is ggml_vec_dot_iq4_xs_q8_K_generic: per sub-block of 32,
// d·d_a·(ls−32)·Σ codebook(q)·a.
func dotIQ4XSQ8K(w []byte, q []int8, d []float32) float32 {
	var sumf float32
	for b := range d {
		blk := w[136*b : 136*b+136]
		d4d8 := float32(f16ToF32(le16(blk)) * d[b])
		qb := q[256*b : 256*b+256]
		for ib := 0; ib < 8; ib++ {
			dl := float32(d4d8 * float32(iq4XSScale(blk, ib)-32))
			qs := blk[8+16*ib : 8+16*ib+16]
			var s1, s2 int32
			for j := 0; j < 16; j++ {
				s1 += int32(qb[32*ib+j]) * int32(kvaluesIQ4NL[qs[j]&15])
				s2 += int32(qb[32*ib+j+16]) * int32(kvaluesIQ4NL[qs[j]>>4])
			}
			sumf += float32(dl * float32(s1+s2))
		}
	}
	return sumf
}
