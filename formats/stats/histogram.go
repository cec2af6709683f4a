package stats

import (
	"math"
)

// HistBins is the number of bins of an activation histogram.
const HistBins = 2048

// Histogram counts values in HistBins equal bins whose width is a power of two and whose edges
// are multiples of it, so that zero is always an edge. It grows as values arrive: when a batch
// does not fit, the window slides or the width doubles (pairs of bins merge exactly), so the
// result depends only on the values and their order, and the occupied span keeps at least a
// quarter of the bins.
type Histogram struct {
	// Width is the bin width (a power of two; 0 while empty).
	Width float64
	// Start is the index of the first bin: bin k covers [(Start+k)·Width, (Start+k+1)·Width).
	Start int64
	// Counts holds HistBins counts (nil while empty).
	Counts []float64
}

// Bounds returns the left edge of the first bin and the right edge of the last.
func (h *Histogram) Bounds() (lo, hi float64) {
	return float64(h.Start) * h.Width, float64(h.Start+int64(len(h.Counts))) * h.Width
}

// Total is the number of values counted.
func (h *Histogram) Total() float64 {
	var s float64
	for _, c := range h.Counts {
		s += c
	}
	return s
}

// Occupied returns the first and last non-empty bin (global indexes: bin k of Counts is
// Start+k); ok is false when the histogram is empty.
func (h *Histogram) Occupied() (lo, hi int64, ok bool) {
	first, last := -1, -1
	for k, c := range h.Counts {
		if c != 0 {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 {
		return 0, 0, false
	}
	return h.Start + int64(first), h.Start + int64(last), true
}

// Add counts the finite values of x, whose minimum and maximum are lo and hi.
func (h *Histogram) Add(x []float32, lo, hi float32) {
	if len(x) == 0 {
		return
	}
	h.fit(float64(lo), float64(hi))
	h.count(x, h.Counts)
}

// count adds x's values to counts, bins of h's geometry (fit already covers them).
func (h *Histogram) count(x []float32, counts []float64) {
	// v/w is exact (w is a power of two), and so is v/w − Start (a float32's 24 significant
	// bits and an index of the window fit in 53 bits); it is ≥ 0 inside the window, where
	// truncation is the floor. The clamp only guards against a caller's wrong lo or hi.
	inv, start := 1/h.Width, float64(h.Start)
	last := len(counts) - 1
	for _, v := range x {
		k := int(float64(v)*inv - start)
		counts[min(max(k, 0), last)]++
	}
}

// fit makes the window cover [lo, hi].
func (h *Histogram) fit(lo, hi float64) {
	n := int64(HistBins)
	if h.Counts == nil {
		h.Counts = make([]float64, n)
		h.Width = initialWidth(lo, hi)
		h.Start = int64(math.Floor(lo / h.Width))
		return
	}
	// Bin indexes are computed in float64 so that a far value cannot overflow int64 before
	// the width has grown to meet it.
	f0, f1 := math.Floor(lo/h.Width), math.Floor(hi/h.Width)
	if f0 >= float64(h.Start) && f1 < float64(h.Start+n) {
		return
	}
	if olo, ohi, ok := h.Occupied(); ok {
		f0, f1 = math.Min(f0, float64(olo)), math.Max(f1, float64(ohi))
	}
	// Double the width until everything fits, merging pairs of bins.
	for f1-f0+1 > float64(n) {
		h.merge()
		f0, f1 = math.Floor(f0/2), math.Floor(f1/2)
	}
	if want0 := int64(f0); want0 < h.Start || int64(f1) >= h.Start+n {
		h.shift(want0)
	}
}

// merge doubles the bin width: global bin i goes to ⌊i/2⌋. The window starts at ⌊Start/2⌋.
func (h *Histogram) merge() {
	merged := make([]float64, len(h.Counts))
	ns := floorDiv2(h.Start)
	for k, c := range h.Counts {
		if c != 0 {
			merged[floorDiv2(h.Start+int64(k))-ns] += c
		}
	}
	h.Counts, h.Start, h.Width = merged, ns, h.Width*2
}

// shift moves the window to start at global bin s; occupied bins must stay inside.
func (h *Histogram) shift(s int64) {
	moved := make([]float64, len(h.Counts))
	for k, c := range h.Counts {
		if c != 0 {
			moved[h.Start+int64(k)-s] = c
		}
	}
	h.Counts, h.Start = moved, s
}

// floorDiv2 is ⌊i/2⌋ for negative i too.
func floorDiv2(i int64) int64 { return i >> 1 }

// initialWidth is the smallest power of two that spreads [lo, hi] over at most a quarter of
// the bins, leaving room to grow; for a single value, a width about 2⁻¹⁰ of its magnitude.
func initialWidth(lo, hi float64) float64 {
	span := hi - lo
	if span <= 0 {
		m := math.Max(math.Abs(lo), math.Abs(hi))
		if m == 0 {
			return math.Ldexp(1, -24)
		}
		_, e := math.Frexp(m)
		return math.Ldexp(1, e-10)
	}
	_, e := math.Frexp(span / (HistBins / 4))
	w := math.Ldexp(1, e) // ≥ span/(bins/4)
	if w/2 >= span/(HistBins/4) {
		w /= 2
	}
	return w
}

// Quantile returns the value below which a fraction q of the counted values lie, interpolating
// linearly inside a bin; lo and hi are the exact extremes, which clamp the result.
func (h *Histogram) Quantile(q float64, lo, hi float64) float64 {
	total := h.Total()
	if total == 0 {
		return 0
	}
	target := q * total
	var cum float64
	for k, c := range h.Counts {
		if c == 0 {
			continue
		}
		if cum+c >= target {
			left := float64(h.Start+int64(k)) * h.Width
			v := left + h.Width*(target-cum)/c
			return math.Min(math.Max(v, lo), hi)
		}
		cum += c
	}
	return hi
}
