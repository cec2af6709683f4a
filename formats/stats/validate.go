package stats

import (
	"fmt"
	"math"
)

// Check verifies the statistics on their own: lengths agree with Cols, sums and Hessians are
// finite (Σx² ≥ 0), activation extremes are finite and ordered, histograms well formed. All
// problems are reported in one error naming the source and the tensor.
func (s *Stats) Check() error {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	for _, ls := range s.Linear {
		w := ls.Weight
		switch {
		case ls.Cols <= 0:
			bad("%s: no columns", w)
			continue
		case len(ls.Sum2) != ls.Cols:
			bad("%s: %d Σx² values for %d columns", w, len(ls.Sum2), ls.Cols)
			continue
		case ls.Sum != nil && len(ls.Sum) != ls.Cols:
			bad("%s: %d Σx values for %d columns", w, len(ls.Sum), ls.Cols)
		case ls.AbsMax != nil && len(ls.AbsMax) != ls.Cols:
			bad("%s: %d max|x| values for %d columns", w, len(ls.AbsMax), ls.Cols)
		case ls.Hessian != nil && len(ls.Hessian) != ls.Cols*ls.Cols:
			bad("%s: Hessian of %d values for %d columns", w, len(ls.Hessian), ls.Cols)
		case ls.Count < 0:
			bad("%s: negative count %d", w, ls.Count)
		}
		if i, ok := finite(ls.Sum2, true); !ok {
			bad("%s: Σx²[%d] = %g (want finite and ≥ 0)", w, i, ls.Sum2[i])
		}
		if i, ok := finite(ls.Sum, false); !ok {
			bad("%s: Σx[%d] = %g is not finite", w, i, ls.Sum[i])
		}
		for j, v := range ls.AbsMax {
			if !(v >= 0) || math.IsInf(float64(v), 0) {
				bad("%s: max|x|[%d] = %g (want finite and ≥ 0)", w, j, v)
				break
			}
		}
		if i, ok := finite(ls.Hessian, false); !ok {
			bad("%s: Hessian[%d] = %g is not finite", w, i, ls.Hessian[i])
		}
		if e := ls.Exact; e != nil {
			checkExact(ls, e, bad)
		}
		if ls.SharesInputOf != "" {
			if lead := s.LinearFor(ls.SharesInputOf); lead == nil || lead.Cols != ls.Cols {
				bad("%s: shares the input of %s, which has no statistics of %d columns", w, ls.SharesInputOf, ls.Cols)
			}
		}
	}
	for _, a := range s.Acts {
		n := a.Name
		lo, hi := float64(a.Min), float64(a.Max)
		h := &a.Hist
		switch {
		case math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0):
			bad("%s: range [%g, %g] is not finite", n, lo, hi)
		case lo > hi:
			bad("%s: min %g is above max %g", n, lo, hi)
		case len(h.Counts) != HistBins:
			bad("%s: histogram of %d bins, want %d", n, len(h.Counts), HistBins)
		case !(h.Width > 0) || math.IsInf(h.Width, 0):
			bad("%s: histogram bounds are not an increasing finite pair", n)
		default:
			if i, ok := finite(h.Counts, true); !ok {
				bad("%s: histogram count %d = %g (want finite and ≥ 0)", n, i, h.Counts[i])
				break
			}
			if h.Total() == 0 {
				bad("%s: empty histogram", n)
				break
			}
			b0, b1 := h.Bounds()
			if lo < b0 || hi > b1 {
				bad("%s: range [%g, %g] lies outside the histogram's [%g, %g]", n, lo, hi, b0, b1)
			}
		}
		if a.Held {
			checkHeld(a, bad)
		} else if a.fitSeen != a.heldSeen {
			// One kind of chunk only (a shard): its extremes are the range.
			p, what := [2]float32{a.FitMin, a.FitMax}, "fit"
			if a.heldSeen {
				p, what = [2]float32{a.HeldMin, a.HeldMax}, "held-out"
			}
			if p[0] != a.Min || p[1] != a.Max {
				bad("%s: %s range [%g, %g] of the only kind of chunk seen is not the range [%g, %g]", n, what, p[0], p[1], a.Min, a.Max)
			}
		}
	}
	if p := checkShards(&s.Meta); p != "" {
		bad("%s", p)
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %s", s.name(), joinProblems(probs))
	}
	return nil
}

// Model is what statistics must fit: the model's identity and the inputs calibration
// observes (runtime/arch's StatsModel builds it from a spec).
type Model struct {
	ID ModelID
	// Weights lists every linear weight whose input is observed, in model order.
	Weights []Weight
	// Points names the model's observable activations (its graph's points).
	Points []string
}

// Weight is one observed linear input.
type Weight struct {
	Name string
	Cols int
	// Leader is the weight whose input this one shares ("" for none).
	Leader string
	// Optional weights may be absent from statistics (the output, which llama-imatrix leaves
	// out unless asked).
	Optional bool
}

