package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
)

// iq2XSCodec is IQ2_XS (2.3125 bits per weight): super-blocks of 256 = 16 sub-blocks of 16 =
// 2 groups of 8 on a 512-point lattice grid (IQ2XSGrid). Layout (74 bytes): fp16 d, qs[32]
// little-endian uint16 (9-bit grid index, 7 sign bits above it; KSignsIQ2XS restores the
// eighth), scales[8] (a nibble per sub-block of 16, low nibble first);
// w = d·(0.5 + s)·0.25·grid·sign.
type iq2XSCodec struct{ blockCodec }

func init() { register(iq2XSCodec{blockCodec{gguf.IQ2_XS}}) }

// Quantize is quantize_iq2_xs (quantize_row_iq2_xs_impl per row). ggml requires the
// importance matrix: without one it panics (see RequiresImatrix).
func (c iq2XSCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	mustHaveImatrix(c, imatrix)
	g := gridIQ2XS()
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		for ibl := 0; ibl < len(x)/256; ibl++ {
			quantizeIQ2XSBlock(g, dst[74*ibl:74*ibl+74], x[256*ibl:256*ibl+256], qw[256*ibl:256*ibl+256])
		}
	})
}

// quantizeIQ2XSBlock is the body of quantize_row_iq2_xs_impl for one super-block.
func quantizeIQ2XSBlock(g *iqGrid, y []byte, x, qw []float32) {
	var (
		scales                [16]float32
		q2                    [32]uint16
		weight, xval, waux    [16]float32
		L                     [16]int8
		blockSigns            [2]uint8
		maxScale, sumx2       float32
		x256, qw256, sc, qout = x[:256], qw[:256], y[66:74], y[2:66]
	)
	putF16(y[0:2], 0)
	clear(sc)
	for _, v := range x256 {
		sumx2 += float32(v * v)
	}
	sigma2 := float32(sumx2 / 256) // rounded: x/256 becomes x·2⁻⁸, which may fuse

	for ib := 0; ib < 16; ib++ {
		xb, qb := x256[16*ib:16*ib+16], qw256[16*ib:16*ib+16]
		for i, v := range xb {
			weight[i] = qb[i] * sqrt32(sigma2+float32(v*v))
		}
		for i := range waux {
			waux[i] = sqrt32(weight[i])
		}
		for k := 0; k < 2; k++ {
			blockSigns[k] = iq2Signs(xval[8*k:8*k+8], xb[8*k:8*k+8], weight[8*k:8*k+8])
		}
		maxv := xval[0]
		for i := 1; i < 16; i++ {
			maxv = max32(maxv, xval[i])
		}
		if maxv < groupMaxEps {
			scales[ib] = 0
			continue
		}
		scale := iq2Search16(g, &xval, &weight, &waux, maxv, &L)
		if scale < 0 {
			scale = -scale
			for k := range blockSigns {
				blockSigns[k] = ^blockSigns[k] & 127
			}
		}
		for k := 0; k < 2; k++ {
			j := iqGridIndex(g, L[8*k:8*k+8])
			q2[2*ib+k] = uint16(j) | uint16(blockSigns[k])<<9
		}
		scales[ib] = scale
		maxScale = max32(maxScale, scale)
	}
	if maxScale == 0 {
		clear(qout)
		return
	}
	d := maxScale / 31
	putF16(y[0:2], d)
	id := 1 / d
	for ib := 0; ib < 16; ib++ {
		l := uint8(clamp(nearestInt(float32(0.5*float32(float32(id*scales[ib])-1))), 0, 15))
		if ib%2 == 0 {
			sc[ib/2] = l
		} else {
			sc[ib/2] |= l << 4
		}
	}
	for i, v := range q2 {
		binary.LittleEndian.PutUint16(qout[2*i:], v)
	}
}

// Dequantize is dequantize_row_iq2_xs.
func (c iq2XSCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[74*i:74*i+74], dst[256*i:256*i+256]
		d := getF16(b)
		for ib := 0; ib < 8; ib++ {
			s := b[66+ib]
			db := [2]float32{
				float32(d*(0.5+float32(s&0xf))) * 0.25,
				float32(d*(0.5+float32(s>>4))) * 0.25,
			}
			for l := 0; l < 4; l++ {
				q := binary.LittleEndian.Uint16(b[2+2*(4*ib+l):])
				grid := gguf.IQ2XSGrid[q&511]
				signs := gguf.KSignsIQ2XS[q>>9]
				yl := y[32*ib+8*l : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					yl[j] = float32(db[l/2]*float32(uint8(grid>>(8*j)))) * signOf(signs, j)
				}
			}
		}
	}
}
