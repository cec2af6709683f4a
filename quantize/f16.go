package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/half"
)

// f16Codec stores IEEE binary16, rounded to nearest even (ggml_fp32_to_fp16_row).
type f16Codec struct{ blockCodec }

func init() { register(f16Codec{blockCodec{gguf.F16}}) }

// Quantize rounds each float to fp16; imatrix is ignored.
func (c f16Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	checkQuantize(c, dst, src, nrows, nPerRow, imatrix)
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], fp16(v))
	}
}

// Dequantize widens each fp16 exactly.
func (c f16Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := range dst {
		dst[i] = half.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}