// Validate checks that the statistics belong to a model: the recorded model identity (when
// known) matches, every linear weight of the blocks has statistics with the right number of
// columns, no statistics name a tensor the model lacks, and every activation they hold is a
// point of the model's graph; statistics with activations have every point, except those of
// a version 1 file, written when fewer points were observed (their consumers calibrate the
// others otherwise or leave them in float). Problems are reported together, in one error.
func (s *Stats) Validate(m Model) error {
	if err := s.Check(); err != nil {
		return err
	}
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if err := s.CheckModel(m.ID); err != nil {
		return err
	}
	cols := map[string]int{}
	for _, w := range m.Weights {
		cols[w.Name] = w.Cols
		ls := s.LinearFor(w.Name)
		switch {
		case ls == nil && !w.Optional:
			bad("%s: missing", w.Name)
		case ls != nil && ls.Cols != w.Cols:
			bad("%s: statistics of %d columns, the model's weight has %d", w.Name, ls.Cols, w.Cols)
		}
	}
	for _, ls := range s.Linear {
		if _, ok := cols[ls.Weight]; !ok {
			bad("%s: not a linear weight of this model", ls.Weight)
		}
	}
	want := map[string]bool{}
	for _, n := range m.Points {
		want[n] = true
	}
	for _, a := range s.Acts {
		if !want[a.Name] {
			bad("activation %s: not an activation of this model", a.Name)
		}
	}
	if len(s.Acts) > 0 && s.Version != 1 {
		for _, n := range m.Points {
			if s.Act(n) == nil {
				bad("activation %s: missing", n)
			}
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %s", s.name(), joinProblems(probs))
	}
	return nil
}

// CheckModel refuses statistics recorded on another model than mine: other tensors (names and
// shapes), or the same shapes with other weights. What either side does not know (a llama.cpp
// imatrix records neither) is not compared.
func (s *Stats) CheckModel(mine ModelID) error {
	id := s.Meta.Model
	dims := func(m ModelID) [7]int {
		return [7]int{m.Hidden, m.Intermediate, m.Layers, m.Heads, m.KVHeads, m.HeadDim, m.Vocab}
	}
	switch {
	case id.TensorsSHA256 != "" && mine.TensorsSHA256 != "" && (id.TensorsSHA256 != mine.TensorsSHA256 ||
		id.Family != mine.Family || dims(id) != dims(mine)):
		desc := func(m ModelID) string {
			return fmt.Sprintf("%s, hidden %d, intermediate %d, %d layers, %d heads (%d kv) of %d, vocab %d, tensor list %.12s",
				m.Family, m.Hidden, m.Intermediate, m.Layers, m.Heads, m.KVHeads, m.HeadDim, m.Vocab, m.TensorsSHA256)
		}
		return fmt.Errorf("%s: model: collected on %s (%s), not on this model (%s)", s.name(), id.Name, desc(id), desc(mine))
	case id.WeightsSHA256 != "" && mine.WeightsSHA256 != "" && id.WeightsSHA256 != mine.WeightsSHA256:
		return fmt.Errorf("%s: model: collected on %s, a model of the same shapes with other weights (the token embeddings differ)", s.name(), id.Name)
	}
	return nil
}

// checkHeld checks an activation's fit and held-out extremes: finite, ordered, inside [Min, Max]
// and, together, reaching both of its ends.
func checkHeld(a *ActStats, bad func(string, ...any)) {
	for _, p := range [][2]float32{{a.FitMin, a.FitMax}, {a.HeldMin, a.HeldMax}} {
		lo, hi := float64(p[0]), float64(p[1])
		if math.IsNaN(lo) || math.IsNaN(hi) || lo > hi || lo < float64(a.Min) || hi > float64(a.Max) {
			bad("%s: fit/held-out range [%g, %g] is not an ordered pair inside [%g, %g]", a.Name, lo, hi, a.Min, a.Max)
			return
		}
	}
	if min(a.FitMin, a.HeldMin) != a.Min || max(a.FitMax, a.HeldMax) != a.Max {
		bad("%s: fit and held-out ranges do not reach the range [%g, %g]", a.Name, a.Min, a.Max)
	}
}

// checkExact checks a weight's exact sums: their lengths, Σx² not negative, and the float64
// sums their correctly rounded values (a float64 sum that is not finite is reported above).
func checkExact(ls *LinearStats, e *ExactSums, bad func(string, ...any)) {
	w := ls.Weight
	switch {
	case len(e.Sum2) != ls.Cols || len(e.Sum) != ls.Cols:
		bad("%s: exact sums of %d and %d values for %d columns", w, len(e.Sum2), len(e.Sum), ls.Cols)
		return
	case e.Hessian != nil && len(e.Hessian) != TriangleLen(ls.Cols):
		bad("%s: exact Hessian of %d values for %d columns", w, len(e.Hessian), ls.Cols)
	}
	for j, f := range e.Sum2 {
		if f.Neg() {
			bad("%s: exact Σx²[%d] = %g is negative", w, j, f.Float64())
			break
		}
	}
	for _, p := range []struct {
		what  string
		exact []Fixed
		float []float64
	}{{"Σx²", e.Sum2, ls.Sum2}, {"Σx", e.Sum, ls.Sum}} {
		if len(p.float) != len(p.exact) {
			continue // reported above
		}
		for j, f := range p.exact {
			v := p.float[j]
			if x := f.Float64(); v != x && !math.IsNaN(v) && !math.IsInf(v, 0) {
				bad("%s: %s[%d] = %g is not its exact sum %g rounded", w, p.what, j, v, x)
				break
			}
		}
	}
}
