package calibrate

import (
	"fmt"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/kernels"
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

	// exactHessians accumulates the Hessians exactly (Calibrate): the calls' XᵀX are summed in
	// float64 in the weight's group partial (parts, c × c) over the chunks of a fold group
	// (stats.Meta.FoldChunks), which is then rounded to the exact grid once and added to the
	// weight's ExactSums.Hessian (foldGroup); the last group's partial is added as the
	// statistics file is written (stats.Writer.WriteHessianSum) or after the pass (finishExact).
	// The exact triangle is allocated at the first fold only: a run of one group never holds
	// it. Without exactHessians (Sequential) the Hessians are summed in float64 into
	// LinearStats.Hessian, as the float sums of one in-process run.
	exactHessians bool
	parts         map[string][]float64
	// foldGroups is the number of fold groups a pass covers: beyond one, Hessians need their
	// exact triangle beside the partial (hessianBytes), in memory or, when the pass's
	// triangles do not fit there, in spill, a scratch file.
	foldGroups int
	spill      *stats.TriangleFile

	// pool and gram run kernels.AddGram, the Hessians' GEMM (pool: Hessians only).
	pool *kernels.Pool
	gram kernels.GramScratch
	// p2 and p1 are one call's partial Σx² and Σx, folded into the exact sums.
	p2, p1 []float64

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
	if hessian && c.pool == nil {
		c.pool = kernels.NewPool(threads)
	}
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

// close stops the collector's workers.
func (c *collector) close() {
	if c.pool != nil {
		c.pool.Close()
		c.pool = nil
	}
}

// hessianBytes is the memory a Hessian of cols columns takes while it is collected: exactly,
// its c × c float64 group partial, 8·c² bytes, and over more than one fold group its exact
// upper triangle of 16-byte integers too, 8·c·(c+1) bytes, unless spilled (kept in a file);
// otherwise the c × c float64 matrix.
func (c *collector) hessianBytes(cols int, spilled bool) int64 {
	b := int64(cols) * int64(cols) * 8
	if c.exactHessians && c.foldGroups > 1 && !spilled {
		b += 16 * int64(stats.TriangleLen(cols))
	}
	return b
}

// hessianBatches splits the Hessians to collect into batches of at most budget bytes (each at
// least one Hessian; budget < 0: one batch, all in memory), each allocated when its pass
// starts, and reports for each whether its exact triangles go to a scratch file (spill): where
// they can (a budget, exact Hessians folded more than once), batches are cut by the float64
// partials alone, and a batch spills when its triangles do not fit beside them. Another pass
// over the corpus costs far more than streaming each triangle through a file once per fold
// group.
func (c *collector) hessianBatches(budget int64) (batches [][]*stats.LinearStats, spill []bool) {
	canSpill := budget >= 0 && c.exactHessians && c.foldGroups > 1
	var cur []*stats.LinearStats
	var used, whole int64 // the batch's bytes as cut, and with its triangles in memory
	end := func() {
		batches = append(batches, cur)
		spill = append(spill, canSpill && whole > budget)
		cur, used, whole = nil, 0, 0
	}
	for _, n := range c.order {
		ls := c.linear[n]
		if !c.hessian || ls.SharesInputOf != "" {
			continue
		}
		size := c.hessianBytes(ls.Cols, canSpill)
		if budget >= 0 && len(cur) > 0 && used+size > budget {
			end()
		}
		cur = append(cur, ls)
		used += size
		whole += c.hessianBytes(ls.Cols, false)
	}
	end()
	return batches, spill
}

// startPass selects what the next pass over the corpus accumulates.
func (c *collector) startPass(sums bool, batch []*stats.LinearStats) {
	c.sums = sums
	c.hessians = make(map[string]*stats.LinearStats, len(batch))
	if c.exactHessians {
		c.parts = make(map[string][]float64, len(batch))
	}
	for _, ls := range batch {
		if c.exactHessians {
			c.parts[ls.Weight] = kernels.NewGram(ls.Cols, c.pool)
		} else if ls.Hessian == nil {
			ls.Hessian = kernels.NewGram(ls.Cols, c.pool)
		}
		c.hessians[ls.Weight] = ls
	}
}

// foldGroup ends a fold group that is not the pass's last: each Hessian's group partial is
// added to its exact triangle (allocated at the first fold) and zeroed for the next group.
func (c *collector) foldGroup() error {
	for _, n := range c.order {
		h := c.parts[n]
		if h == nil {
			continue
		}
		ls := c.linear[n]
		if c.spill != nil {
			i, j, ok, err := c.spill.FoldZero(n, h, c.threads)
			if err != nil {
				return err
			}
			if !ok {
				return hessianRange(n, i, j, h[i*ls.Cols+j])
			}
			continue
		}
		if ls.Exact.Hessian == nil {
			ls.Exact.Hessian = make([]stats.Fixed, stats.TriangleLen(ls.Cols))
		}
		if i, j, ok := stats.FoldUpperZero(ls.Exact.Hessian, h, ls.Cols, c.threads); !ok {
			return hessianRange(n, i, j, h[i*ls.Cols+j])
		}
	}
	return nil
}

// endChunk ends chunk ci (a global index) of a part of the windows that ends at end: at the
// end of a fold group other than the part's last (which ends with the pass), the Hessians fold.
func (c *collector) endChunk(ci, end, fold int) error {
	if len(c.parts) == 0 || (ci+1)%fold != 0 || ci+1 >= end {
		return nil
	}
	return c.foldGroup()
}

// hessianRange is the error of a Hessian element that cannot be added exactly.
func hessianRange(weight string, i, j int, v float64) error {
	return fmt.Errorf("%s: Hessian[%d, %d]: the sum %g is %s", weight, i, j, v, exactRange)
}

// finishExact ends a pass in memory: the last group's partials are added to the exact
// triangles (ExactSums.Hessian, kept), and each partial's memory becomes the full float64
// Hessian (LinearStats.Hessian), the exact one rounded.
func (c *collector) finishExact(batch []*stats.LinearStats) error {
	for _, ls := range batch {
		h := c.parts[ls.Weight]
		if ls.Exact.Hessian == nil {
			ls.Exact.Hessian = make([]stats.Fixed, stats.TriangleLen(ls.Cols))
		}
		if i, j, ok := stats.FoldUpper(ls.Exact.Hessian, h, ls.Cols, c.threads); !ok {
			return hessianRange(ls.Weight, i, j, h[i*ls.Cols+j])
		}
		stats.UpperToFull(h, ls.Exact.Hessian, ls.Cols)
		ls.Hessian = h
		delete(c.parts, ls.Weight)
	}
	return nil
}

// writeExact ends a streamed pass: each Hessian of the batch, its exact triangle (in memory or
// spilled) plus its last group's partial, goes to the statistics file, and both are freed.
func (c *collector) writeExact(sink *stats.Writer, batch []*stats.LinearStats) error {
	for _, ls := range batch {
		var acc stats.ExactTriangle = stats.Triangle(ls.Exact.Hessian)
		if c.spill != nil {
			acc = c.spill.Triangle(ls.Weight)
		}
		if err := sink.WriteHessianSum(ls.Weight, acc, c.parts[ls.Weight], c.threads); err != nil {
			return err
		}
		ls.Exact.Hessian = nil
		delete(c.parts, ls.Weight)
	}
	return nil
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
		c.p2, c.p1 = grow(c.p2, cols), grow(c.p1, cols)
		clear(c.p2)
		clear(c.p1)
		kernels.AddColumnSums(c.p2, c.p1, ls.AbsMax, x, n, cols)
		// The call's partial sums (one chunk's: the runtime evaluates a chunk in one forward
		// pass), rounded once to the exact grid: the bits do not depend on what else is summed.
		if j, ok := stats.FoldFloats(ls.Exact.Sum2, c.p2); !ok {
			c.err = fmt.Errorf("%s: Σx²[%d]: the sum %g is %s", weight, j, c.p2[j], exactRange)
			return
		}
		if j, ok := stats.FoldFloats(ls.Exact.Sum, c.p1); !ok {
			c.err = fmt.Errorf("%s: Σx[%d]: the sum %g is %s", weight, j, c.p1[j], exactRange)
			return
		}
	}
	if c.hessians[weight] == nil {
		return
	}
	// Exactly: this call's XᵀX into the fold group's partial; otherwise straight into the
	// float64 Hessian.
	h := ls.Hessian
	if c.exactHessians {
		h = c.parts[weight]
	}
	kernels.AddGram(h, x, n, cols, c.pool, &c.gram)
}

// exactRange says why a sum cannot be held exactly.
const exactRange = "not finite or outside the exact range ±2^63"

// grow returns s with length n, reallocated only when too short.
func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
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

// stats assembles the statistics after the first pass, the float64 sums rounded from the
// exact ones; followers get copies of their leader's sums (not of its Hessian).
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
			ls.Exact.Sum2 = append(ls.Exact.Sum2[:0], l.Exact.Sum2...)
			ls.Exact.Sum = append(ls.Exact.Sum[:0], l.Exact.Sum...)
			ls.AbsMax = append(ls.AbsMax[:0], l.AbsMax...)
		}
		ls.Round()
		s.Linear = append(s.Linear, ls)
	}
	return s
}
