package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/half"
)

// iq1MCodec is IQ1_M (1.75 bits per weight): super-blocks of 256 = 16 sub-blocks of 16 = 2
// groups of 8 on IQ1_S's grid, each group with its own shift sign. Layout (56 bytes): qs[32]
// (low 8 bits of the 11-bit grid indices), qh[16] (per sub-block, per group a nibble: 3 high
// index bits and the shift sign at bit 3), scales[8] as four little-endian uint16 (four 3-bit
// sub-block scales s each in bits 0–11; their top nibbles together are the fp16 d);
// w = d·(2s + 1)·(grid ± 0.125).
type iq1MCodec struct{ blockCodec }

func init() { register(iq1MCodec{blockCodec{gguf.IQ1_M}}) }

// groupMaxEpsIQ1M is ggml's GROUP_MAX_EPS_IQ1_M.
const groupMaxEpsIQ1M = 1e-7

// Quantize is quantize_iq1_m (quantize_row_iq1_m_impl per row, with or without imatrix).
func (c iq1MCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	checkQuantize(c, dst, src, nrows, nPerRow, imatrix)
	g := gridIQ1S()
	nb := nPerRow / 256
	for r := 0; r < nrows; r++ {
		for ibl := 0; ibl < nb; ibl++ {
			var qw []float32
			if imatrix != nil {
				qw = imatrix[256*ibl : 256*ibl+256]
			}
			o := r*nPerRow + 256*ibl
			y := dst[56*(r*nb+ibl) : 56*(r*nb+ibl)+56]
			quantizeIQ1MBlock(g, y, src[o:], qw)
		}
	}
}

// iq1MWeights fills w with the weights of the 16 values xb: qw·√(σ² + x²) with an importance
// matrix (qw its 16 entries), x² without.
func iq1MWeights(w *[16]float32, xb, qw []float32, sigma2 float32) {
	if qw != nil {
		for i, v := range xb[:16] {
			w[i] = qw[i] * sqrt32(sigma2+float32(v*v))
		}
	} else {
		for i, v := range xb[:16] {
			w[i] = v * v
		}
	}
}

// iq1MShiftOf is the shifted level table of group k (0 or 1) for the shift choice sk (0: +,+;
// 1: +,−; 2: −,+; 3: −,−).
func iq1MShiftOf(sk, k int) *[3]float32 {
	if k == 0 && sk < 2 || k == 1 && sk%2 == 0 {
		return &iq1XP
	}
	return &iq1XM
}

