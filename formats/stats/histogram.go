package stats

import (
	"math"
)

// HistBins is the number of bins of an activation histogram.
const HistBins = 2048

// Histogram counts values in HistBins equal bins whose width is a power of two and whose edges
// are multiples of it, so that zero is always an edge. Its geometry is a function of the
// extremes of the values counted, never of their order or batches: the width is the smallest
// power of two (at least minWidth) with which [min, max] spans at most HistBins bins, and the
// first bin is the one of the minimum. As values arrive the width doubles (pairs of bins merge
// exactly) and the window slides, so the counts depend only on the multiset of values, and
// two histograms merge exactly (Merge): statistics collected in shards and merged equal those
// of one run. The occupied span keeps more than half of the bins (short of the minimum width).
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

// Add counts the finite values of x; lo and hi are the extremes of every value counted so far,
// x's included.
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

// fit gives h the geometry of the extremes [lo, hi] of every value counted so far and to count
// (they only grow, and so does the width).
func (h *Histogram) fit(lo, hi float64) {
	w := widthFor(lo, hi)
	if h.Counts == nil {
		h.Counts = make([]float64, HistBins)
		h.Width, h.Start = w, int64(math.Floor(lo/w))
		return
	}
	for h.Width < w {
		h.merge()
	}
	if s := int64(math.Floor(lo / h.Width)); s != h.Start {
		h.shift(s)
	}
}

// minHistWidth is the smallest bin width (a histogram of zeros has it).
var minHistWidth = math.Ldexp(1, -64)

// minWidth is the smallest bin width for values in [lo, hi]: minHistWidth, or 2⁻⁵² of the
// largest magnitude (so that a value's bin index is exact in float64 and fits in int64).
func minWidth(lo, hi float64) float64 {
	m := math.Max(math.Abs(lo), math.Abs(hi))
	if m == 0 {
		return minHistWidth
	}
	_, e := math.Frexp(m) // m < 2^e
	return math.Max(minHistWidth, math.Ldexp(1, e-52))
}

// widthFor is the bin width of a histogram of values in [lo, hi] (finite, lo ≤ hi): the smallest
// power of two, at least minWidth(lo, hi), with which [lo, hi] spans at most HistBins bins. It
// never shrinks as the range grows.
func widthFor(lo, hi float64) float64 {
	w := minWidth(lo, hi)
	// No power of two below span/HistBins can do: start from the one just under it.
	if span := hi - lo; span > 0 {
		_, e := math.Frexp(span / HistBins)
		w = math.Max(w, math.Ldexp(1, e-1))
	}
	for math.Floor(hi/w)-math.Floor(lo/w)+1 > HistBins {
		w *= 2
	}
	return w
}

// canonical reports whether h has the geometry of the extremes [lo, hi] (widthFor; its first
// bin the minimum's), as the histograms of this gquant do; older files' histograms grew from
// their first batch.
func (h *Histogram) canonical(lo, hi float64) bool {
	w := widthFor(lo, hi)
	return h.Width == w && h.Start == int64(math.Floor(lo/w)) && len(h.Counts) == HistBins
}

// addRebinned adds the counts of src into h, whose bins are as wide as src's or wider (both
// powers of two, edges on multiples): src's global bin g lands in h's bin g >> shift, exactly.
func (h *Histogram) addRebinned(src *Histogram) bool {
	_, es := math.Frexp(src.Width)
	_, eh := math.Frexp(h.Width)
	shift := eh - es
	if shift < 0 {
		return false
	}
	for k, c := range src.Counts {
		if c == 0 {
			continue
		}
		i := (src.Start+int64(k))>>shift - h.Start
		if i < 0 || i >= int64(len(h.Counts)) {
			return false
		}
		h.Counts[i] += c
	}
	return true
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
