package quantize

import (
	"encoding/binary"
	"math"

	"github.com/gquant/gquant/formats/gguf"
)

// f32Codec stores floats as they are (little-endian IEEE binary32).
type f32Codec struct{ blockCodec }

func init() { register(f32Codec{blockCodec{gguf.F32}}) }

// Quantize copies src into dst; imatrix is ignored.
func (c f32Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	checkQuantize(c, dst, src, nrows, nPerRow, imatrix)
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

// Dequantize copies src into dst.
func (c f32Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}
