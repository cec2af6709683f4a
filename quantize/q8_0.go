package quantize

import (
	"math"

	"github.com/gquant/gquant/formats/gguf"
)

// q8_0Codec is Q8_0: blocks of 32, fp16 d then 32 int8; w = d·q.
type q8_0Codec struct{ blockCodec }

func init() { register(q8_0Codec{blockCodec{gguf.Q8_0}}) }

// Quantize is quantize_row_q8_0_ref: d = amax/127, q = round(x/d) (half away from zero).
// ggml ignores the imatrix for Q8_0, and so does this.
func (c q8_0Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	checkQuantize(c, dst, src, nrows, nPerRow, imatrix)
	for ib := 0; ib < len(src)/32; ib++ {
		x := src[32*ib : 32*ib+32]
		y := dst[34*ib : 34*ib+34]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v)) // MAX(amax, fabsf(v)) for non-NaN v
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(y, d)
		for j, v := range x {
			y[2+j] = byte(int32(math.Round(float64(v * id)))) // roundf, then the low byte as C stores it
		}
	}
}

// Dequantize is dequantize_row_q8_0.
func (c q8_0Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for ib := 0; ib < len(dst)/32; ib++ {
		y := src[34*ib : 34*ib+34]
		d := getF16(y)
		for j := 0; j < 32; j++ {
			dst[32*ib+j] = float32(int8(y[2+j])) * d
		}
	}
}
