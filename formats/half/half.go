// Package half converts between float32 and the 16-bit float formats used in checkpoints and
// GGUF files, with the same rounding as ggml (round to nearest, ties to even).
package half

import "math"

// F16Max is the largest finite fp16 value.
const F16Max float32 = 65504

// BF16ToF32 widens a bfloat16 (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to nearest even, as ggml_compute_fp32_to_bf16 (NaN stays a quiet NaN).
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + ((u >> 16) & 1))) >> 16)
}

// F16ToF32 widens an IEEE binary16 (exact, subnormals included).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // inf or nan
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: man * 2^-24
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// F32ToF16 rounds to the nearest binary16, ties to even, as the F16C instruction VCVTPS2PH with
// rounding mode 0 (what ggml uses on x86); overflow gives infinity, NaN stays NaN.
func F32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23) & 0xff
	man := u & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13) // quiet NaN, payload kept
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign // underflows to zero (even 0.5 ulp rounds to even zero)
		}
		man |= 0x800000
		shift := uint32(14 - e) // bits to drop
		half := uint32(1) << (shift - 1)
		rest := man & (1<<shift - 1)
		q := man >> shift
		if rest > half || (rest == half && q&1 == 1) {
			q++
		}
		return sign | uint16(q)
	}
	q := uint32(e)<<10 | man>>13
	rest := man & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && q&1 == 1) {
		q++ // may carry into the exponent, up to infinity: correct
	}
	return sign | uint16(q)
}
