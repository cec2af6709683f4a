package kernels

import "math"

// The fp16 and bf16 conversions below follow ggml's CPU code on x86: widening is exact, and
// narrowing rounds to nearest, ties to even (what F16C's VCVTPS2PH with mode 0 does).

// f16Table maps every fp16 bit pattern to its float32 value; decoding is a single load.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = f16ToF32Slow(uint16(i))
	}
	return &t
}()

// f16ToF32 widens an IEEE binary16 value (exact).
func f16ToF32(h uint16) float32 { return f16Table[h] }

func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0: // zero or subnormal: man · 2^-24
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// f32ToF16 narrows to binary16, rounding to nearest even; overflow gives infinity.
func f32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23) & 0xff
	man := u & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal result
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - e)
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
		q++ // a carry into the exponent is correct, up to infinity
	}
	return sign | uint16(q)
}

// bf16ToF32 widens a bfloat16 value (exact).
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 narrows to bfloat16 as ggml_compute_fp32_to_bf16: nearest even, NaN kept quiet.
func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + ((u >> 16) & 1))) >> 16)
}

// roundF16 and roundBF16 round a float32 to the nearest representable half value.
func roundF16(f float32) float32  { return f16ToF32(f32ToF16(f)) }
func roundBF16(f float32) float32 { return bf16ToF32(f32ToBF16(f)) }

// le16 reads a little-endian uint16.
func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }
