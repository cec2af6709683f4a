package encodings

import "math"

// The QNN encoding of a range: the one routine every QNN encoding of gquant comes from
// (calibrated activations, the uint16 codes of float parameters in QDQ exports, symmetric
// weight encodings). QNN's convention is float = (q + offset)·scale, with q the code.

// MinRange is QNN's smallest encoding range.
const MinRange = 1e-4

// Asymmetric returns the encoding of [lo, hi] on an unsigned bits-bit grid: the range is
// widened to contain 0 and to be at least MinRange wide (towards the side away from zero),
// scale = (hi − lo)/(2^bits − 1) in float32 and offset = round(lo/scale), half to even as
// AIMET's torch.round, clamped to [−(2^bits − 1), 0], so that q = −offset decodes to 0.
func Asymmetric(lo, hi float64, bits int) (scale float32, offset int32) {
	lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	if hi-lo < MinRange {
		if hi > 0 || lo == 0 {
			hi = lo + MinRange
		} else {
			lo = hi - MinRange
		}
	}
	steps := math.Ldexp(1, bits) - 1
	scale = float32((hi - lo) / steps)
	off := math.RoundToEven(lo / float64(scale))
	off = math.Max(math.Min(off, 0), -steps)
	return scale, int32(off)
}

// Symmetric returns the encoding of [−absMax, absMax] on a signed bits-bit grid stored
// unsigned: scale = absMax/(2^(bits−1) − 1) (absMax at least MinRange/2, so that the range is
// at least MinRange) and offset −2^(bits−1), as AIMET writes it.
func Symmetric(absMax float64, bits int) (scale float32, offset int32) {
	absMax = math.Max(absMax, MinRange/2)
	half := math.Ldexp(1, bits-1)
	return float32(absMax / (half - 1)), int32(-half)
}
