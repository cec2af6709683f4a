package calibrate

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
	// SharesInputOf names the weight whose input this one shares ("" for none); the Hessian
	// is stored once, under that weight.
	SharesInputOf string
}

// newLinearStats returns empty statistics for a weight with cols columns.
func newLinearStats(weight string, cols int) *LinearStats {
	return &LinearStats{Weight: weight, Cols: cols, Sum2: make([]float64, cols), Sum: make([]float64, cols), AbsMax: make([]float32, cols)}
}

// addSums accumulates Σx², Σx and max|x| over n rows of x (n × Cols, row-major).
func (ls *LinearStats) addSums(x []float32, n int) {
	c := ls.Cols
	s2, s1, am := ls.Sum2, ls.Sum, ls.AbsMax
	for t := 0; t < n; t++ {
		row := x[t*c : (t+1)*c]
		for j, v := range row {
			d := float64(v)
			// The explicit conversion keeps d*d from fusing with the addition, so the bits
			// do not depend on GOAMD64.
			s2[j] += float64(d * d)
			s1[j] += d
			if a := float32(math.Abs(d)); a > am[j] {
				am[j] = a
			}
		}
	}
}

// parallelOuterWork is the multiply-adds below which addOuter stays on one goroutine.
var parallelOuterWork = 1 << 22

// addOuter adds xᵀx to h (c × c) over the n rows of x: the upper triangle (j ≥ i) and, for
// rows inside a block of four, a few elements just left of the diagonal that finishHessian
// overwrites. Rows of h are split between up to threads goroutines by equal triangle area;
// every element is summed over t in order, so the result does not depend on the split.
// Four rows of h are updated together, so that they stay in cache while x streams by.
// scratch holds x widened to float64 (grown as needed, reused across calls).
func addOuter(h []float64, x []float32, n, c, threads int, scratch *[]float64) {
	if cap(*scratch) < n*c {
		*scratch = make([]float64, n*c)
	}
	xd := (*scratch)[:n*c]
	for i, v := range x[:n*c] {
		xd[i] = float64(v)
	}
	work := func(i0, i1 int) {
		for i := i0; i < i1; {
			if i+4 <= i1 {
				outer4(h, xd, n, c, i)
				i += 4
				continue
			}
			outer1(h, xd, n, c, i)
			i++
		}
	}
	if threads <= 1 || c*c*n < parallelOuterWork {
		work(0, c)
		return
	}
	// Split rows (in multiples of four) so that each part has about the same number of
	// upper-triangle elements.
	parts := min(threads, c/4)
	bounds := []int{0}
	total := float64(c) * float64(c+1) / 2
	acc := 0.0
	for i := 0; i < c && len(bounds) < parts; i++ {
		acc += float64(c - i)
		if acc >= total*float64(len(bounds))/float64(parts) && (i+1)%4 == 0 {
			bounds = append(bounds, i+1)
		}
	}
	bounds = append(bounds, c)
	var wg sync.WaitGroup
	for p := 0; p+1 < len(bounds); p++ {
		wg.Add(1)
		go func(i0, i1 int) {
			defer wg.Done()
			work(i0, i1)
		}(bounds[p], bounds[p+1])
	}
	wg.Wait()
}

// outer4 adds Σ_t x[t,i+k]·x[t,j] to h[i+k, j] for k < 4 and j ≥ i. The explicit conversions
// keep the products from fusing with the additions (same bits under every GOAMD64).
func outer4(h, xd []float64, n, c, i int) {
	m := c - i
	h0 := h[i*c+i : i*c+c]
	h1 := h[(i+1)*c+i : (i+1)*c+c][:m]
	h2 := h[(i+2)*c+i : (i+2)*c+c][:m]
	h3 := h[(i+3)*c+i : (i+3)*c+c][:m]
	for t := 0; t < n; t++ {
		r := xd[t*c+i : t*c+c][:m]
		a0, a1, a2, a3 := r[0], r[1], r[2], r[3]
		for j, v := range r {
			h0[j] += float64(a0 * v)
			h1[j] += float64(a1 * v)
			h2[j] += float64(a2 * v)
			h3[j] += float64(a3 * v)
		}
	}
}

// outer1 adds Σ_t x[t,i]·x[t,j] to h[i, j] for j ≥ i.
func outer1(h, xd []float64, n, c, i int) {
	m := c - i
	h0 := h[i*c+i : i*c+c]
	for t := 0; t < n; t++ {
		r := xd[t*c+i : t*c+c][:m]
		a0 := r[0]
		for j, v := range r {
			h0[j] += float64(a0 * v)
		}
	}
}

// finishHessian mirrors the upper triangle into the lower one.
func finishHessian(h []float64, c int) {
	for i := 0; i < c; i++ {
		for j := i + 1; j < c; j++ {
			h[j*c+i] = h[i*c+j]
		}
	}
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

// add accumulates a batch of finite values and returns the number of non-finite ones (which
// are not counted).
func (a *ActStats) add(x []float32, held bool) (bad int) {
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v) // a NaN makes both NaN
	}
	if lo != lo || hi != hi || math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) {
		for _, v := range x {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				bad++
			}
		}
		if bad > 0 {
			return bad
		}
	}
	if len(x) == 0 {
		return 0
	}
	if a.Hist.Counts == nil {
		a.Min, a.Max = lo, hi
	} else {
		a.Min, a.Max = min(a.Min, lo), max(a.Max, hi)
	}
	a.addExtremes(lo, hi, held)
	a.Hist.Add(x, lo, hi)
	return 0
}
