package kernels

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
)

// The i-quants on a grid (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and the
// ternary types (TQ1_0, TQ2_0) in generic Go: dequantIQ ports ggml's dequantize_row_*
// (ggml-quants.c), the dot* functions ggml-cpu's ggml_vec_dot_*_q8_K_generic (quants.c), with
// the same integer sums and the float32 operations in the same order (each product wrapped in
// float32() so that it is never fused into an FMA). The grids and ksigns_iq2xs are formats/gguf's
// tables (generated from ggml-common.h). All of these take Q8_K activations.

// gridByte returns byte j of a grid point of 8 bytes.
func gridByte(g uint64, j int) int32 { return int32(uint8(g >> (8 * j))) }

// gridByte4 returns byte j of a grid point of 4 bytes.
func gridByte4(g uint32, j int) int32 { return int32(uint8(g >> (8 * j))) }

// gridSByte returns byte j of an IQ1_S grid point (signed: −1, 0, 1).
func gridSByte(g uint64, j int) int32 { return int32(int8(g >> (8 * j))) }

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// signed returns v, negated when bit j of signs is set (ggml's kmask_iq2xs test).
func signed(v int32, signs uint8, j int) int32 {
	if signs>>j&1 != 0 {
		return -v
	}
	return v
}

// signedF is signed for float32 (the ±1.f factor of the dequantizers: exact).
func signedF(v float32, signs uint8, j int) float32 {
	if signs>>j&1 != 0 {
		return -v
	}
	return v
}

// iq2sIndex returns IQ2_S's grid index of group l (0..3) of sub-block ib from its block.
func iq2sIndex(blk []byte, ib, l int) int {
	return int(blk[2+4*ib+l]) | int(blk[66+ib])<<(8-2*l)&0x300
}

// iq3sIndex returns IQ3_S's grid index of half h (0, 1) of group l (0..3) of sub-block ib.
func iq3sIndex(blk []byte, ib, l, h int) int {
	return int(blk[2+8*ib+2*l+h]) | int(blk[66+ib])<<(8-2*l-h)&256
}

// iq1sIndex returns IQ1_S's grid index of group l (0..3) of sub-block ib, and qh[ib].
func iq1sIndex(blk []byte, ib, l int) (int, uint16) {
	qh := le16(blk[34+2*ib:])
	return int(blk[2+4*ib+l]) | int(qh>>(3*l)&7)<<8, qh
}

// iq1mIndex returns IQ1_M's grid index of group l (0..3) of sub-block ib, and whether its
// delta is negative.
func iq1mIndex(blk []byte, ib, l int) (int, bool) {
	qh := blk[32+2*ib+l/2]
	return int(blk[4*ib+l]) | int(uint16(qh)<<(8-4*(l%2))&0x700), qh&(0x08<<(4*(l%2))) != 0
}

// iq1mScale returns IQ1_M's super-block scale: the fp16 spread over the top nibbles of its
// four 16-bit scale words.
func iq1mScale(blk []byte) uint16 {
	sc := blk[48:56]
	s0, s1, s2, s3 := le16(sc), le16(sc[2:]), le16(sc[4:]), le16(sc[6:])
	return s0>>12 | s1>>8&0x00f0 | s2>>4&0x0f00 | s3&0xf000
}

// iq1mLs returns IQ1_M's 3-bit scale of half h (0, 1) of sub-block ib, as 2·s+1.
func iq1mLs(blk []byte, ib, h int) int32 {
	return 2*int32(le16(blk[48+2*(ib/2):])>>(6*(ib%2)+3*h)&7) + 1
}

// tq1Trit returns TQ1_0's trit (0..2) of byte q at position n (0..4), as ggml extracts it:
// the byte times 3^n, modulo 256, times 3, over 256.
func tq1Trit(q byte, n int) int32 {
	v := q * [5]uint8{1, 3, 9, 27, 81}[n]
	return int32(uint16(v) * 3 >> 8)
}

// tq1Code returns TQ1_0's trit (0..2, value − 1) of element e of a block.
func tq1Code(blk []byte, e int) int32 {
	switch {
	case e < 160: // qs[0:32], five elements per byte, 32 apart
		return tq1Trit(blk[e%32], e/32)
	case e < 240: // qs[32:48], 16 apart
		e -= 160
		return tq1Trit(blk[32+e%16], e/16)
	}
	e -= 240 // qh[4], four apart
	return tq1Trit(blk[48+e%4], e/4)
}