// quantizeIQ1MBlock is the body of quantize_row_iq1_m_impl for the super-block at the start of
// x; x runs on to the end of the Quantize call's input for the grid scan of
// iq1FindBestNeighbour2. qw is nil or the super-block's importance.
func quantizeIQ1MBlock(g *iqGrid, y []byte, x, qw []float32) {
	const bs = 16
	var (
		scales          [16]float32
		shifts          [16]int
		weight          [bs]float32
		idx, tmp        [bs]uint8
		L               [bs]int8
		index           [2]int
		maxScale, sumx2 float32
		x256            = x[:256]
		qs, qh, sc      = y[0:32], y[32:48], y[48:56]
		// terms[lv][j][a]: what sorted element j adds at level lv to accumulator a of the split
		// search (a = 0..3: Σw·q·x for the four shift choices, a = 4..7: Σw·q·q).
		terms [3][bs][8]float32
	)
	clear(y[:56])
	for _, v := range x256 {
		sumx2 += float32(v * v)
	}
	sigma2 := float32(float32(2*sumx2) / 256) // rounded: x/256 becomes x·2⁻⁸, which may fuse
	var qb []float32

	for ib := 0; ib < 256/bs; ib++ {
		xb := x256[bs*ib : bs*ib+bs]
		if qw != nil {
			qb = qw[bs*ib : bs*ib+bs]
		}
		iq1MWeights(&weight, xb, qb, sigma2)
		maxv := abs32(xb[0])
		for i := 1; i < bs; i++ {
			maxv = max32(maxv, abs32(xb[i]))
		}
		if maxv < groupMaxEpsIQ1M {
			scales[ib], shifts[ib] = 0, 0
			continue
		}
		for j := range idx {
			idx[j] = uint8(j)
		}
		iq1Sort(idx[:], tmp[:], xb)
		// ggml sums, for every split (i1, i2) of the sorted values into levels 0, 1, 2, each
		// element's terms into four pairs of accumulators, the first half of the sub-block with
		// x_p for choices 0, 1 and the second half with x_p for choices 0, 2 (x_m otherwise).
		// The terms are the same products, and the sums are built in ggml's order: the level-0
		// run is shared by all i2 of an i1, the level-1 run grows with i2, and only the level-2
		// run is summed afresh per split.
		for j := 0; j < bs; j++ {
			i := int(idx[j])
			for lv := 0; lv < 3; lv++ {
				tp := float32(weight[i] * iq1XP[lv])
				tm := float32(weight[i] * iq1XM[lv])
				qxp, qxm := float32(tp*xb[i]), float32(tm*xb[i])
				q2p, q2m := float32(tp*iq1XP[lv]), float32(tm*iq1XM[lv])
				t := &terms[lv][j]
				if i < bs/2 {
					*t = [8]float32{qxp, qxp, qxm, qxm, q2p, q2p, q2m, q2m}
				} else {
					*t = [8]float32{qxp, qxm, qxp, qxm, q2p, q2m, q2p, q2m}
				}
			}
		}
		scale, besti1, besti2, bestK := iq1MSplit(&terms, maxv)
		if besti1 < 0 || besti2 < 0 || bestK < 0 {
			scales[ib], shifts[ib] = 0, 0
			continue
		}
		for j := 0; j < bs; j++ {
			switch {
			case j < besti1:
				L[idx[j]] = 0
			case j < besti2:
				L[idx[j]] = 1
			default:
				L[idx[j]] = 2
			}
		}
		if scale < 0 {
			for j := range L {
				L[j] = 2 - L[j]
			}
			scale = -scale
			bestK = 3 - bestK
		}
		allOnGrid := true
		for k := 0; k < bs/8; k++ {
			lk := L[8*k : 8*k+8]
			p := iqPoint(lk)
			j, ok := g.lookup(p)
			if !ok {
				allOnGrid = false
				j = iq1FindBestNeighbour2(g, g.neighbours(p), xb[8*k:8*k+8], weight[8*k:8*k+8], scale,
					iq1MShiftOf(bestK, k), lk, x[bs*ib+8*k:])
			}
			index[k] = j
		}
		if !allOnGrid {
			var sumqx, sumq2 float32
			for k := 0; k < bs/8; k++ {
				xx, c := iq1MShiftOf(bestK, k), g.code[index[k]]
				for j := 0; j < 8; j++ {
					w, q := weight[8*k+j], xx[c>>(2*j)&3]
					sumqx += float32(float32(w*q) * xb[8*k+j])
					sumq2 += float32(float32(w*q) * q)
				}
			}
			if sumqx > 0 && sumq2 > 0 {
				scale = sumqx / sumq2
			}
		}
		qs[2*ib] = uint8(index[0])
		qs[2*ib+1] = uint8(index[1])
		qh[ib] = uint8(index[0]>>8) | uint8(index[1]>>8)<<4
		scales[ib], shifts[ib] = scale, bestK
		maxScale = max32(maxScale, scale)
	}
	if maxScale == 0 {
		return
	}
	masks := [4]uint8{0x00, 0x80, 0x08, 0x88}
	var s16 [4]uint16
	d := maxScale / 15
	id := 1 / d
	var sumqx, sumq2 float32
	for ib := 0; ib < 256/bs; ib++ {
		l := clamp(nearestInt(float32(0.5*float32(float32(id*scales[ib])-1))), 0, 7)
		s16[ib/4] |= uint16(l) << (3 * (ib % 4))
		qh[ib] |= masks[shifts[ib]]
		xb := x256[bs*ib : bs*ib+bs]
		if qw != nil {
			qb = qw[bs*ib : bs*ib+bs]
		}
		iq1MWeights(&weight, xb, qb, sigma2)
		for k := 0; k < bs/8; k++ {
			xx := iq1MShiftOf(shifts[ib], k)
			j := int(qs[2*ib+k]) + int(qh[ib])<<(8-4*k)&0x700
			c := g.code[j]
			for e := 0; e < 8; e++ {
				w, q := weight[8*k+e], float32(xx[c>>(2*e)&3]*float32(2*l+1))
				sumqx += float32(float32(w*q) * xb[8*k+e])
				sumq2 += float32(float32(w*q) * q)
			}
		}
	}
	if sumq2 > 0 {
		d = sumqx / sumq2
	}
	h := fp16(float32(d * 1.1125))
	s16[0] |= (h & 0x000f) << 12
	s16[1] |= (h & 0x00f0) << 8
	s16[2] |= (h & 0x0f00) << 4
	s16[3] |= h & 0xf000
	for i, v := range s16 {
		binary.LittleEndian.PutUint16(sc[2*i:], v)
	}
}

