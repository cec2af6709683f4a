package quantize

import "github.com/gquant/gquant/formats/gguf"

// tq2_0Codec is TQ2_0 (ternary, BitNet b1.58 and TriLMs): super-blocks of 256 trits
// t ∈ {0, 1, 2}, w = d·(t − 1). Layout (66 bytes): qs[64], 2 bits per element (element
// 128j + 32n + m in bits 2n of byte 32j + m), then fp16 d.
type tq2_0Codec struct{ blockCodec }

func init() { register(tq2_0Codec{blockCodec{gguf.TQ2_0}}) }

// Quantize is quantize_tq2_0 (quantize_row_tq2_0_ref): d = max|x|, t = lroundf(x/d) + 1.
// ggml ignores the imatrix for TQ2_0, and so does this.
func (c tq2_0Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	checkQuantize(c, dst, src, nrows, nPerRow, imatrix)
	for i := 0; i < len(src)/256; i++ {
		x, y := (*[256]float32)(src[256*i:]), (*[66]byte)(dst[66*i:])
		var t [256]uint8
		putF16(y[64:66], ternaryTrits(x, &t))
		for j := 0; j < 2; j++ {
			for m := 0; m < 32; m++ {
				tj := t[128*j+m:]
				y[32*j+m] = tj[0]&3 | (tj[32]&3)<<2 | (tj[64]&3)<<4 | (tj[96]&3)<<6
			}
		}
	}
}

// Dequantize is dequantize_row_tq2_0.
func (c tq2_0Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := 0; i < len(dst)/256; i++ {
		b, y := (*[66]byte)(src[66*i:]), (*[256]float32)(dst[256*i:])
		d := getF16(b[64:66])
		for j := 0; j < 2; j++ {
			for n := 0; n < 4; n++ {
				for m := 0; m < 32; m++ {
					y[128*j+32*n+m] = float32(int8(b[32*j+m]>>(2*n)&3)-1) * d
				}
			}
		}
	}
}