// dequantIQ decodes the blocks of src (type t, one of this file's) into dst, as ggml's
// dequantize_row_* does.
func dequantIQ(t WType, dst []float32, src []byte) {
	bs := t.TypeSize()
	for b := 0; b < len(dst)/256; b++ {
		blk := src[bs*b : bs*b+bs]
		y := dst[256*b : 256*b+256]
		switch t {
		case IQ2_XXS:
			d := f16ToF32(le16(blk))
			for ib := 0; ib < 8; ib++ {
				e := blk[2+8*ib:]
				aux1 := le32(e[4:])
				db := float32(d*(0.5+float32(aux1>>28))) * 0.25
				for l := 0; l < 4; l++ {
					grid := gguf.IQ2XXSGrid[e[l]]
					signs := gguf.KSignsIQ2XS[aux1>>(7*l)&127]
					for j := 0; j < 8; j++ {
						y[32*ib+8*l+j] = signedF(db*float32(gridByte(grid, j)), signs, j)
					}
				}
			}
		case IQ2_XS, IQ2_S:
			d := f16ToF32(le16(blk))
			for ib := 0; ib < 8; ib++ {
				sc := blk[66+ib]
				if t == IQ2_S {
					sc = blk[74+ib]
				}
				db := [2]float32{float32(d*(0.5+float32(sc&15))) * 0.25, float32(d*(0.5+float32(sc>>4))) * 0.25}
				for l := 0; l < 4; l++ {
					var grid uint64
					var signs uint8
					if t == IQ2_XS {
						q := le16(blk[2+8*ib+2*l:])
						grid, signs = gguf.IQ2XSGrid[q&511], gguf.KSignsIQ2XS[q>>9]
					} else {
						grid, signs = gguf.IQ2SGrid[iq2sIndex(blk, ib, l)], blk[34+4*ib+l]
					}
					for j := 0; j < 8; j++ {
						y[32*ib+8*l+j] = signedF(db[l/2]*float32(gridByte(grid, j)), signs, j)
					}
				}
			}
		case IQ3_XXS:
			d := f16ToF32(le16(blk))
			for ib := 0; ib < 8; ib++ {
				aux := le32(blk[66+4*ib:])
				db := float32(d*(0.5+float32(aux>>28))) * 0.5
				for l := 0; l < 4; l++ {
					signs := gguf.KSignsIQ2XS[aux>>(7*l)&127]
					g1, g2 := gguf.IQ3XXSGrid[blk[2+8*ib+2*l]], gguf.IQ3XXSGrid[blk[2+8*ib+2*l+1]]
					for j := 0; j < 4; j++ {
						y[32*ib+8*l+j] = signedF(db*float32(gridByte4(g1, j)), signs, j)
						y[32*ib+8*l+j+4] = signedF(db*float32(gridByte4(g2, j)), signs, j+4)
					}
				}
			}
		case IQ3_S:
			d := f16ToF32(le16(blk))
			for ib := 0; ib < 8; ib++ {
				db := d * float32(1+2*int32(blk[106+ib/2]>>(4*(ib%2))&15))
				for l := 0; l < 4; l++ {
					signs := blk[74+4*ib+l]
					g1, g2 := gguf.IQ3SGrid[iq3sIndex(blk, ib, l, 0)], gguf.IQ3SGrid[iq3sIndex(blk, ib, l, 1)]
					for j := 0; j < 4; j++ {
						y[32*ib+8*l+j] = signedF(db*float32(gridByte4(g1, j)), signs, j)
						y[32*ib+8*l+j+4] = signedF(db*float32(gridByte4(g2, j)), signs, j+4)
					}
				}
			}
		case IQ1_S:
			d := f16ToF32(le16(blk))
			for ib := 0; ib < 8; ib++ {
				for l := 0; l < 4; l++ {
					idx, qh := iq1sIndex(blk, ib, l)
					dl := d * float32(2*int32(qh>>12&7)+1)
					delta := float32(0.125)
					if qh&0x8000 != 0 {
						delta = -0.125
					}
					grid := gguf.IQ1SGrid[idx]
					for j := 0; j < 8; j++ {
						y[32*ib+8*l+j] = dl * (float32(gridSByte(grid, j)) + delta)
					}
				}
			}
		case IQ1_M:
			d := f16ToF32(iq1mScale(blk))
			for ib := 0; ib < 8; ib++ {
				for l := 0; l < 4; l++ {
					dl := d * float32(iq1mLs(blk, ib, l/2))
					idx, neg := iq1mIndex(blk, ib, l)
					delta := float32(0.125)
					if neg {
						delta = -0.125
					}
					grid := gguf.IQ1SGrid[idx]
					for j := 0; j < 8; j++ {
						y[32*ib+8*l+j] = dl * (float32(gridSByte(grid, j)) + delta)
					}
				}
			}
		case TQ1_0:
			d := f16ToF32(le16(blk[52:]))
			for e := range y {
				y[e] = float32(tq1Code(blk, e)-1) * d
			}
		case TQ2_0:
			d := f16ToF32(le16(blk[64:]))
			for e := range y {
				y[e] = float32(int32(blk[32*(e/128)+e%32]>>(2*(e%128/32))&3)-1) * d
			}
		}
	}
}

