package convert

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bruteForce returns the least total error of one option per item within budget (every
// combination), or +Inf.
func bruteForce(items [][]option, budget uint64) float64 {
	best := math.Inf(1)
	var rec func(i int, cost uint64, err float64)
	rec = func(i int, cost uint64, err float64) {
		if cost > budget {
			return
		}
		if i == len(items) {
			best = min(best, err)
			return
		}
		for _, o := range items[i] {
			rec(i+1, cost+o.cost, err+o.err)
		}
	}
	rec(0, 0, 0)
	return best
}

// randomItems draws n items of up to k options: costs of a few sizes (as the bytes of ggml
// types over tensors of a few shapes), errors falling with cost but not always convexly, and
// now and then a dominated option or a tie.
func randomItems(rng *rand.Rand, n, k int) [][]option {
	items := make([][]option, n)
	for i := range items {
		size := uint64(1 + rng.IntN(4))
		m := 1 + rng.IntN(k)
		scale := math.Exp(rng.NormFloat64() * 2)
		for j := 0; j < m; j++ {
			bits := uint64(2 + rng.IntN(7))
			e := scale * math.Exp2(-2*float64(bits)) * (0.5 + rng.Float64())
			if rng.IntN(8) == 0 && j > 0 {
				e = items[i][j-1].err // a tie
			}
			items[i] = append(items[i], option{cost: size * bits * 32, err: e})
		}
	}
	return items
}

// TestAllocateAgainstBruteForce: on random small instances the allocation stays within the
// budget, matches the optimum found by trying every combination (never beating it, which
// would mean it miscounts), and its relaxation bound is at most the optimum. With the
// dynamic programme's states capped (costs rounded up to a coarser unit, as for large
// models) it stays within the budget and is at least as good as the optimum for the budget
// less one unit per item.
func TestAllocateAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	defer func(n int) { maxStates = n }(maxStates)
	coarse := 0
	for trial := 0; trial < 3000; trial++ {
		items := randomItems(rng, 2+rng.IntN(5), 5)
		var lo, hi uint64
		for _, opts := range items {
			cmin, cmax := opts[0].cost, opts[0].cost
			for _, o := range opts {
				cmin, cmax = min(cmin, o.cost), max(cmax, o.cost)
			}
			lo, hi = lo+cmin, hi+cmax
		}
		budget := lo + uint64(rng.Int64N(int64(hi-lo+1)))
		maxStates = 1 << 20
		if trial%2 == 1 {
			maxStates = 8
		}
		a, err := allocate(items, budget)
		if err != nil {
			t.Fatal(err)
		}
		opt := bruteForce(items, budget)
		var cost uint64
		var e float64
		for i, o := range a.pick {
			cost += items[i][o].cost
			e += items[i][o].err
		}
		switch {
		case cost > budget || cost != a.cost || e != a.err:
			t.Fatalf("trial %d: cost %d (reported %d), error %g (reported %g), budget %d", trial, cost, a.cost, e, a.err, budget)
		case e < opt*(1-1e-12):
			t.Fatalf("trial %d: error %g below the optimum %g", trial, e, opt)
		case a.bound > opt*(1+1e-12):
			t.Fatalf("trial %d: bound %g above the optimum %g", trial, a.bound, opt)
		case a.exact && e > opt*(1+1e-12):
			t.Fatalf("trial %d: error %g, the optimum is %g", trial, e, opt)
		case !a.exact:
			coarse++
			unit := (budget + uint64(maxStates) - 2) / uint64(maxStates-1)
			slack := uint64(len(items)) * unit
			if budget >= lo+slack {
				if worse := bruteForce(items, budget-slack); e > worse*(1+1e-12) {
					t.Fatalf("trial %d: rounded to units of %d: error %g, above the optimum %g of the budget less %d", trial, unit, e, worse, slack)
				}
			}
		}
	}
	if coarse == 0 {
		t.Error("no instance took the rounded path")
	}
}

// TestAllocateBudget: the allocation refuses a budget below the cheapest choice, takes the
// cheapest at exactly that budget, the best everywhere at a budget that fits it, and spends
// no more as the budget grows past it.
func TestAllocateBudget(t *testing.T) {
	items := [][]option{
		{{100, 1}, {200, 0.25}, {300, 0.05}},
		{{50, 2}, {80, 0.5}, {120, 0.1}},
	}
	if _, err := allocate(items, 149); err == nil {
		t.Error("a budget of 149 bytes accepted; the cheapest choice takes 150")
	}
	a, err := allocate(items, 150)
	if err != nil || a.pick[0] != 0 || a.pick[1] != 0 || !a.exact || a.bound != 3 {
		t.Errorf("budget 150: %+v, %v", a, err)
	}
	for _, b := range []uint64{420, 1000} {
		a, err := allocate(items, b)
		if err != nil || a.pick[0] != 2 || a.pick[1] != 2 || a.cost != 420 {
			t.Errorf("budget %d: %+v, %v", b, a, err)
		}
	}
	// 230 bytes: (100, 120) errs 1.1, (100, 80) 1.5; (200, 50) costs 250, over. The optimum
	// is (0, 2), 1.1.
	if a, err := allocate(items, 230); err != nil || a.pick[0] != 0 || a.pick[1] != 2 {
		t.Errorf("budget 230: %+v, %v", a, err)
	}
}
