package convert

import (
	"fmt"
	"math"
	"sort"
)

// The allocation of --target-bpw and --target-size is a multiple-choice knapsack: each item (a
// linear weight) takes exactly one of its options (encodings), each with a cost (bytes) and a
// predicted error (KL), and the sum of the errors is minimised with the sum of the costs
// within a budget.
//
// allocate solves it by dynamic programming over the budget counted in units: the greatest
// common divisor of the costs, which makes it exact (the bytes of ggml blocks over tensors of a
// few shapes share a large one: 256 bytes on stories3m, whose budget of some 2 MB is then
// 8,000 states), or, when that would take more than maxStates states, a coarser unit with
// every cost rounded up to it. The rounded solution is within the budget and optimal for the
// budget less one unit per item (at most items × budget / maxStates bytes: a few parts per
// million on a 200-weight model).
//
// It also reports the Lagrangian (LP) relaxation's optimum, a lower bound on the error of any
// choice within the budget: every item at its cheapest option, then the upgrades along each
// item's lower convex hull of (cost, error) in order of error saved per byte while they fit,
// and the fraction of the first that does not. Ties are fixed (the DP keeps the lower option
// on equal error), so the same inputs give the same choice.

// option is one choice of an item: what it costs and the error it is predicted to add.
type option struct {
	cost uint64
	err  float64
}

// allocation is allocate's result: the option of each item, their total cost and error, the
// relaxation's lower bound on the error of any choice within the budget, and whether the
// solution is exact (no rounding of the costs).
type allocation struct {
	pick  []int
	cost  uint64
	err   float64
	bound float64
	exact bool
}

// maxStates bounds the dynamic programme's states (its table of choices holds one byte per
// state and item).
var maxStates = 1 << 20

// allocate chooses one option per item (each with at least one, at most 255) with a total
// cost of at most budget and the least total error (see above). It fails when even the
// cheapest options exceed the budget.
func allocate(items [][]option, budget uint64) (*allocation, error) {
	var low uint64
	g := uint64(0)
	for i, opts := range items {
		if len(opts) == 0 || len(opts) > 255 {
			return nil, fmt.Errorf("allocation: item %d has %d options (1 to 255)", i, len(opts))
		}
		c := opts[0].cost
		for _, o := range opts {
			c = min(c, o.cost)
			g = gcd(g, o.cost)
		}
		low += c
	}
	if low > budget {
		return nil, fmt.Errorf("allocation: the cheapest choice takes %d bytes, over the budget of %d", low, budget)
	}
	a := &allocation{bound: relaxation(items, budget), exact: true}
	unit := max(g, 1)
	if budget/unit+1 > uint64(maxStates) {
		unit = (budget + uint64(maxStates) - 2) / uint64(maxStates-1) // budget/unit < maxStates
		a.exact = false
	}
	// Costs in units, rounded up (exact when unit divides them all).
	units := make([][]int, len(items))
	for i, opts := range items {
		for _, o := range opts {
			u := (o.cost + unit - 1) / unit
			units[i] = append(units[i], int(min(u, budget/unit+1)))
		}
	}
	a.pick = knapsackDP(items, units, int(budget/unit)+1)
	if a.pick == nil {
		// Rounding up left no choice within the budget (a budget within a few units of the
		// cheapest choice): take the cheapest options, which fit.
		a.pick = make([]int, len(items))
		for i, opts := range items {
			for k, o := range opts {
				if o.cost < opts[a.pick[i]].cost || (o.cost == opts[a.pick[i]].cost && o.err < opts[a.pick[i]].err) {
					a.pick[i] = k
				}
			}
		}
	}
	for i, k := range a.pick {
		a.cost += items[i][k].cost
		a.err += items[i][k].err
	}
	return a, nil
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// knapsackDP returns the options of least total error whose costs in units sum to less than
// states, or nil when none do: best[c] is the least error of the items so far within c units,
// choice[i][c] the option item i takes there.
func knapsackDP(items [][]option, units [][]int, states int) []int {
	best := make([]float64, states) // no items: nothing costs, nothing errs
	next := make([]float64, states)
	choice := make([][]uint8, len(items))
	for i, opts := range items {
		ch := make([]uint8, states)
		for c := 0; c < states; c++ {
			next[c] = math.Inf(1)
			for k, o := range opts {
				u := units[i][k]
				if u > c {
					continue
				}
				if e := best[c-u] + o.err; e < next[c] {
					next[c], ch[c] = e, uint8(k)
				}
			}
		}
		choice[i] = ch
		best, next = next, best
	}
	c := states - 1
	if math.IsInf(best[c], 1) {
		return nil
	}
	pick := make([]int, len(items))
	for i := len(items) - 1; i >= 0; i-- {
		k := int(choice[i][c])
		pick[i] = k
		c -= units[i][k]
	}
	return pick
}

// relaxation returns the optimum of the LP relaxation (see above): no choice within the budget
// predicts less. The cheapest choice must fit.
func relaxation(items [][]option, budget uint64) float64 {
	type step struct {
		item, k int
		dc      uint64
		de      float64 // error saved
		gain    float64 // per byte
	}
	var steps []step
	var cost uint64
	var err float64
	for i, opts := range items {
		h := hull(opts)
		cost += opts[h[0]].cost
		err += opts[h[0]].err
		for k := 0; k+1 < len(h); k++ {
			p, q := opts[h[k]], opts[h[k+1]]
			steps = append(steps, step{i, k, q.cost - p.cost, p.err - q.err, (p.err - q.err) / float64(q.cost-p.cost)})
		}
	}
	// On one item's hull the gains decrease, so this order takes each item's steps in turn.
	sort.SliceStable(steps, func(x, y int) bool {
		if steps[x].gain != steps[y].gain {
			return steps[x].gain > steps[y].gain
		}
		if steps[x].item != steps[y].item {
			return steps[x].item < steps[y].item
		}
		return steps[x].k < steps[y].k
	})
	for _, s := range steps {
		if cost+s.dc > budget {
			return err - s.de*float64(budget-cost)/float64(s.dc)
		}
		cost += s.dc
		err -= s.de
	}
	return err
}

// hull returns the indexes of opts on their lower convex hull of (cost, error), by increasing
// cost: options that cost more and save no error are left out, and so are those on or above
// the segment between two others. Ties go to the lower index.
func hull(opts []option) []int {
	idx := make([]int, len(opts))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		a, b := opts[idx[x]], opts[idx[y]]
		if a.cost != b.cost {
			return a.cost < b.cost
		}
		return a.err < b.err
	})
	var h []int
	for _, i := range idx {
		o := opts[i]
		if len(h) > 0 && o.err >= opts[h[len(h)-1]].err {
			continue // dominated: costs at least as much, saves nothing
		}
		// Drop the last point while it lies on or above the segment from the one before to o.
		for len(h) >= 2 {
			p, q := opts[h[len(h)-2]], opts[h[len(h)-1]]
			if (q.err-p.err)*float64(o.cost-p.cost) >= (o.err-p.err)*float64(q.cost-p.cost) {
				h = h[:len(h)-1]
				continue
			}
			break
		}
		h = append(h, i)
	}
	return h
}