// dotIQ2Q8K is ggml_vec_dot_iq2_xxs_q8_K_generic, ggml_vec_dot_iq2_xs_q8_K_generic or
// ggml_vec_dot_iq2_s_q8_K_generic (t): per super-block d·d_a·Σ_sub-blocks ls·Σ ±grid·a,
// the whole times 1/8.
func dotIQ2Q8K(t WType, w []byte, q []int8, d []float32) float32 {
	bs := t.TypeSize()
	var sumf float32
	for b := range d {
		blk := w[bs*b : bs*b+bs]
		dd := float32(f16ToF32(le16(blk)) * d[b])
		qb := q[256*b : 256*b+256]
		var bsum int32
		for ib := 0; ib < 8; ib++ {
			var ls [2]int32
			var aux1 uint32
			switch t {
			case IQ2_XXS:
				aux1 = le32(blk[6+8*ib:])
				ls[0] = int32(2*(aux1>>28) + 1)
				ls[1] = ls[0]
			case IQ2_XS:
				ls = [2]int32{2*int32(blk[66+ib]&15) + 1, 2*int32(blk[66+ib]>>4) + 1}
			case IQ2_S:
				ls = [2]int32{1 + 2*int32(blk[74+ib]&15), 1 + 2*int32(blk[74+ib]>>4)}
			}
			var sumi [2]int32
			for l := 0; l < 4; l++ {
				var grid uint64
				var signs uint8
				switch t {
				case IQ2_XXS:
					grid, signs = gguf.IQ2XXSGrid[blk[2+8*ib+l]], gguf.KSignsIQ2XS[aux1>>(7*l)&127]
				case IQ2_XS:
					v := le16(blk[2+8*ib+2*l:])
					grid, signs = gguf.IQ2XSGrid[v&511], gguf.KSignsIQ2XS[v>>9]
				case IQ2_S:
					grid, signs = gguf.IQ2SGrid[iq2sIndex(blk, ib, l)], blk[34+4*ib+l]
				}
				for j := 0; j < 8; j++ {
					sumi[l/2] += signed(gridByte(grid, j)*int32(qb[32*ib+8*l+j]), signs, j)
				}
			}
			if t == IQ2_XXS {
				bsum += (sumi[0] + sumi[1]) * ls[0]
			} else {
				bsum += ls[0]*sumi[0] + ls[1]*sumi[1]
			}
		}
		sumf += float32(dd * float32(bsum))
	}
	return float32(0.125 * sumf)
}

// dotIQ3XXSQ8K is ggml_vec_dot_iq3_xxs_q8_K_generic: as the IQ2 ones with 4-byte grid points
// and the whole times 1/4.
func dotIQ3XXSQ8K(w []byte, q []int8, d []float32) float32 {
	var sumf float32
	for b := range d {
		blk := w[98*b : 98*b+98]
		dd := float32(f16ToF32(le16(blk)) * d[b])
		qb := q[256*b : 256*b+256]
		var bsum int32
		for ib := 0; ib < 8; ib++ {
			aux := le32(blk[66+4*ib:])
			ls := int32(2*(aux>>28) + 1)
			var sumi int32
			for l := 0; l < 4; l++ {
				g1, g2 := gguf.IQ3XXSGrid[blk[2+8*ib+2*l]], gguf.IQ3XXSGrid[blk[2+8*ib+2*l+1]]
				signs := gguf.KSignsIQ2XS[aux>>(7*l)&127]
				a := qb[32*ib+8*l:]
				for j := 0; j < 4; j++ {
					sumi += signed(gridByte4(g1, j)*int32(a[j]), signs, j)
					sumi += signed(gridByte4(g2, j)*int32(a[j+4]), signs, j+4)
				}
			}
			bsum += sumi * ls
		}
		sumf += float32(dd * float32(bsum))
	}
	return float32(0.25 * sumf)
}

