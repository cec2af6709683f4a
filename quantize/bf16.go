package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/half"
)

// bf16Codec stores bfloat16, rounded to nearest even (ggml_fp32_to_bf16_row_ref: NaN is kept
// quiet, subnormals are not flushed).
type bf16Codec struct{ blockCodec }

func init() { register(bf16Codec{blockCodec{gguf.BF16}}) }

// Quantize rounds each float to bf16; imatrix is ignored.
func (c bf16Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	checkQuantize(c, dst, src, nrows, nPerRow, imatrix)
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToBF16(v))
	}
}

// Dequantize widens each bf16 exactly.
func (c bf16Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := range dst {
		dst[i] = half.BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}
