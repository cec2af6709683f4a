package quantize

import (
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/stats"
)

// Range setting: an activation's quantization range from its calibration statistics
// (formats/stats), for the static activation encodings of QNN schemes.

// RangeMode chooses how an activation's quantization range is set from its statistics.
type RangeMode string

// Range modes.
const (
	// RangeMinMax uses the observed minimum and maximum (QNN/AIMET "tf").
	RangeMinMax RangeMode = "minmax"
	// RangePercentile clips at the Percentile-th and (100−Percentile)-th percentiles.
	RangePercentile RangeMode = "percentile"
	// RangeSQNR picks the clipping range that maximises the signal-to-quantization-noise
	// ratio over the histogram (in the spirit of AIMET's "tf_enhanced"), then widens it for
	// values calibration did not see by the gap between held-out and fit extremes (see
	// MaxWiden).
	RangeSQNR RangeMode = "sqnr"
)

// DefaultPercentile is the percentile of RangePercentile when none is given.
const DefaultPercentile = 99.99

// RangeOptions tune activation range setting.
type RangeOptions struct {
	// Mode is the range mode ("": RangeSQNR).
	Mode RangeMode
	// Percentile is used by RangePercentile (0: DefaultPercentile); in (50, 100].
	Percentile float64
	// Bits is the activation bit width (0: 16).
	Bits int
}

// Normalize fills in defaults and checks the options.
func (o RangeOptions) Normalize() (RangeOptions, error) {
	if o.Mode == "" {
		o.Mode = RangeSQNR
	}
	if o.Percentile == 0 {
		o.Percentile = DefaultPercentile
	}
	if o.Bits == 0 {
		o.Bits = 16
	}
	switch o.Mode {
	case RangeMinMax, RangePercentile, RangeSQNR:
	default:
		return o, fmt.Errorf("range: %q is not minmax, percentile or sqnr", o.Mode)
	}
	if !(o.Percentile > 50 && o.Percentile <= 100) {
		return o, fmt.Errorf("percentile: %g is not in (50, 100]", o.Percentile)
	}
	if o.Bits < 2 || o.Bits > 16 {
		return o, fmt.Errorf("activation bits: %d is not in [2, 16]", o.Bits)
	}
	return o, nil
}

// ActRange returns the range [lo, hi] of an activation under the options (already normalized).
func ActRange(a *stats.ActStats, o RangeOptions) (lo, hi float64) {
	lo, hi = float64(a.Min), float64(a.Max)
	switch o.Mode {
	case RangePercentile:
		q := o.Percentile / 100
		return a.Hist.Quantile(1-q, lo, hi), a.Hist.Quantile(q, lo, hi)
	case RangeSQNR:
		a0, b0 := sqnrRange(&a.Hist, lo, hi, o.Bits)
		below, above := unseenGap(a)
		return a0 - below, b0 + above
	}
	return lo, hi
}

// MaxWiden caps how far RangeSQNR widens each side of a range for values calibration did not
// see, as a fraction of the observed range Max − Min.
const MaxWiden = 0.05

// unseenGap estimates how far new text reaches below and above the calibrated range: the
// extrapolation gap between the fit chunks' extremes and the held-out chunks' (how far the
// held-out extremes pass the fit ones, a "next record" estimate), each capped at MaxWiden of
// the range. It is 0 without held-out extremes.
func unseenGap(a *stats.ActStats) (below, above float64) {
	if !a.Held {
		return 0, 0
	}
	below = float64(a.FitMin) - float64(a.HeldMin)
	above = float64(a.HeldMax) - float64(a.FitMax)
	limit := MaxWiden * (float64(a.Max) - float64(a.Min))
	return min(max(below, 0), limit), min(max(above, 0), limit)
}

// sqnrCandidates bounds the candidate clipping points tried on each side.
const sqnrCandidates = 256

