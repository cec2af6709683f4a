package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// addAll feeds values in batches the way the collector does.
func addAll(a *ActStats, xs []float32, batch int) {
	for i := 0; i < len(xs); i += batch {
		a.Add(xs[i:min(i+batch, len(xs))], false)
	}
}

// After growing (slides and merges), every bin holds exactly the values that fall in it under
// the final geometry, counted directly here; the extremes are exact, the occupied span keeps at
// least a quarter of the bins, and zero is a bin edge.
func TestHistogramCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var xs []float32
	// A narrow start, then a drift to the right, then wide outliers on both sides.
	for i := 0; i < 3000; i++ {
		xs = append(xs, float32(r.NormFloat64()*0.01))
	}
	for i := 0; i < 3000; i++ {
		xs = append(xs, float32(5+r.NormFloat64()))
	}
	for i := 0; i < 50; i++ {
		xs = append(xs, float32(r.NormFloat64()*300))
	}
	a := &ActStats{}
	addAll(a, xs, 97)
	h := &a.Hist
	want := make([]float64, HistBins)
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range xs {
		k := int(math.Floor(float64(v)/h.Width)) - int(h.Start)
		if k < 0 || k >= HistBins {
			t.Fatalf("%g falls outside the histogram", v)
		}
		want[k]++
		lo, hi = min(lo, v), max(hi, v)
	}
	for k := range want {
		if want[k] != h.Counts[k] {
			t.Fatalf("bin %d: %g, want %g", k, h.Counts[k], want[k])
		}
	}
	if a.Min != lo || a.Max != hi {
		t.Errorf("range [%g, %g], want [%g, %g]", a.Min, a.Max, lo, hi)
	}
	if f, e := math.Frexp(h.Width); f != 0.5 {
		t.Errorf("width %g (2^%d·%g) is not a power of two", h.Width, e, f)
	}
	first, last, _ := h.Occupied()
	if span := last - first + 1; span < HistBins/4 {
		t.Errorf("occupied span %d bins < %d", span, HistBins/4)
	}
}

// A histogram that starts on zeros (the smallest width) survives a huge value without
// overflowing, and still counts everything.
func TestHistogramFromZeros(t *testing.T) {
	a := &ActStats{}
	a.Add(make([]float32, 10), false)
	a.Add([]float32{3e38, -2e38, 1}, false)
	if got := a.Hist.Total(); got != 13 {
		t.Fatalf("total %g, want 13", got)
	}
	lo, hi := a.Hist.Bounds()
	if lo > -2e38 || hi <= 3e38 {
		t.Errorf("bounds [%g, %g] miss the values", lo, hi)
	}
	if bad := a.Add([]float32{float32(math.NaN()), 1}, false); bad != 1 || a.Hist.Total() != 13 {
		t.Errorf("NaN: %d bad, total %g", bad, a.Hist.Total())
	}
}

// Quantiles of a uniform sample are close to the uniform's.
func TestQuantile(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	xs := make([]float32, 100000)
	for i := range xs {
		xs[i] = float32(-2 + 6*r.Float64())
	}
	a := &ActStats{}
	addAll(a, xs, 1000)
	for _, q := range []float64{0.001, 0.25, 0.5, 0.9, 0.999} {
		got := a.Hist.Quantile(q, float64(a.Min), float64(a.Max))
		if want := -2 + 6*q; math.Abs(got-want) > 0.02 {
			t.Errorf("quantile %g: %g, want %g", q, got, want)
		}
	}
}

// AddParallel gives Add's statistics bit for bit, whatever the number of workers, and counts
// the same non-finite values.
func TestAddParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	batches := [][]float32{}
	for _, n := range []int{5, 70000, 300001} {
		b := make([]float32, n)
		for i := range b {
			b[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(3))))
		}
		batches = append(batches, b)
	}
	one := &ActStats{}
	for _, b := range batches {
		one.Add(b, false)
	}
	for _, w := range []int{2, 3, 8} {
		par := &ActStats{}
		for _, b := range batches {
			par.AddParallel(b, false, w)
		}
		if par.Min != one.Min || par.Max != one.Max || par.Hist.Start != one.Hist.Start || par.Hist.Width != one.Hist.Width {
			t.Fatalf("%d workers: range [%g, %g] bins %d/%g, want [%g, %g] %d/%g", w, par.Min, par.Max, par.Hist.Start, par.Hist.Width, one.Min, one.Max, one.Hist.Start, one.Hist.Width)
		}
		for k := range one.Hist.Counts {
			if par.Hist.Counts[k] != one.Hist.Counts[k] {
				t.Fatalf("%d workers: bin %d: %g, want %g", w, k, par.Hist.Counts[k], one.Hist.Counts[k])
			}
		}
		bad := append([]float32(nil), batches[2]...)
		bad[7], bad[200000], bad[300000] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
		if n := par.AddParallel(bad, false, w); n != 3 {
			t.Errorf("%d workers: %d non-finite values counted, want 3", w, n)
		}
	}
}

// The histogram depends only on the values, not on their order or batches, so that histograms
// of parts re-bin exactly into the histogram of the whole (what merging shards does).
func TestHistogramOrderFree(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	var xs []float32
	for i := 0; i < 20000; i++ {
		v := r.NormFloat64()
		switch i % 3 {
		case 1:
			v = 4 + v*0.01
		case 2:
			v *= 50
		}
		xs = append(xs, float32(v))
	}
	xs = append(xs, 0, 0, -1e-30)
	whole := &ActStats{}
	addAll(whole, xs, 1000)
	for trial, batch := range []int{1, 77, 5000, len(xs)} {
		ys := append([]float32(nil), xs...)
		r.Shuffle(len(ys), func(i, j int) { ys[i], ys[j] = ys[j], ys[i] })
		got := &ActStats{}
		addAll(got, ys, batch)
		if got.Hist.Width != whole.Hist.Width || got.Hist.Start != whole.Hist.Start || !slices.Equal(got.Hist.Counts, whole.Hist.Counts) {
			t.Fatalf("trial %d (batches of %d): width %g start %d, want %g %d (or other counts)", trial, batch, got.Hist.Width, got.Hist.Start, whole.Hist.Width, whole.Hist.Start)
		}
		// Parts, re-binned into the geometry of the whole range.
		cut := r.IntN(len(ys))
		a, b := &ActStats{}, &ActStats{}
		addAll(a, ys[:cut], batch)
		addAll(b, ys[cut:], batch)
		if !a.Hist.canonical(float64(a.Min), float64(a.Max)) || !b.Hist.canonical(float64(b.Min), float64(b.Max)) {
			t.Fatalf("trial %d: a part's geometry is not that of its range", trial)
		}
		var m Histogram
		m.fit(float64(min(a.Min, b.Min)), float64(max(a.Max, b.Max)))
		if !m.addRebinned(&a.Hist) || !m.addRebinned(&b.Hist) {
			t.Fatalf("trial %d: re-binning refused", trial)
		}
		if m.Width != whole.Hist.Width || m.Start != whole.Hist.Start || !slices.Equal(m.Counts, whole.Hist.Counts) {
			t.Fatalf("trial %d: merged parts differ from the whole", trial)
		}
	}
	// A constant tensor, and zeros: bins fine enough, indexes exact.
	for _, v := range []float32{0, 3e38, -7.5} {
		c := &ActStats{}
		c.Add([]float32{v, v, v}, false)
		if c.Hist.Total() != 3 || !c.Hist.canonical(float64(v), float64(v)) {
			t.Errorf("constant %g: total %g, width %g", v, c.Hist.Total(), c.Hist.Width)
		}
	}
}
