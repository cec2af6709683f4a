package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
)

// iq2XXSCodec is IQ2_XXS (2.0625 bits per weight): super-blocks of 256 = 8 sub-blocks of 32 =
// 4 groups of 8 on a 256-point lattice grid (IQ2XXSGrid, magnitudes 8, 25, 43 over 8·d·…).
// Layout (66 bytes): fp16 d, then per sub-block two little-endian uint32: the first holds the 4
// grid indices (a byte each), the second 4×7 sign bits (KSignsIQ2XS restores the eighth)
// and a 4-bit scale s in the top bits; w = d·(0.5 + s)·0.25·grid·sign.
type iq2XXSCodec struct{ blockCodec }

func init() { register(iq2XXSCodec{blockCodec{gguf.IQ2_XXS}}) }

// Quantize is quantize_iq2_xxs (quantize_row_iq2_xxs_impl per row). ggml requires the
// importance matrix: without one it panics (see RequiresImatrix).
func (c iq2XXSCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	mustHaveImatrix(c, imatrix)
	g := gridIQ2XXS()
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		for ibl := 0; ibl < len(x)/256; ibl++ {
			quantizeIQ2XXSBlock(g, dst[66*ibl:66*ibl+66], x[256*ibl:256*ibl+256], qw[256*ibl:256*ibl+256])
		}
	})
}

// quantizeIQ2XXSBlock is the body of quantize_row_iq2_xxs_impl for one super-block.
func quantizeIQ2XXSBlock(g *iqGrid, y []byte, x, qw []float32) {
	const kMaxQ = 3
	var (
		scales          [8]float32
		q2              [16]uint32
		weight, xval    [32]float32
		waux, wx        [32]float32
		q2l             [32][3]float32
		L, Laux         [32]int8
		Lqp             [32]uint8
		blockSigns      [4]uint8
		maxScale, sumx2 float32
		x256, qw256     = x[:256], qw[:256]
		putLevels       = func(k, j int) { g.levelsOf(j, L[8*k:8*k+8]) }
		sums            = func(L *[32]int8) (sumqx, sumq2 float32) {
			for i := 0; i < 32; i++ {
				l := L[i]
				sumqx += float32(wx[i] * float32(2*l+1))
				sumq2 += q2l[i][l]
			}
			return
		}
	)
	putF16(y[0:2], 0)
	for _, v := range x256 {
		sumx2 += float32(v * v)
	}
	sigma2 := float32(sumx2 / 256) // rounded: x/256 becomes x·2⁻⁸, which may fuse

	for ib := 0; ib < 8; ib++ {
		xb, qb := x256[32*ib:32*ib+32], qw256[32*ib:32*ib+32]
		for i, v := range xb {
			weight[i] = qb[i] * sqrt32(sigma2+float32(v*v))
		}
		for i := range waux {
			waux[i] = sqrt32(weight[i])
		}
		for k := 0; k < 4; k++ {
			blockSigns[k] = iq2Signs(xval[8*k:8*k+8], xb[8*k:8*k+8], weight[8*k:8*k+8])
		}
		maxv := xval[0]
		for i := 1; i < 32; i++ {
			maxv = max32(maxv, xval[i])
		}
		if maxv < groupMaxEps {
			scales[ib] = 0
			continue
		}
		scale := makeQpQuants(xval[:], kMaxQ+1, Lqp[:], weight[:])
		for i := range L {
			L[i] = int8(Lqp[i])
		}
		effMax := scale * kMaxQ
		if effMax <= 0 {
			scales[ib] = 0
			continue
		}
		for i := 0; i < 32; i++ {
			wx[i] = weight[i] * xval[i]
			for l := 0; l < 3; l++ {
				q := float32(2*l + 1)
				q2l[i][l] = float32(weight[i]*q) * q
			}
		}
		var best float32
		for is := -6; is <= 6; is++ {
			id := (2*kMaxQ - 1 + float32(float32(is)*0.1)) / effMax
			thisScale := 1 / id
			for k := 0; k < 4; k++ {
				la := Laux[8*k : 8*k+8]
				for i := 0; i < 8; i++ {
					la[i] = iq2Level(id, xval[8*k+i])
				}
				if p := iqPoint(la); g.at[p] < 0 {
					iq2FindBestNeighbour(g, g.neighbours(p), xval[8*k:8*k+8], waux[8*k:8*k+8], thisScale, la)
				}
			}
			sumqx, sumq2 := sums(&Laux)
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
				scale = sumqx / sumq2
				best = scale * sumqx
				L = Laux
			}
		}
		if scale > 0 {
			id := 1 / scale
			for k := 0; k < 4; k++ {
				lk := L[8*k : 8*k+8]
				var lv [8]int8
				for i := 0; i < 8; i++ {
					lv[i] = iq2Level(id, xval[8*k+i])
				}
				p := iqPoint(lv[:])
				j, ok := g.lookup(p)
				if !ok {
					j = iq2FindBestNeighbour(g, g.neighbours(p), xval[8*k:8*k+8], waux[8*k:8*k+8], scale, lk)
				}
				putLevels(k, j)
			}
			if sumqx, sumq2 := sums(&L); sumq2 > 0 {
				scale = sumqx / sumq2
			}
		}
		if scale < 0 {
			// ggml: "This should never happen", but it can (one xval may be negative).
			scale = -scale
			for k := range blockSigns {
				blockSigns[k] = ^blockSigns[k] & 127
			}
		}
		for k := 0; k < 4; k++ {
			j := iqGridIndex(g, L[8*k:8*k+8])
			q2[2*ib] |= uint32(j) << (8 * k)
			q2[2*ib+1] |= uint32(blockSigns[k]) << (7 * k)
		}
		scales[ib] = scale
		maxScale = max32(maxScale, scale)
	}
	if maxScale == 0 {
		clear(y[2:66])
		return
	}
	d := maxScale / 31
	putF16(y[0:2], d)
	id := 1 / d
	for ib := 0; ib < 8; ib++ {
		l := clamp(nearestInt(float32(0.5*float32(float32(id*scales[ib])-1))), 0, 15)
		q2[2*ib+1] |= uint32(l) << 28
	}
	for i, v := range q2 {
		binary.LittleEndian.PutUint32(y[2+4*i:], v)
	}
}

// Dequantize is dequantize_row_iq2_xxs.
func (c iq2XXSCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[66*i:66*i+66], dst[256*i:256*i+256]
		d := getF16(b)
		for ib := 0; ib < 8; ib++ {
			idx := b[2+8*ib : 6+8*ib]
			aux := binary.LittleEndian.Uint32(b[6+8*ib:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.25
			for l := 0; l < 4; l++ {
				grid := gguf.IQ2XXSGrid[idx[l]]
				signs := gguf.KSignsIQ2XS[aux>>(7*l)&127]
				yl := y[32*ib+8*l : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					yl[j] = float32(db*float32(uint8(grid>>(8*j)))) * signOf(signs, j)
				}
			}
		}
	}
}

// signOf is ggml's (signs & kmask_iq2xs[j] ? -1.f : 1.f); the decoders multiply by it as ggml
// does (a NaN keeps its sign bit, which a negation would flip).
func signOf(signs uint8, j int) float32 {
	if signs&kmaskIQ2XS[j&7] != 0 {
		return -1
	}
	return 1
}