// sqnrRange searches clipping points [a, b] (bin edges, or the exact extremes lo and hi) that
// minimise the expected quantization noise of the histogram's values with an asymmetric
// bits-bit grid over [min(a,0), max(b,0)]: values inside contribute the rounding noise Δ²/12
// each, values outside their clipping error (x − a)² or (x − b)², with each bin's values at its
// centre. Minimising the noise maximises the SQNR, the signal being fixed. Candidates for a
// run from the minimum up to the median, for b from the maximum down to it.
func sqnrRange(h *stats.Histogram, lo, hi float64, bits int) (float64, float64) {
	n := len(h.Counts)
	f0, l0, ok := h.Occupied()
	first, last := int(f0-h.Start), int(l0-h.Start)
	if !ok || first == last {
		return lo, hi
	}
	// Prefix sums over bins: count, Σc, Σc² with c the bin centre.
	pn, p1, p2 := make([]float64, n+1), make([]float64, n+1), make([]float64, n+1)
	for k, cnt := range h.Counts {
		c := (float64(h.Start+int64(k)) + 0.5) * h.Width
		// explicit conversions: no fused multiply-add, so the bits do not depend on GOAMD64
		pn[k+1], p1[k+1], p2[k+1] = pn[k]+cnt, p1[k]+float64(cnt*c), p2[k]+float64(cnt*c*c)
	}
	total := pn[n]
	median := first
	for median < last && pn[median+1] < total/2 {
		median++
	}
	steps := math.Ldexp(1, bits) - 1
	edge := func(k int) float64 { return float64(h.Start+int64(k)) * h.Width }
	// Candidate lower clips: (value, first bin kept). k = first means no clipping (exact lo).
	type cand struct {
		v float64
		k int
	}
	var los, his []cand
	strideLo := max(1, (median-first)/sqnrCandidates)
	for k := first; k <= median; k += strideLo {
		v := edge(k)
		if k == first {
			v = lo
		}
		los = append(los, cand{v, k})
	}
	strideHi := max(1, (last-median)/sqnrCandidates)
	for k := last; k >= median; k -= strideHi {
		v := edge(k + 1)
		if k == last {
			v = hi
		}
		his = append(his, cand{v, k})
	}
	bestA, bestB, best := lo, hi, math.Inf(1)
	for _, ca := range los {
		// Values in bins below ca.k are clipped up to a.
		a := ca.v
		below := p2[ca.k] - float64(2*a*p1[ca.k]) + float64(a*a*pn[ca.k])
		for _, cb := range his {
			b := cb.v
			if b <= a {
				continue
			}
			above := (p2[n] - p2[cb.k+1]) - float64(2*b*(p1[n]-p1[cb.k+1])) + float64(b*b*(pn[n]-pn[cb.k+1]))
			inside := pn[cb.k+1] - pn[ca.k]
			d := (math.Max(b, 0) - math.Min(a, 0)) / steps
			noise := below + above + float64(inside*d*d/12)
			if noise < best {
				best, bestA, bestB = noise, a, b
			}
		}
	}
	return bestA, bestB
}

// ActivationEncodings returns an o.Bits-bit (default 16) asymmetric per-tensor encoding for
// every activation of the statistics, in their order, with ranges set by o.
func ActivationEncodings(s *stats.Stats, o RangeOptions) ([]encodings.Encoding, error) {
	o, err := o.Normalize()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Source, err)
	}
	if len(s.Acts) == 0 {
		return nil, fmt.Errorf("%s: no activation statistics (an imatrix holds none; run gquant calibrate)", s.Source)
	}
	out := make([]encodings.Encoding, 0, len(s.Acts))
	for _, a := range s.Acts {
		lo, hi := ActRange(a, o)
		sc, off := encodings.Asymmetric(lo, hi, o.Bits)
		out = append(out, encodings.Encoding{Name: a.Name, Type: encodings.PerTensor, Dtype: encodings.Int, Bitwidth: o.Bits, Scale: []float32{sc}, Offset: []int32{off}})
	}
	return out, nil
}
