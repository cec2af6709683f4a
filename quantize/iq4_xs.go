package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
)

// iq4XSCodec is IQ4_XS: super-blocks of 256 = 8 sub-blocks of 32 on the IQ4_NL grid with 6-bit
// sub-block scales. Layout (136 bytes): fp16 d, uint16 scales_h (2 high bits per sub-block),
// scales_l[4] (4 low bits per sub-block), qs[128] nibbles as in IQ4_NL per sub-block;
// w = d·(ls_j − 32)·kvalues[q].
type iq4XSCodec struct{ blockCodec }

func init() { register(iq4XSCodec{blockCodec{gguf.IQ4_XS}}) }

// Quantize is quantize_iq4_xs (quantize_row_iq4_nl_impl over 256 elements, ntry 7).
func (c iq4XSCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		var L [256]uint8
		var scales [8]float32
		var weight [32]float32
		for ibl := 0; ibl < len(x)/256; ibl++ {
			var bqw []float32
			if qw != nil {
				bqw = qw[256*ibl : 256*ibl+256]
			}
			y := dst[136*ibl : 136*ibl+136]
			quantizeIQ4(y[0:2], y[8:136], y[2:4], y[4:8], x[256*ibl:256*ibl+256], scales[:], weight[:], L[:], bqw, 7)
		}
	})
}

// Dequantize is dequantize_row_iq4_xs.
func (c iq4XSCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[136*i:136*i+136], dst[256*i:256*i+256]
		d := getF16(b)
		sh := binary.LittleEndian.Uint16(b[2:])
		qs := b[8:]
		for ib := 0; ib < 8; ib++ {
			ls := int(b[4+ib/2]>>(4*(ib%2))&0xf) | int(sh>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			for j := 0; j < 16; j++ {
				y[32*ib+j] = dl * float32(kvaluesIQ4NL[qs[16*ib+j]&0xf])
				y[32*ib+j+16] = dl * float32(kvaluesIQ4NL[qs[16*ib+j]>>4])
			}
		}
	}
}