// iq1MSplit is the split search of quantize_row_iq1_m_impl on the terms of one sub-block
// (terms[lv][j]: what sorted element j adds at level lv to the eight accumulators): the split
// (i1, i2) and shift choice k (0..3) with the best score, in ggml's order of comparison, and
// the scale; besti1 = −1 when none qualifies. Each split's sums are built in ggml's order: the
// level-0 run is shared by all i2 of an i1, the level-1 run grows with i2, and only the
// level-2 run is summed afresh per split.
func iq1MSplit(terms *[3][16][8]float32, maxv float32) (scale float32, besti1, besti2, bestK int) {
	const bs = 16
	bestScore := float32(-maxFloat32)
	scale, besti1, besti2, bestK = maxv, -1, -1, -1
	var s1 [8]float32
	for i1 := 0; i1 <= bs; i1++ {
		if i1 > 0 {
			t := &terms[0][i1-1]
			for a := range s1 {
				s1[a] += t[a]
			}
		}
		s2 := s1
		for i2 := i1; i2 <= bs; i2++ {
			if i2 > i1 {
				t := &terms[1][i2-1]
				for a := range s2 {
					s2[a] += t[a]
				}
			}
			// Eight independent chains in locals, so that they stay in registers.
			a0, a1, a2, a3, a4, a5, a6, a7 := s2[0], s2[1], s2[2], s2[3], s2[4], s2[5], s2[6], s2[7]
			for j := i2; j < bs; j++ {
				t := &terms[2][j]
				a0 += t[0]
				a1 += t[1]
				a2 += t[2]
				a3 += t[3]
				a4 += t[4]
				a5 += t[5]
				a6 += t[6]
				a7 += t[7]
			}
			sums := [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
			for k := 0; k < 4; k++ {
				sumqx, sumq2 := sums[k], sums[4+k]
				if sumq2 > 0 && float32(sumqx*sumqx) > float32(bestScore*sumq2) {
					scale = sumqx / sumq2
					bestScore = scale * sumqx
					besti1, besti2, bestK = i1, i2, k
				}
			}
		}
	}
	return scale, besti1, besti2, bestK
}

// Dequantize is dequantize_row_iq1_m.
func (c iq1MCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[56*i:56*i+56], dst[256*i:256*i+256]
		var sc [4]uint16
		for k := range sc {
			sc[k] = binary.LittleEndian.Uint16(b[48+2*k:])
		}
		d := half.F16ToF32(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000)
		qs, qh := b[0:32], b[32:48]
		for ib := 0; ib < 8; ib++ {
			s := sc[ib/2] >> (6 * (ib % 2))
			dl1 := d * float32(2*(s&7)+1)
			dl2 := d * float32(2*(s>>3&7)+1)
			q, h := qs[4*ib:4*ib+4], qh[2*ib:2*ib+2]
			idx := [4]int{
				int(q[0]) | int(h[0])<<8&0x700,
				int(q[1]) | int(h[0])<<4&0x700,
				int(q[2]) | int(h[1])<<8&0x700,
				int(q[3]) | int(h[1])<<4&0x700,
			}
			delta := [4]float32{iq1Delta, iq1Delta, iq1Delta, iq1Delta}
			for l, m := range [4]uint8{h[0] & 0x08, h[0] & 0x80, h[1] & 0x08, h[1] & 0x80} {
				if m != 0 {
					delta[l] = -iq1Delta
				}
			}
			for l := 0; l < 4; l++ {
				dl := dl1
				if l >= 2 {
					dl = dl2
				}
				grid := gguf.IQ1SGrid[idx[l]]
				yl := y[32*ib+8*l : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					yl[j] = dl * (float32(int8(grid>>(8*j))) + delta[l])
				}
			}
		}
	}
}
