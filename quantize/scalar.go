package quantize

import (
	"encoding/binary"
	"math"

	"github.com/gquant/gquant/formats/half"
)

// groupMaxEps is ggml's GROUP_MAX_EPS: groups whose largest magnitude is below it count as zero.
const groupMaxEps = 1e-15

// nearestInt rounds to the nearest integer, ties to even, as ggml's nearest_int: it adds
// 1.5·2^23 and reads the low mantissa bits (valid for |f| ≤ 4194303). The explicit conversion
// keeps a product passed in from being fused with the addition.
func nearestInt(f float32) int {
	v := float32(f) + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// abs32 is fabsf.
func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// sqrt32 is sqrtf (the float64 square root rounded to float32 is correctly rounded).
func sqrt32(f float32) float32 { return float32(math.Sqrt(float64(f))) }

// fp16 is GGML_FP32_TO_FP16: round to nearest even; NaN becomes the quiet NaN 0x7e00 with the
// sign kept and no payload.
func fp16(f float32) uint16 {
	if f != f {
		return uint16(math.Float32bits(f)>>16)&0x8000 | 0x7e00
	}
	return half.F32ToF16(f)
}

// putF16 stores f as little-endian fp16 at b[0:2].
func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, fp16(f)) }

// getF16 reads a little-endian fp16 from b[0:2].
func getF16(b []byte) float32 { return half.F16ToF32(binary.LittleEndian.Uint16(b)) }

// bestIndexInt8 is ggml's best_index_int8: the index of the entry of the sorted table val
// nearest to x (the upper one on a tie).
func bestIndexInt8(val *[16]int8, xIn float32) int {
	const n = 16
	x := float32(xIn) // a product passed in must not be fused with the subtractions below
	if x <= float32(val[0]) {
		return 0
	}
	if x >= float32(val[n-1]) {
		return n - 1
	}
	ml, mu := 0, n-1
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(val[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-float32(val[mu-1]) < float32(val[mu])-x {
		return mu - 1
	}
	return mu
}

// clamp limits v to [lo, hi].
func clamp(v, lo, hi int) int { return max(lo, min(hi, v)) }

// maxFloat32 is FLT_MAX.
const maxFloat32 = math.MaxFloat32