// dotIQ3SQ8K is ggml_vec_dot_iq3_s_q8_K_generic.
func dotIQ3SQ8K(w []byte, q []int8, d []float32) float32 {
	var sumf float32
	for b := range d {
		blk := w[110*b : 110*b+110]
		dd := float32(f16ToF32(le16(blk)) * d[b])
		qb := q[256*b : 256*b+256]
		var bsum int32
		for ib := 0; ib < 8; ib++ {
			ls := 2*int32(blk[106+ib/2]>>(4*(ib%2))&15) + 1
			var sumi int32
			for l := 0; l < 4; l++ {
				g1, g2 := gguf.IQ3SGrid[iq3sIndex(blk, ib, l, 0)], gguf.IQ3SGrid[iq3sIndex(blk, ib, l, 1)]
				signs := blk[74+4*ib+l]
				a := qb[32*ib+8*l:]
				for j := 0; j < 4; j++ {
					sumi += signed(gridByte4(g1, j)*int32(a[j]), signs, j)
					sumi += signed(gridByte4(g2, j)*int32(a[j+4]), signs, j+4)
				}
			}
			bsum += sumi * ls
		}
		sumf += float32(dd * float32(bsum))
	}
	return sumf
}

// dotIQ1Q8K is ggml_vec_dot_iq1_s_q8_K_generic or ggml_vec_dot_iq1_m_q8_K_generic (t): per
// super-block d·d_a·(Σ ls·Σ grid·a + 1/8·Σ ls·δ·Σa), δ = ±1 per 32 (IQ1_S) or 8 (IQ1_M)
// elements.
func dotIQ1Q8K(t WType, w []byte, q []int8, d []float32, bsums []int16) float32 {
	bs := t.TypeSize()
	var sumf float32
	for b := range d {
		blk := w[bs*b : bs*b+bs]
		qb := q[256*b : 256*b+256]
		var sumi, sumi1 int32
		for ib := 0; ib < 8; ib++ {
			if t == IQ1_S {
				_, qh := iq1sIndex(blk, ib, 0)
				ls := 2*int32(qh>>12&7) + 1
				delta := int32(1)
				if qh&0x8000 != 0 {
					delta = -1
				}
				var lsum int32
				for l := 0; l < 4; l++ {
					idx, _ := iq1sIndex(blk, ib, l)
					grid := gguf.IQ1SGrid[idx]
					for j := 0; j < 8; j++ {
						lsum += int32(qb[32*ib+8*l+j]) * gridSByte(grid, j)
					}
				}
				sumi += ls * lsum
				sumi1 += ls * delta * (int32(bsums[16*b+2*ib]) + int32(bsums[16*b+2*ib+1]))
				continue
			}
			var sum1, sum2 [2]int32
			for l := 0; l < 4; l++ {
				idx, neg := iq1mIndex(blk, ib, l)
				grid := gguf.IQ1SGrid[idx]
				var lsum1, lsum2 int32
				for j := 0; j < 8; j++ {
					a := int32(qb[32*ib+8*l+j])
					lsum1 += a * gridSByte(grid, j)
					lsum2 += a
				}
				sum1[l/2] += lsum1
				if neg {
					lsum2 = -lsum2
				}
				sum2[l/2] += lsum2
			}
			ls1, ls2 := iq1mLs(blk, ib, 0), iq1mLs(blk, ib, 1)
			sumi += sum1[0]*ls1 + sum1[1]*ls2
			sumi1 += sum2[0]*ls1 + sum2[1]*ls2
		}
		var dx float32
		if t == IQ1_S {
			dx = f16ToF32(le16(blk))
		} else {
			dx = f16ToF32(iq1mScale(blk))
		}
		sumf += float32(float32(dx*d[b]) * (float32(sumi) + float32(0.125*float32(sumi1))))
	}
	return sumf
}

// dotTQ1Q8K is ggml_vec_dot_tq1_0_q8_K_generic and dotTQ2Q8K ggml_vec_dot_tq2_0_q8_K_generic:
// per block Σ(trit − 1)·a times d·d_a. Both store the elements in the activations' order, so
// element e of the block meets activation e.
func dotTQ1Q8K(w []byte, q []int8, d []float32) float32 {
	var sumf float32
	for b := range d {
		blk := w[54*b : 54*b+54]
		qb := q[256*b : 256*b+256]
		var sum int32
		for e, a := range qb {
			sum += (tq1Code(blk, e) - 1) * int32(a)
		}
		sumf += float32(float32(sum) * float32(f16ToF32(le16(blk[52:]))*d[b]))
	}
	return sumf
}

func dotTQ2Q8K(w []byte, q []int8, d []float32) float32 {
	var sumf float32
	for b := range d {
		blk := w[66*b : 66*b+66]
		qb := q[256*b : 256*b+256]
		var sumi int32
		for e, a := range qb {
			sumi += int32(a) * (int32(blk[32*(e/128)+e%32]>>(2*(e%128/32))&3) - 1)
		}
		sumf += float32(float32(sumi) * float32(d[b]*f16ToF32(le16(blk[64:]))))
	}
	return sumf
}
