package quantize

import "github.com/gquant/gquant/formats/gguf"

// iq2SCodec is IQ2_S (2.5625 bits per weight): super-blocks of 256 = 16 sub-blocks of 16 =
// 2 groups of 8 on a 1024-point lattice grid (IQ2SGrid), with 8 explicit sign bits per
// group. Layout (82 bytes): fp16 d, qs[64] (32 low bytes of the 10-bit grid indices, then 32
// sign bytes), qh[8] (the indices' high 2 bits, 4 groups per byte), scales[8] (a nibble per
// sub-block of 16, low nibble first); w = d·(0.5 + s)·0.25·grid·sign.
type iq2SCodec struct{ blockCodec }

func init() { register(iq2SCodec{blockCodec{gguf.IQ2_S}}) }

// groupMaxEpsIQ2S is ggml's GROUP_MAX_EPS_IQ2_S.
const groupMaxEpsIQ2S = 1e-8

// Quantize is quantize_iq2_s (quantize_row_iq2_s_impl per row, with or without imatrix).
func (c iq2SCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	g := gridIQ2S()
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		for ibl := 0; ibl < len(x)/256; ibl++ {
			var bqw []float32
			if qw != nil {
				bqw = qw[256*ibl : 256*ibl+256]
			}
			quantizeIQ2SBlock(g, dst[82*ibl:82*ibl+82], x[256*ibl:256*ibl+256], bqw)
		}
	})
}

// quantizeIQ2SBlock is the body of quantize_row_iq2_s_impl for one super-block; qw is nil or
// the super-block's importance.
func quantizeIQ2SBlock(g *iqGrid, y []byte, x, qw []float32) {
	var (
		scales             [16]float32
		weight, xval, waux [16]float32
		L                  [16]int8
		blockSigns         [2]uint8
		maxScale, sumx2    float32
		x256               = x[:256]
		qs, qh, sc         = y[2:66], y[66:74], y[74:82]
	)
	clear(y[:82])
	for _, v := range x256 {
		sumx2 += float32(v * v)
	}
	sigma2 := float32(float32(2*sumx2) / 256) // rounded: x/256 becomes x·2⁻⁸, which may fuse

	for ib := 0; ib < 16; ib++ {
		xb := x256[16*ib : 16*ib+16]
		if qw != nil {
			qb := qw[16*ib : 16*ib+16]
			for i, v := range xb {
				weight[i] = qb[i] * sqrt32(sigma2+float32(v*v))
			}
		} else {
			for i, v := range xb {
				weight[i] = float32(0.25*sigma2) + float32(v*v)
			}
		}
		for i := range waux {
			waux[i] = sqrt32(weight[i])
		}
		for k := 0; k < 2; k++ {
			var s uint8
			for i := 0; i < 8; i++ {
				if v := xb[8*k+i]; v >= 0 {
					xval[8*k+i] = v
				} else {
					xval[8*k+i] = -v
					s |= 1 << i
				}
			}
			blockSigns[k] = s
		}
		maxv := xval[0]
		for i := 1; i < 16; i++ {
			maxv = max32(maxv, xval[i])
		}
		if maxv < groupMaxEpsIQ2S {
			scales[ib] = 0
			continue
		}
		scale := iq2Search16(g, &xval, &weight, &waux, maxv, &L)
		if scale < 0 {
			scale = -scale
			blockSigns[0], blockSigns[1] = ^blockSigns[0], ^blockSigns[1]
		}
		for k := 0; k < 2; k++ {
			j := iqGridIndex(g, L[8*k:8*k+8])
			i8 := 2*ib + k
			qs[i8] = uint8(j)
			qh[i8/4] |= uint8(j>>8) << (2 * (i8 % 4))
			qs[32+i8] = blockSigns[k]
		}
		scales[ib] = scale
		maxScale = max32(maxScale, scale)
	}
	if maxScale == 0 {
		return
	}
	d := maxScale / 31
	putF16(y[0:2], float32(d*0.9875))
	id := 1 / d
	for ib := 0; ib < 16; ib++ {
		l := uint8(clamp(nearestInt(float32(0.5*float32(float32(id*scales[ib])-1))), 0, 15))
		if ib%2 == 0 {
			sc[ib/2] = l
		} else {
			sc[ib/2] |= l << 4
		}
	}
}

// Dequantize is dequantize_row_iq2_s.
func (c iq2SCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[82*i:82*i+82], dst[256*i:256*i+256]
		d := getF16(b)
		qs, qh, signs := b[2:34], b[66:74], b[34:66]
		for ib := 0; ib < 8; ib++ {
			s := b[74+ib]
			db := [2]float32{
				float32(d*(0.5+float32(s&0xf))) * 0.25,
				float32(d*(0.5+float32(s>>4))) * 0.25,
			}
			for l := 0; l < 4; l++ {
				idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
				grid := gguf.IQ2SGrid[idx]
				sg := signs[4*ib+l]
				yl := y[32*ib+8*l : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					yl[j] = float32(db[l/2]*float32(uint8(grid>>(8*j)))) * signOf(sg, j)
				}
			}
		}
	}
}
