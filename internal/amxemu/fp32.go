package amxemu

import "math"

// fp32 arithmetic of TDPBF16PS, on IEEE binary32 bit patterns.
//
// What is implemented (SDM, TDPBF16PS: "FP32 FMA with DAZ, FTZ, RNE, MXCSR disabled"):
//   - DAZ: a denormal input (exponent 0, fraction non-zero) is replaced by a zero of its sign.
//   - The result of a*b+c is rounded once to binary32, round to nearest, ties to even.
//   - FTZ: a result whose magnitude, rounded to 24 significant bits with an unbounded exponent
//     range, is below 2^-126 (tininess after rounding, as x86 detects it) becomes a zero of its
//     sign. Overflow gives an infinity (RNE).
//   - NaN: the first NaN operand among a, b, c is returned, made quiet; an invalid operation
//     without NaN operands (inf*0, inf-inf) returns the x86 default NaN 0xFFC00000.
//   - A zero result has the sign IEEE 754 gives under round-to-nearest (+0 for x-x).
//
// The computation is exact: a*b of two binary32 values is exact in binary64; p+c is computed
// with TwoSum and the binary64 sum rounded to odd when inexact, so that the final rounding to
// binary32 (24 bits, 53 >= 24+2) is correct.

const (
	f32SignMask   = 0x80000000
	f32ExpMask    = 0x7f800000
	f32FracMask   = 0x007fffff
	f32QuietBit   = 0x00400000
	f32DefaultNaN = 0xffc00000
)

// daz returns x with a denormal replaced by a zero of the same sign.
func daz(x uint32) uint32 {
	if x&f32ExpMask == 0 {
		return x & f32SignMask
	}
	return x
}

// isNaN32 reports whether x is a NaN.
func isNaN32(x uint32) bool { return x&f32ExpMask == f32ExpMask && x&f32FracMask != 0 }

// fma32 returns a*b+c (binary32 bit patterns) with one RNE rounding, DAZ and FTZ.
func fma32(a, b, c uint32) uint32 {
	a, b, c = daz(a), daz(b), daz(c)
	for _, x := range [3]uint32{a, b, c} {
		if isNaN32(x) {
			return x | f32QuietBit
		}
	}
	// Exact product; the conversion keeps the compiler from fusing it with the sum.
	p := float64(float64(math.Float32frombits(a)) * float64(math.Float32frombits(b)))
	z := float64(math.Float32frombits(c))
	s := p + z
	if math.IsNaN(s) {
		return f32DefaultNaN // inf*0 or inf-inf
	}
	if math.IsInf(s, 0) || math.IsInf(p, 0) || math.IsInf(z, 0) {
		return math.Float32bits(float32(s)) // exact infinity (p cannot overflow binary64)
	}
	if e := twoSumError(p, z, s); e != 0 && math.Float64bits(s)&1 == 0 {
		// Inexact with an even last bit: move to the odd neighbour on the side of the
		// exact value (round to odd), which keeps the final rounding correct.
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return roundFTZ(s)
}

// add32 returns x+y (binary32 bit patterns) with RNE rounding, DAZ and FTZ.
func add32(x, y uint32) uint32 { return fma32(x, 0x3f800000, y) } // x*1.0 is exact

// twoSumError returns the exact error (a+b) - s of the binary64 sum s = a+b (Knuth's TwoSum;
// valid without overflow).
func twoSumError(a, b, s float64) float64 {
	bv := s - a
	av := s - bv
	return (a - av) + (b - bv)
}

// roundFTZ rounds the binary64 value s to binary32 with RNE and flushes results that are tiny
// after rounding (below 2^-126 in magnitude) to zero.
func roundFTZ(s float64) uint32 {
	const (
		minNormal = 0x1p-126
		// Magnitudes from MaxFloat32 + half an ulp on round to infinity (the tie goes to
		// the even significand, which is the overflow).
		overflow = 0x1.ffffffp127
	)
	switch a := math.Abs(s); {
	case a >= overflow:
		return math.Float32bits(float32(math.Copysign(math.Inf(1), s)))
	case s == 0 || a >= minNormal:
		return math.Float32bits(float32(s))
	}
	// Round to 24 bits with an unbounded exponent range by scaling into the normal range
	// (exact: a power-of-two scale of a binary64 far from its limits).
	r := float32(s * 0x1p192)
	if math.Abs(float64(r)) < minNormal*0x1p192 {
		return math.Float32bits(r) & f32SignMask // tiny: flush to a zero of its sign
	}
	return math.Float32bits(float32(math.Copysign(minNormal, s)))
}
