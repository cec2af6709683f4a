package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
)

// iq1SCodec is IQ1_S (1.5625 bits per weight): super-blocks of 256 = 8 sub-blocks of 32 = 4
// groups of 8 on a 2048-point grid of levels −1, 0, 1 (IQ1SGrid). Layout (50 bytes): fp16 d,
// qs[32] (low 8 bits of the 11-bit grid indices), qh[8] little-endian uint16 per sub-block
// (3 high index bits per group, a 3-bit scale s at bits 12–14, the sign of the shift at bit
// 15); w = d·(2s + 1)·(grid ± 0.125).
type iq1SCodec struct{ blockCodec }

func init() { register(iq1SCodec{blockCodec{gguf.IQ1_S}}) }

// groupMaxEpsIQ1S is ggml's GROUP_MAX_EPS_IQ1_S.
const groupMaxEpsIQ1S = 1e-12

// Quantize is quantize_iq1_s (quantize_row_iq1_s_impl per row). ggml requires the importance
// matrix: without one it panics (see RequiresImatrix).
func (c iq1SCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	mustHaveImatrix(c, imatrix)
	checkQuantize(c, dst, src, nrows, nPerRow, imatrix)
	g := gridIQ1S()
	nb := nPerRow / 256
	for r := 0; r < nrows; r++ {
		for ibl := 0; ibl < nb; ibl++ {
			o := r*nPerRow + 256*ibl
			y := dst[50*(r*nb+ibl) : 50*(r*nb+ibl)+50]
			quantizeIQ1SBlock(g, y, src[o:], imatrix[256*ibl:256*ibl+256])
		}
	}
}

// quantizeIQ1SBlock is the body of quantize_row_iq1_s_impl for the super-block at the start of
// x; x runs on to the end of the Quantize call's input for the grid scan of
// iq1FindBestNeighbour2.
func quantizeIQ1SBlock(g *iqGrid, y []byte, x, qw []float32) {
	const bs = 32
	var (
		scales          [8]float32
		shifts          [8]int8
		weight          [bs]float32
		sumx, sumw      [bs + 1]float32
		idx, tmp        [bs]uint8
		L               [bs]int8
		index           [4]int
		sp              iq1SSplit
		maxScale, sumx2 float32
		x256            = x[:256]
		qs, qh          = y[2:34], y[34:50]
	)
	clear(y[:50])
	for _, v := range x256 {
		sumx2 += float32(v * v)
	}
	sigma2 := float32(float32(2*sumx2) / 256) // rounded: x/256 becomes x·2⁻⁸, which may fuse

	for ib := 0; ib < 256/bs; ib++ {
		xb, qb := x256[bs*ib:bs*ib+bs], qw[bs*ib:bs*ib+bs]
		for i, v := range xb {
			weight[i] = qb[i] * sqrt32(sigma2+float32(v*v))
		}
		maxv := abs32(xb[0])
		for i := 1; i < bs; i++ {
			maxv = max32(maxv, abs32(xb[i]))
		}
		if maxv < groupMaxEpsIQ1S {
			scales[ib], shifts[ib] = 0, 1
			continue
		}
		// The split search of ggml: with levels −1, 0, 1 the best levels split the sorted values
		// into three runs, and prefix sums of w·x and w give every split's scale and score.
		for j := range idx {
			idx[j] = uint8(j)
		}
		iq1Sort(idx[:], tmp[:], xb)
		sumx[0], sumw[0] = 0, 0
		for j := 0; j < bs; j++ {
			i := idx[j]
			sumx[j+1] = sumx[j] + float32(weight[i]*xb[i])
			sumw[j+1] = sumw[j] + weight[i]
		}
		for i := 0; i <= bs; i++ {
			for s, xs := range [2]*[3]float32{&iq1XP, &iq1XM} {
				sp.sx[2*i+s], sp.sw[2*i+s] = sumx[i], sumw[i]
				sp.ax[2*i+s] = (sumx[i] - sumx[0]) * xs[0]
				sp.cx[2*i+s] = (sumx[bs] - sumx[i]) * xs[2]
				sp.aw[2*i+s] = float32((sumw[i]-sumw[0])*xs[0]) * xs[0]
				sp.cw[2*i+s] = float32((sumw[bs]-sumw[i])*xs[2]) * xs[2]
			}
		}
		sp.search(maxv)
		scale, besti1, besti2, bestShift := sp.scale, int(sp.i1), int(sp.i2), int(sp.shift)
		if besti1 < 0 || besti2 < 0 || bestShift == 0 {
			scales[ib], shifts[ib] = 0, 1
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
			scale, bestShift = -scale, -bestShift
		}
		xx := &iq1XP
		if bestShift != 1 {
			xx = &iq1XM
		}
		allOnGrid := true
		for k := 0; k < bs/8; k++ {
			lk := L[8*k : 8*k+8]
			p := iqPoint(lk)
			j, ok := g.lookup(p)
			if !ok {
				allOnGrid = false
				j = iq1FindBestNeighbour2(g, g.neighbours(p), xb[8*k:8*k+8], weight[8*k:8*k+8], scale, xx, lk, x[bs*ib+8*k:])
			}
			index[k] = j
		}
		if !allOnGrid {
			var sumqx, sumq2 float32
			for k := 0; k < bs/8; k++ {
				c := g.code[index[k]]
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
		var h uint16
		for k := 0; k < bs/8; k++ {
			qs[bs/8*ib+k] = uint8(index[k])
			h |= uint16(index[k]>>8) << (3 * k)
		}
		binary.LittleEndian.PutUint16(qh[2*ib:], h)
		scales[ib], shifts[ib] = scale, int8(bestShift)
		maxScale = max32(maxScale, scale)
	}
	if maxScale == 0 {
		return
	}
	d := maxScale / 15
	putF16(y[0:2], float32(d*1.125))
	id := 1 / d
	for ib := 0; ib < 256/bs; ib++ {
		l := clamp(nearestInt(float32(0.5*float32(float32(id*scales[ib])-1))), 0, 7)
		if shifts[ib] == -1 {
			l |= 8
		}
		h := binary.LittleEndian.Uint16(qh[2*ib:])
		binary.LittleEndian.PutUint16(qh[2*ib:], h|uint16(l)<<12)
	}
}

// iq1SSplit is the data of quantize_row_iq1_s_impl's split search for one sub-block of 32:
// with levels −1, 0, 1 the best levels split the sorted values into three runs, and prefix sums
// of w·x and w give every split's Σw·x·q and Σw·q², for both shifts of the levels (x_p, x_m).
// Entry 2i + s is split point i (0..32) with shift s (0: x_p, 1: x_m), interleaved for
// iq1SSplitAVX512 (iq_search_amd64.s), which evaluates 8 split points × 2 shifts per vector.
type iq1SSplit struct {
	sx, sw [80]float32 // Σw·x and Σw over the first i sorted values (the same for both s); 0 beyond 66
	cx, cw [80]float32 // the third run's terms: (sx_32 − sx_i)·xs_2 and ((sw_32 − sw_i)·xs_2)·xs_2
	ax, aw [66]float32 // the first run's terms: (sx_i − sx_0)·xs_0 and ((sw_i − sw_0)·xs_0)·xs_0
	tx, tq [16]float32 // scratch of the assembly
	// The result: the scale, the split (i1, i2; −1 when none qualifies) and the shift (1 for
	// x_p, −1 for x_m, 0 when none).
	scale         float32
	i1, i2, shift int64
}

// search runs ggml's loop over the splits i1 ≤ i2, x_p before x_m, keeping the first split
// with the best (Σw·x·q)²/Σw·q² as ggml compares it; maxv is ggml's starting scale.
func (sp *iq1SSplit) search(maxv float32) {
	if useSIMDSearch {
		iq1SSplitAVX512(sp, maxv)
		return
	}
	const bs = 32
	bestScore, scale := float32(-maxFloat32), maxv
	besti1, besti2, bestShift := -1, -1, 0
	p1, m1 := iq1XP[1], iq1XM[1]
	for i1 := 0; i1 <= bs; i1++ {
		sx1, sw1 := sp.sx[2*i1], sp.sw[2*i1]
		axp, axm, awp, awm := sp.ax[2*i1], sp.ax[2*i1+1], sp.aw[2*i1], sp.aw[2*i1+1]
		for i2 := i1; i2 <= bs; i2++ {
			dx, dw := sp.sx[2*i2]-sx1, sp.sw[2*i2]-sw1
			sumqx := float32(axp+float32(dx*p1)) + sp.cx[2*i2]
			sumq2 := float32(awp+float32(float32(dw*p1)*p1)) + sp.cw[2*i2]
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(bestScore*sumq2) {
				scale = sumqx / sumq2
				bestScore = scale * sumqx
				besti1, besti2, bestShift = i1, i2, 1
			}
			sumqx = float32(axm+float32(dx*m1)) + sp.cx[2*i2+1]
			sumq2 = float32(awm+float32(float32(dw*m1)*m1)) + sp.cw[2*i2+1]
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(bestScore*sumq2) {
				scale = sumqx / sumq2
				bestScore = scale * sumqx
				besti1, besti2, bestShift = i1, i2, -1
			}
		}
	}
	sp.scale, sp.i1, sp.i2, sp.shift = scale, int64(besti1), int64(besti2), int64(bestShift)
}

// Dequantize is dequantize_row_iq1_s.
func (c iq1SCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[50*i:50*i+50], dst[256*i:256*i+256]
		d := getF16(b)
		qs := b[2:34]
		for ib := 0; ib < 8; ib++ {
			qh := binary.LittleEndian.Uint16(b[34+2*ib:])
			dl := d * float32(2*(qh>>12&7)+1)
			delta := float32(iq1Delta)
			if qh&0x8000 != 0 {
				delta = -iq1Delta
			}
			for l := 0; l < 4; l++ {
				grid := gguf.IQ1SGrid[int(qs[4*ib+l])|int(qh>>(3*l)&7)<<8]
				yl := y[32*ib+8*l : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					yl[j] = dl * (float32(int8(grid>>(8*j))) + delta)
				}
			}
		}
	}
}
