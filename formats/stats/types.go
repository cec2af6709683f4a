package stats

import "math"

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

// NewLinearStats returns empty statistics for a weight with cols columns.
func NewLinearStats(weight string, cols int) *LinearStats {
	return &LinearStats{Weight: weight, Cols: cols, Sum2: make([]float64, cols), Sum: make([]float64, cols), AbsMax: make([]float32, cols)}
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
func (a *ActStats) Add(x []float32, held bool) (bad int) {
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

// Finish sets Held once collection is done: both fit and held-out values were seen (fewer
// than HoldoutEvery chunks leave nothing to extrapolate from).
func (a *ActStats) Finish() { a.Held = a.fitSeen && a.heldSeen }
