package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
)

// iq3XXSCodec is IQ3_XXS: super-blocks of 256 = 8 sub-blocks of 32 = 64 groups of 4 on a
// grid of 256 points. Layout (98 bytes): fp16 d, qs[64] the grid index of each group, then
// one uint32 per sub-block with four 7-bit sign fields (the eighth sign of each 8 is the
// parity, gguf.KSignsIQ2XS) and a 4-bit scale ls in bits 28..31;
// w = d·(0.5 + ls)·0.5·grid·sign.
type iq3XXSCodec struct{ blockCodec }

func init() { register(iq3XXSCodec{blockCodec{gguf.IQ3_XXS}}) }

// Quantize is quantize_iq3_xxs (quantize_row_iq3_xxs_impl with grid size 256), with or
// without an imatrix.
func (c iq3XXSCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	lat := iq3XXSGrid()
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		var b iq3Block
		for ibl := 0; ibl < len(x)/256; ibl++ {
			var bqw *[256]float32
			if qw != nil {
				bqw = (*[256]float32)(qw[256*ibl:])
			}
			quantizeBlockIQ3XXS(lat, (*[98]byte)(dst[98*ibl:]), (*[256]float32)(x[256*ibl:]), bqw, &b)
		}
	})
}

// quantizeBlockIQ3XXS is the super-block body of quantize_row_iq3_xxs_impl.
func quantizeBlockIQ3XXS(lat *iq3Lattice, y *[98]byte, x, qw *[256]float32, b *iq3Block) {
	*y = [98]byte{}
	q3, sas := y[2:66], y[66:98]
	var sumx2 float32
	for _, v := range x {
		sumx2 += float32(v * v)
	}
	sigma2 := float32(2*sumx2) / 256

	var scales [8]float32
	var signs [8]uint32
	var maxScale float32
	p := iq3Params{xxs: true, ntry: 15}
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
			q3[8*ib+k] = byte(b.index[k])
		}
		signs[ib] = uint32(b.signs[0]) | uint32(b.signs[1])<<7 | uint32(b.signs[2])<<14 | uint32(b.signs[3])<<21
		scales[ib] = scale
		if !(maxScale > scale) { // MAX(max_scale, scale)
			maxScale = scale
		}
	}
	if maxScale == 0 {
		clear(q3)
		return
	}
	d := maxScale / 31
	putF16(y[0:2], float32(d*1.0125)) // ggml's fudge factor
	id := 1 / d
	for ib, s := range scales {
		l := clamp(nearestInt(0.5*(float32(id*s)-1)), 0, 15)
		binary.LittleEndian.PutUint32(sas[4*ib:], signs[ib]|uint32(l)<<28)
	}
}

// Dequantize is dequantize_row_iq3_xxs.
func (c iq3XXSCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := (*[98]byte)(src[98*i:]), (*[256]float32)(dst[256*i:])
		d := getF16(b[0:2])
		qs := b[2:66]
		for ib := 0; ib < 8; ib++ {
			aux := binary.LittleEndian.Uint32(b[66+4*ib:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.5
			for l := 0; l < 4; l++ {
				signs := gguf.KSignsIQ2XS[aux>>(7*l)&127]
				g1, g2 := gguf.IQ3XXSGrid[qs[8*ib+2*l]], gguf.IQ3XXSGrid[qs[8*ib+2*l+1]]
				yl := y[32*ib+8*l : 32*ib+8*l+8]
				for j := 0; j < 4; j++ {
					yl[j] = float32(db*float32(uint8(g1>>(8*j)))) * signIQ(signs, j)
					yl[j+4] = float32(db*float32(uint8(g2>>(8*j)))) * signIQ(signs, j+4)
				}
			}
		}
	}
}

// signIQ is ggml's (signs & kmask_iq2xs[j] ? -1.f : 1.f). ggml multiplies by it, which keeps
// a NaN's sign where a negation would flip it, so the decoders multiply too.
func signIQ(signs uint8, j int) float32 {
	if signs>>j&1 != 0 {
		return -1
	}
	return 1
}
