package stats

import (
	"math"
	"sync"
)

// LinearStats are the statistics of one linear layer's input, keyed by its weight.
type LinearStats struct {
	// Weight is the GGUF name of the weight ("blk.0.attn_q.weight").
	Weight string
	// Cols is the number of input columns (the weight's row length).
	Cols int
	// Count is the number of input rows (tokens) summed.
	Count int64
	// Sum2 is Σx² per column; Sum is Σx (nil when unknown, as in most imatrix files).
	Sum2, Sum []float64
	// AbsMax is max|x| per column (nil when unknown).
	AbsMax []float32
	// Hessian is Σ xᵀx, Cols × Cols row-major and symmetric, when collected by this process
	// (weights that share an input share one slice), or nil. The Hessians of a statistics
	// file stay in the file until Stats.Hessian reads one: a 7B model's take tens of GB.
	Hessian []float64
	// hessian locates this weight's Hessian in a statistics file (nil: none there).
	hessian *hessianRef
	// taken: Stats.TakeHessian handed the in-memory Hessian over (Hessian is nil since).
	taken bool
	// SharesInputOf names the weight whose input this one shares ("" for none); the Hessian
	// is stored once, under that weight.
	SharesInputOf string
	// Exact holds Sum2, Sum and the Hessian exactly (see Fixed), when known: statistics
	// collected by this gquant, or read from a file that stores them (calibration.exact).
	// They make statistics mergeable without rounding (Merge); the float64 fields above are
	// their correctly rounded values, which is what every consumer reads.
	Exact *ExactSums
}

// ExactSums are the exact forms of a linear input's sums.
type ExactSums struct {
	// Sum2 and Sum are Σx² and Σx per column.
	Sum2, Sum []Fixed
	// Hessian is the upper triangle of Σ xᵀx, row by row (TriangleLen(Cols) values), while it
	// is held in memory (nil otherwise: not collected, streamed to a file, or in one).
	Hessian []Fixed
}

// NewLinearStats returns empty statistics for a weight with cols columns.
func NewLinearStats(weight string, cols int) *LinearStats {
	return &LinearStats{Weight: weight, Cols: cols, Sum2: make([]float64, cols), Sum: make([]float64, cols), AbsMax: make([]float32, cols),
		Exact: &ExactSums{Sum2: make([]Fixed, cols), Sum: make([]Fixed, cols)}}
}

// Round sets Sum2 and Sum from the exact sums.
func (ls *LinearStats) Round() {
	if ls.Exact == nil {
		return
	}
	ls.Sum2 = Floats(ls.Sum2, ls.Exact.Sum2)
	ls.Sum = Floats(ls.Sum, ls.Exact.Sum)
}

// ActStats are the statistics of one activation tensor.
type ActStats struct {
	// Name is the activation's name (runtime.ActivationNames).
	Name string
	// Min and Max are the extremes over every value seen.
	Min, Max float32
	// Hist is the histogram of every value seen.
	Hist Histogram
	// Held reports whether the extremes below were collected (false in statistics written
	// before they existed: then no range is widened for unseen values).
	Held bool
	// FitMin and FitMax are the extremes over the fit chunks, HeldMin and HeldMax those over
	// the held-out chunks (every HoldoutEvery-th); Min and Max are the extremes of both. How
	// far the held-out extremes reach past the fit ones estimates how far new text reaches
	// past the calibrated range (see Range).
	FitMin, FitMax, HeldMin, HeldMax float32

	fitSeen, heldSeen bool // while collecting: whether each pair holds values
}

// HoldoutEvery makes every HoldoutEvery-th calibration chunk (chunk index i with
// i%HoldoutEvery == HoldoutEvery-1) a held-out chunk, whose extremes are kept apart.
const HoldoutEvery = 4

// addExtremes folds a batch's extremes into the fit or held-out pair.
func (a *ActStats) addExtremes(lo, hi float32, held bool) {
	pmin, pmax, seen := &a.FitMin, &a.FitMax, &a.fitSeen
	if held {
		pmin, pmax, seen = &a.HeldMin, &a.HeldMax, &a.heldSeen
	}
	if !*seen {
		*pmin, *pmax, *seen = lo, hi, true
		return
	}
	*pmin, *pmax = min(*pmin, lo), max(*pmax, hi)
}

