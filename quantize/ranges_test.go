package quantize

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/stats"
)

// addAll feeds values in batches the way calibration does.
func addAll(a *stats.ActStats, xs []float32, batch int) {
	for i := 0; i < len(xs); i += batch {
		a.Add(xs[i:min(i+batch, len(xs))], false)
	}
}

// quantNoise quantizes xs on the QNN grid of [lo, hi] and returns Σ(x − x̂)².
func quantNoise(xs []float32, lo, hi float64, bits int) float64 {
	sc, off := encodings.Asymmetric(lo, hi, bits)
	s, steps := float64(sc), math.Ldexp(1, bits)-1
	var n float64
	for _, x := range xs {
		q := math.Min(math.Max(math.Round(float64(x)/s)-float64(off), 0), steps)
		d := float64(x) - (q+float64(off))*s
		n += d * d
	}
	return n
}

// The SQNR range clips far outliers when that lowers the real quantization noise of the values
// (measured here by quantizing them) and never raises it, keeps min-max exactly when nothing is
// worth clipping, and the percentile range is the distribution's.
func TestRanges(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	xs := make([]float32, 0, 50010)
	for i := 0; i < 50000; i++ {
		xs = append(xs, float32(r.NormFloat64()))
	}
	clean := append([]float32(nil), xs...)
	xs = append(xs, 400, -250, 300)
	a := &stats.ActStats{}
	addAll(a, xs, 4096)
	for _, bits := range []int{8, 16} {
		o, _ := RangeOptions{Mode: RangeSQNR, Bits: bits}.Normalize()
		lo, hi := ActRange(a, o)
		mm := quantNoise(xs, float64(a.Min), float64(a.Max), bits)
		sq := quantNoise(xs, lo, hi, bits)
		t.Logf("%d bits: sqnr range [%.3g, %.3g], noise %.4g against min-max %.4g", bits, lo, hi, sq, mm)
		// At 8 bits clipping the far outliers pays; at 16 bits the noise may only stay equal.
		if sq > mm || (bits == 8 && (!(sq < mm) || hi >= float64(a.Max) || lo <= float64(a.Min))) {
			t.Errorf("%d bits: sqnr range [%g, %g] noise %g, min-max noise %g", bits, lo, hi, sq, mm)
		}
	}
	c := &stats.ActStats{}
	addAll(c, clean, 4096)
	o, _ := RangeOptions{Mode: RangeSQNR}.Normalize()
	if lo, hi := ActRange(c, o); lo != float64(c.Min) || hi != float64(c.Max) {
		t.Errorf("16-bit sqnr on a clean gaussian clipped to [%g, %g] of [%g, %g]", lo, hi, c.Min, c.Max)
	}
	o, _ = RangeOptions{Mode: RangePercentile, Percentile: 99}.Normalize()
	lo, hi := ActRange(c, o)
	if math.Abs(lo+2.326) > 0.05 || math.Abs(hi-2.326) > 0.05 {
		t.Errorf("99th percentile range [%g, %g], want about ±2.326", lo, hi)
	}
	if _, err := (RangeOptions{Mode: "mse"}).Normalize(); err == nil {
		t.Error("unknown range mode accepted")
	}
}

// RangeSQNR widens each side by how far the held-out extreme passes the fit one, at most
// MaxWiden of the range; RangeMinMax ignores the held-out extremes.
func TestRangeWidening(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	xs := make([]float32, 50000)
	for i := range xs {
		xs[i] = float32(r.NormFloat64())
	}
	a := &stats.ActStats{}
	addAll(a, xs, 4096)
	sq, _ := RangeOptions{Mode: RangeSQNR}.Normalize()
	mm, _ := RangeOptions{Mode: RangeMinMax}.Normalize()
	// On a clean gaussian the 16-bit SQNR range is min-max (TestRanges); without held-out
	// extremes nothing changes.
	lo0, hi0 := float64(a.Min), float64(a.Max)
	if lo, hi := ActRange(a, sq); lo != lo0 || hi != hi0 {
		t.Fatalf("no held-out extremes: [%g, %g], want [%g, %g]", lo, hi, lo0, hi0)
	}
	span := hi0 - lo0
	// The held-out chunks reach 0.01 below the fit minimum, and not up to the fit maximum.
	a.Held = true
	a.HeldMin, a.FitMin = a.Min, a.Min+0.01
	a.FitMax, a.HeldMax = a.Max, a.Max-1
	lo, hi := ActRange(a, sq)
	if gap := lo0 - lo; math.Abs(gap-0.01) > 1e-6 || hi != hi0 {
		t.Errorf("small gap: [%g, %g], want [%g, %g]", lo, hi, lo0-0.01, hi0)
	}
	// A gap of 3 above is capped at 5 % of the range.
	a.FitMin, a.HeldMin = a.Min, a.Min+1
	a.FitMax, a.HeldMax = a.Max-3, a.Max
	lo, hi = ActRange(a, sq)
	if lo != lo0 || math.Abs(hi-(hi0+0.05*span)) > 1e-12 {
		t.Errorf("capped gap: [%g, %g], want [%g, %g]", lo, hi, lo0, hi0+0.05*span)
	}
	if lo, hi := ActRange(a, mm); lo != lo0 || hi != hi0 {
		t.Errorf("minmax with held-out extremes: [%g, %g], want [%g, %g]", lo, hi, lo0, hi0)
	}
}
