package calibrate

import (
	"fmt"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/runtime"
)

// collector is the observer attached to the runtime's hooks. It is called on the goroutine
// that runs Eval; the first problem it meets is kept in err and stops it.
type collector struct {
	threads int
	hessian bool // collect Hessians (of leaders only)
	order   []string
	linear  map[string]*stats.LinearStats
	leader  map[string]string // weight → weight whose input it shares
	acts    []*stats.ActStats
	actIdx  map[string]*stats.ActStats

	// per pass
	sums     bool                          // accumulate Σx², Σx, max|x| and activations (first pass)
	held     bool                          // the current chunk is a held-out one (see HoldoutEvery)
	hessians map[string]*stats.LinearStats // leaders whose Hessian this pass accumulates

	// xd is addOuter's float64 copy of an input, reused: with Hessians of gigabytes in the
	// heap, a fresh copy per call lets the garbage grow by as much before a collection.
	xd []float64

	// the previous LinearInput call, to check that followers really share their leader's input
	prevWeight string
	prevPtr    *float32
	prevN      int

	err error
}

// hooks returns the runtime hooks that feed the collector.
func (c *collector) hooks() *runtime.Hooks {
	return &runtime.Hooks{LinearInput: c.linearInput, Activation: c.activation}
}

// init sizes the collector for a model.
func (c *collector) init(model stats.Model, hessian bool, threads int) error {
	c.threads, c.hessian = threads, hessian
	c.leader = map[string]string{}
	c.linear = make(map[string]*stats.LinearStats, len(model.Weights))
	for _, w := range model.Weights {
		ls := stats.NewLinearStats(w.Name, w.Cols)
		ls.SharesInputOf = w.Leader
		if w.Leader != "" {
			c.leader[w.Name] = w.Leader
		}
		c.order = append(c.order, w.Name)
		c.linear[w.Name] = ls
	}
	c.actIdx = map[string]*stats.ActStats{}
	for _, n := range model.Points {
		a := &stats.ActStats{Name: n}
		c.acts = append(c.acts, a)
		c.actIdx[n] = a
	}
	return nil
}

// hessianBatches splits the Hessians to collect into batches of at most budget bytes (each at
// least one Hessian; budget < 0: one batch). Each is allocated when its pass starts.
func (c *collector) hessianBatches(budget int64) [][]*stats.LinearStats {
	var batches [][]*stats.LinearStats
	var cur []*stats.LinearStats
	var used int64
	for _, n := range c.order {
		ls := c.linear[n]
		if !c.hessian || ls.SharesInputOf != "" {
			continue
		}
		size := int64(ls.Cols) * int64(ls.Cols) * 8
		if budget >= 0 && len(cur) > 0 && used+size > budget {
			batches = append(batches, cur)
			cur, used = nil, 0
		}
		cur = append(cur, ls)
		used += size
	}
	return append(batches, cur)
}

// startPass selects what the next pass over the corpus accumulates.
func (c *collector) startPass(sums bool, batch []*stats.LinearStats) {
	c.sums = sums
	c.hessians = make(map[string]*stats.LinearStats, len(batch))
	for _, ls := range batch {
		if ls.Hessian == nil {
			ls.Hessian = make([]float64, ls.Cols*ls.Cols)
		}
		c.hessians[ls.Weight] = ls
	}
}

// linearInput observes the input of a linear layer.
func (c *collector) linearInput(weight string, x []float32, n, cols int) {
	if c.err != nil {
		return
	}
	prevWeight, prevPtr, prevN := c.prevWeight, c.prevPtr, c.prevN
	c.prevWeight, c.prevPtr, c.prevN = weight, &x[0], n
	ls := c.linear[weight]
	switch {
	case ls == nil:
		c.err = fmt.Errorf("%s: the runtime fed an unexpected linear layer", weight)
		return
	case cols != ls.Cols || len(x) != n*cols:
		c.err = fmt.Errorf("%s: input of %d × %d, want %d columns", weight, n, cols, ls.Cols)
		return
	}
	if lead := c.leader[weight]; lead != "" {
		// Followers share the leader's statistics; check that the input really is the same.
		if (prevWeight != lead && c.leader[prevWeight] != lead) || prevPtr != &x[0] || prevN != n {
			c.err = fmt.Errorf("%s: input is not the input of %s, which its statistics are shared with", weight, lead)
		}
		return
	}
	if c.sums {
		ls.Count += int64(n)
		addSums(ls, x, n)
	}
	if c.hessians[weight] != nil {
		addOuter(ls.Hessian, x, n, cols, c.threads, &c.xd)
	}
}

// activation observes an activation tensor.
func (c *collector) activation(name string, x []float32, n, dim int) {
	if c.err != nil || !c.sums {
		return
	}
	a := c.actIdx[name]
	if a == nil {
		c.err = fmt.Errorf("%s: the runtime fed an unexpected activation", name)
		return
	}
	if bad := a.AddParallel(x, c.held, c.threads); bad > 0 {
		c.err = fmt.Errorf("activation %s: %d non-finite values", name, bad)
	}
}

// stats assembles the statistics after the first pass; followers get copies of their leader's
// sums (not of its Hessian).
func (c *collector) stats(meta stats.Meta) *stats.Stats {
	s := &stats.Stats{Kind: "gquant", Meta: meta, Acts: c.acts}
	for _, a := range c.acts {
		a.Finish()
	}
	for _, n := range c.order {
		ls := c.linear[n]
		if lead := c.leader[n]; lead != "" {
			l := c.linear[lead]
			ls.Count = l.Count
			ls.Sum2 = append(ls.Sum2[:0], l.Sum2...)
			ls.Sum = append(ls.Sum[:0], l.Sum...)
			ls.AbsMax = append(ls.AbsMax[:0], l.AbsMax...)
		}
		s.Linear = append(s.Linear, ls)
	}
	return s
}