// Add accumulates a batch of finite values, from a held-out chunk or not, and returns the
// number of non-finite ones (which are not counted).
func (a *ActStats) Add(x []float32, held bool) (bad int) { return a.AddParallel(x, held, 1) }

// parallelMin is the batch below which AddParallel stays on one goroutine.
const parallelMin = 1 << 16

// AddParallel is Add with the batch split over up to workers goroutines: the same result, bit
// for bit (extremes are order-free, and the histogram's counts are whole numbers).
func (a *ActStats) AddParallel(x []float32, held bool, workers int) (bad int) {
	if len(x) == 0 {
		return 0
	}
	workers = max(1, min(workers, len(x)/parallelMin))
	chunk := (len(x) + workers - 1) / workers
	parts := make([][2]float32, workers)
	nonFinite := make([]int, workers)
	each := func(f func(w int, part []float32)) {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			part := x[min(len(x), w*chunk):min(len(x), (w+1)*chunk)]
			if w == workers-1 {
				f(w, part)
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); f(w, part) }()
		}
		wg.Wait()
	}
	each(func(w int, part []float32) {
		lo, hi, nan := extremes(part)
		parts[w] = [2]float32{lo, hi}
		if nan || math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) {
			for _, v := range part {
				if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
					nonFinite[w]++
				}
			}
		}
	})
	lo, hi := parts[0][0], parts[0][1]
	for w := range parts {
		bad += nonFinite[w]
		lo, hi = min(lo, parts[w][0]), max(hi, parts[w][1])
	}
	if bad > 0 {
		return bad
	}
	if a.Hist.Counts == nil {
		a.Min, a.Max = lo, hi
	} else {
		a.Min, a.Max = min(a.Min, lo), max(a.Max, hi)
	}
	a.addExtremes(lo, hi, held)
	if workers == 1 {
		a.Hist.Add(x, a.Min, a.Max)
		return 0
	}
	a.Hist.fit(float64(a.Min), float64(a.Max))
	counts := make([]*[HistBins]float64, workers)
	each(func(w int, part []float32) {
		c := countsPool.Get().(*[HistBins]float64)
		clear(c[:])
		counts[w] = c
		a.Hist.count(part, c[:len(a.Hist.Counts)])
	})
	for _, c := range counts {
		for k, v := range c[:len(a.Hist.Counts)] {
			a.Hist.Counts[k] += v
		}
		countsPool.Put(c)
	}
	return 0
}

// countsPool holds the per-worker histogram counts of AddParallel.
var countsPool = sync.Pool{New: func() any { return new([HistBins]float64) }}

// extremes returns the minimum and maximum of x (not empty) and whether it holds a NaN,
// over four independent lanes.
func extremes(x []float32) (lo, hi float32, nan bool) {
	l0, l1, l2, l3 := x[0], x[0], x[0], x[0]
	h0, h1, h2, h3 := x[0], x[0], x[0], x[0]
	var n float32 // stays finite unless some v is NaN (v − v is NaN only for NaN and ±Inf)
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a, b, c, d := x[i], x[i+1], x[i+2], x[i+3]
		if a < l0 {
			l0 = a
		}
		if a > h0 {
			h0 = a
		}
		if b < l1 {
			l1 = b
		}
		if b > h1 {
			h1 = b
		}
		if c < l2 {
			l2 = c
		}
		if c > h2 {
			h2 = c
		}
		if d < l3 {
			l3 = d
		}
		if d > h3 {
			h3 = d
		}
		n += (a - a) + (b - b) + (c - c) + (d - d)
	}
	for ; i < len(x); i++ {
		v := x[i]
		l0, h0 = min(l0, v), max(h0, v)
		n += v - v
	}
	lo, hi = min(min(l0, l1), min(l2, l3)), max(max(h0, h1), max(h2, h3))
	return lo, hi, n != n || lo != lo || hi != hi
}

// Finish sets Held once collection is done: both fit and held-out values were seen (fewer
// than HoldoutEvery chunks leave nothing to extrapolate from).
func (a *ActStats) Finish() { a.Held = a.fitSeen && a.heldSeen }

// FitSeen and HeldSeen report whether fit and held-out chunks were seen (FitMin and FitMax,
// HeldMin and HeldMax hold their extremes): a shard may hold only one kind.
func (a *ActStats) FitSeen() bool  { return a.fitSeen }
func (a *ActStats) HeldSeen() bool { return a.heldSeen }
