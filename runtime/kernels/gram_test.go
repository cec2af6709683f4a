package kernels

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"testing"
)

// gramActs returns n × c activations shaped like a transformer's linear inputs: Gaussian
// values with a log-normal scale per column, a small mean per column, and a few outlier
// columns 100× larger.
func gramActs(rng *rand.Rand, n, c int) []float32 {
	scale := make([]float64, c)
	mean := make([]float64, c)
	for j := range scale {
		scale[j] = math.Exp(0.5 * rng.NormFloat64())
		mean[j] = 0.2 * rng.NormFloat64()
	}
	for k := 0; k < max(1, c/256); k++ {
		scale[rng.IntN(c)] *= 100
	}
	x := make([]float32, n*c)
	for t := 0; t < n; t++ {
		for j := 0; j < c; j++ {
			x[t*c+j] = float32(scale[j] * (mean[j] + rng.NormFloat64()))
		}
	}
	return x
}

// bf16Ref is gramBF16 computed another way: x's two bf16 neighbours (towards and away from
// zero, the one past the largest finite bf16 counting as 2¹²⁸) compared in float64, the nearer
// one, on a tie the one with an even significand; 0 below 2⁻⁵⁰; a NaN quieted and truncated.
func bf16Ref(x float32) float32 {
	switch v := float64(x); {
	case math.IsNaN(v):
		return math.Float32frombits((math.Float32bits(x) | 1<<22) &^ 0xffff)
	case math.IsInf(v, 0):
		return x
	case math.Abs(v) < 0x1p-50:
		return 0
	}
	lo := math.Float32frombits(math.Float32bits(x) &^ 0xffff)
	hi := math.Float32frombits(math.Float32bits(lo) + 0x10000)
	hv := float64(hi)
	if math.IsInf(hv, 0) {
		hv = math.Copysign(0x1p128, hv)
	}
	dl, dh := math.Abs(float64(x)-float64(lo)), math.Abs(hv-float64(x))
	if dl < dh || dl == dh && math.Float32bits(lo)&0x10000 == 0 {
		return lo
	}
	return hi
}

// TestGramBF16 checks gramBF16 against bf16Ref: every float32 whose low 16 bits are near a
// rounding boundary, across the exponents, and random ones.
func TestGramBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	check := func(u uint32) {
		x := math.Float32frombits(u)
		got, want := gramBF16(x), bf16Ref(x)
		if math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("gramBF16(%g = %#x) = %#x, want %#x", x, u, math.Float32bits(got), math.Float32bits(want))
		}
	}
	for e := uint32(0); e < 256; e++ {
		for _, low := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff} {
			for _, sig := range []uint32{0, 1 << 16, 0x7f << 16, 0x7e << 16} {
				check(e<<23 | sig | low)
				check(1<<31 | e<<23 | sig | low)
			}
		}
	}
	for i := 0; i < 1<<20; i++ {
		check(rng.Uint32())
	}
}

// roundRef returns x rounded by bf16Ref.
func roundRef(x []float32) []float32 {
	r := make([]float32, len(x))
	for i, v := range x {
		r[i] = bf16Ref(v)
	}
	return r
}

// pairsRef packs rows 0..k−1 of bf16 values r (row stride ld) as the pair kernel reads them:
// (k+1)/2 rows of ldd dwords, in the first cols columns, dword (p, j) the bf16 of row 2p in
// its high half and of row 2p+1 (0 past k) in its low half.
func pairsRef(r []float32, ld, k, cols, ldd int) []float32 {
	out := make([]float32, (k+1)/2*ldd)
	for p := 0; p < (k+1)/2; p++ {
		for j := 0; j < cols; j++ {
			u := math.Float32bits(r[2*p*ld+j]) >> 16 << 16
			if 2*p+1 < k {
				u |= math.Float32bits(r[(2*p+1)*ld+j]) >> 16
			}
			out[p*ldd+j] = math.Float32frombits(u)
		}
	}
	return out
}

// gramRef returns Σ_t r_ti·r_tj (float64 products and sums, full matrix) and Σ_t |r_ti·r_tj|,
// with r = bf16Ref(x): what AddGram computes, exactly.
func gramRef(x []float32, n, c int) (ref, abs []float64) {
	return gramRefOf(roundRef(x[:n*c]), n, c)
}

// gramRefOf is gramRef of the values r as they are (no rounding).
func gramRefOf(x []float32, n, c int) (ref, abs []float64) {
	ref, abs = make([]float64, c*c), make([]float64, c*c)
	r := make([]float64, c)
	for t := 0; t < n; t++ {
		for j, v := range x[t*c : (t+1)*c] {
			r[j] = float64(v)
		}
		for i, ai := range r {
			ri, bi := ref[i*c:(i+1)*c], abs[i*c:(i+1)*c]
			for j, b := range r {
				p := ai * b
				ri[j] += p
				bi[j] += math.Abs(p)
			}
		}
	}
	return ref, abs
}

// gramRun runs AddGram under implementation impl with a pool of workers (0: nil pool) on a
// copy of h0.
func gramRun(t testing.TB, impl string, workers int, h0 []float64, x []float32, n, c int) []float64 {
	t.Helper()
	restore, err := SetImpl(impl)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	var pool *Pool
	if workers > 0 {
		pool = NewPool(workers)
		defer pool.Close()
	}
	h := slices.Clone(h0)
	var s GramScratch
	AddGram(h, x, n, c, pool, &s)
	return h
}

// gramRunWith runs the driver with Gram implementation g (instead of gramFor's choice) with a
// pool of workers (0: nil pool) on a copy of h0.
func gramRunWith(t testing.TB, g gramImpl, workers int, h0 []float64, x []float32, n, c int) []float64 {
	t.Helper()
	var pool *Pool
	if workers > 0 {
		pool = NewPool(workers)
		defer pool.Close()
	}
	h := slices.Clone(h0)
	var s GramScratch
	addGram(h, x, n, c, pool, &s, g)
	return h
}

// TestGramFor checks the choice of Gram implementation per kernel implementation: AVX-512 for
// the assembly ones, AVX2 + FMA3 for the generic one where the CPU has them (GQUANT_NOASM=1
// aside), the generic Go code otherwise; and that every implementation of this CPU is listed.
func TestGramFor(t *testing.T) {
	var names []string
	for _, g := range gramImpls() {
		names = append(names, g.name)
	}
	t.Logf("Gram implementations: %v; %s uses %s", names, Impl(), gramFor(current).name)
	if names[len(names)-1] != "go" {
		t.Errorf("gramImpls() = %v: the generic one is not last", names)
	}
	for _, impl := range Impls() {
		got := gramFor(implNamed(impl)).name
		want := names[0] // the best one, for the assembly implementations (AVX-512)
		if impl == "generic" {
			want = "go"
			if gramHasAVX2() && os.Getenv("GQUANT_NOASM") != "1" {
				want = "avx2"
			}
		}
		if got != want {
			t.Errorf("gramFor(%s) = %s, want %s", impl, got, want)
		}
	}
	// GQUANT_NOASM=1 in a fresh process (read at start): the generic Go code.
	if os.Getenv("GQUANT_TEST_GRAM_NOASM") != "" {
		if g := gramFor(current).name; g != "go" {
			t.Fatalf("GQUANT_NOASM=1: %s uses %s, want go", Impl(), g)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGramFor$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GQUANT_NOASM=1", "GQUANT_TEST_GRAM_NOASM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GQUANT_NOASM=1: %v\n%s", err, out)
	}
}

// gramHasAVX2 reports whether gramImpls lists the AVX2 implementation.
func gramHasAVX2() bool {
	return slices.ContainsFunc(gramImpls(), func(g gramImpl) bool { return g.name == "avx2" })
}

// gramInit returns a c × c start for h: random upper triangle, its mirror below.
func gramInit(rng *rand.Rand, c int) []float64 {
	h := make([]float64, c*c)
	for i := 0; i < c; i++ {
		for j := i; j < c; j++ {
			h[i*c+j] = rng.Float64()
			h[j*c+i] = h[i*c+j]
		}
	}
	return h
}

// checkGram checks h (AddGram over h0) against the float64 reference: upper triangle within
// the float32 error bound of a block, elements below the diagonal either untouched or the bits
// of their mirror image, and untouched outside the documented band.
func checkGram(t *testing.T, name string, h, h0 []float64, x []float32, n, c int) {
	t.Helper()
	ref, abs := gramRef(x, n, c)
	// Float32 sums of at most gramBlock products (each FMA one rounding), then one float64
	// addition per block: |error| ≤ (gramBlock+1)·2⁻²⁴·Σ|products| (+ float64 roundings).
	tol := float64(gramBlock+1) * 0x1p-24
	bad := 0
	for i := 0; i < c; i++ {
		band := i / gramGo.rows * gramGo.rows / gramGo.cols * gramGo.cols
		for j := 0; j < c; j++ {
			got := h[i*c+j]
			if j >= i {
				want := h0[i*c+j] + ref[i*c+j]
				if d := math.Abs(got - want); !(d <= tol*abs[i*c+j]+1e-12*math.Abs(want)) {
					if bad++; bad <= 5 {
						t.Errorf("%s: n=%d c=%d: h[%d,%d] = %g, want %g (|error| %g > %g)", name, n, c, i, j, got, want, d, tol*abs[i*c+j])
					}
				}
				continue
			}
			untouched := math.Float64bits(got) == math.Float64bits(h0[i*c+j])
			mirror := math.Float64bits(got) == math.Float64bits(h[j*c+i])
			if !untouched && (!mirror || j < band) {
				if bad++; bad <= 5 {
					t.Errorf("%s: n=%d c=%d: h[%d,%d] = %g below the diagonal: neither %g (untouched) nor %g (mirror, band from %d)", name, n, c, i, j, got, h0[i*c+j], h[j*c+i], band)
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: n=%d c=%d: %d bad elements", name, n, c, bad)
	}
}

// gramShapes covers c below, at and across the tile sizes and the panel, and n around the
// token block.
var gramShapes = []struct{ n, c int }{
	{1, 1}, {1, 2}, {3, 3}, {2, 5}, {7, 12}, {5, 13}, {1, 16}, {9, 17}, {4, 31}, {6, 32},
	{3, 33}, {17, 47}, {2, 64}, {255, 24}, {256, 37}, {257, 70}, {600, 45}, {40, 100},
	{513, 129}, {30, 515}, {300, 530},
}

func TestGramReference(t *testing.T) {
	defer func(v int) { parallelGramWork = v }(parallelGramWork)
	parallelGramWork = 0
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range gramShapes {
		x := gramActs(rng, sh.n, sh.c)
		h0 := gramInit(rng, sh.c)
		want := gramRunWith(t, gramGo, 0, h0, x, sh.n, sh.c)
		checkGram(t, "go", want, h0, x, sh.n, sh.c)
		for _, g := range gramImpls() {
			for _, workers := range []int{0, 1, 2, 3} {
				if g.name == "go" && workers == 0 {
					continue
				}
				got := gramRunWith(t, g, workers, h0, x, sh.n, sh.c)
				if i := firstDiff(got, want); i >= 0 {
					t.Errorf("%s, %d workers: n=%d c=%d: h[%d,%d] = %g (%#x), go 1 worker %g (%#x)", g.name, workers, sh.n, sh.c,
						i/sh.c, i%sh.c, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
				}
			}
		}
		for _, impl := range Impls() { // AddGram itself, through gramFor
			if got := gramRun(t, impl, 2, h0, x, sh.n, sh.c); firstDiff(got, want) >= 0 {
				t.Errorf("%s: n=%d c=%d: AddGram differs from go", impl, sh.n, sh.c)
			}
		}
	}
}

// TestGramExactData runs data whose float32 sums are mostly exact (small integers, zeros,
// bf16-rounded values: the sums the generic kernel rounds by its slow path) and non-finite
// values: every Gram implementation gives the generic bits (NaN payloads aside), and integer
// data the exact sums.
func TestGramExactData(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	n, c := 300, 77
	ints, bf, inf := make([]float32, n*c), gramActs(rng, n, c), make([]float32, n*c)
	for i := range ints {
		ints[i] = float32(rng.IntN(9) - 4)
		bf[i] = math.Float32frombits(math.Float32bits(bf[i]) &^ 0xffff)
		inf[i] = float32(rng.NormFloat64())
	}
	inf[5*c+3], inf[7*c+10], inf[9*c+3] = float32(math.Inf(1)), float32(math.NaN()), float32(math.Inf(-1))
	h0 := make([]float64, c*c)
	for _, d := range []struct {
		name string
		x    []float32
	}{{"integers", ints}, {"bf16", bf}, {"inf/nan", inf}} {
		want := gramRunWith(t, gramGo, 2, h0, d.x, n, c)
		if d.name == "integers" {
			ref, _ := gramRef(d.x, n, c)
			for i := 0; i < c; i++ {
				for j := i; j < c; j++ {
					if want[i*c+j] != ref[i*c+j] {
						t.Fatalf("integers: h[%d,%d] = %g, want %g", i, j, want[i*c+j], ref[i*c+j])
					}
				}
			}
		}
		for _, g := range gramImpls() {
			got := gramRunWith(t, g, 2, h0, d.x, n, c)
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
					t.Errorf("%s, %s: h[%d,%d] = %g, go %g", d.name, g.name, i/c, i%c, got[i], want[i])
					break
				}
			}
		}
	}
}

// TestGramLarge runs the assembly (where there is some) on a shape with several panels and
// token blocks, against the reference and across pool sizes, every assembly implementation
// against the first; the generic code on one column panel's worth of it.
func TestGramLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n, c := 700, 1100
	if testing.Short() {
		n, c = 300, 600
	}
	x := gramActs(rng, n, c)
	h0 := make([]float64, c*c)
	gs := gramImpls()
	g0 := gs[0]
	want := gramRunWith(t, g0, 1, h0, x, n, c)
	checkGram(t, g0.name, want, h0, x, n, c)
	for _, g := range gs[:len(gs)-1] {
		for _, workers := range []int{1, 2, 3} {
			if g.name == g0.name && workers == 1 {
				continue
			}
			if got := gramRunWith(t, g, workers, h0, x, n, c); firstDiff(got, want) >= 0 {
				t.Errorf("%s, %d workers: differs from %s, 1 worker", g.name, workers, g0.name)
			}
		}
	}
	if g0.name != "go" {
		// The generic kernel over the first rows of tiles and 2 token blocks.
		c2 := 140
		x2 := make([]float32, 300*c2)
		for t := 0; t < 300; t++ {
			copy(x2[t*c2:(t+1)*c2], x[t*c:])
		}
		h2 := make([]float64, c2*c2)
		want := gramRunWith(t, gramGo, 2, h2, x2, 300, c2)
		for _, g := range gs[:len(gs)-1] {
			if got := gramRunWith(t, g, 2, h2, x2, 300, c2); firstDiff(got, want) >= 0 {
				t.Errorf("go and %s differ", g.name)
			}
		}
	}
}

func firstDiff(a, b []float64) int {
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestGramAccumulates checks that calls add up: two halves give the float64 sum of the two
// block sums, the same bits as one call when the split is at a token block boundary.
func TestGramAccumulates(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n, c := 2*gramBlock+10, 40
	x := gramActs(rng, n, c)
	for _, g := range gramImpls() {
		one := make([]float64, c*c)
		addGram(one, x, n, c, nil, nil, g)
		two := make([]float64, c*c)
		addGram(two, x, gramBlock, c, nil, nil, g)
		addGram(two, x[gramBlock*c:], n-gramBlock, c, nil, nil, g)
		if i := firstDiff(one, two); i >= 0 {
			t.Errorf("%s: h[%d] = %g in one call, %g in two", g.name, i, one[i], two[i])
		}
	}
}

// TestGramAllocs checks that AddGram allocates nothing once its scratch has grown, with every
// Gram implementation.
func TestGramAllocs(t *testing.T) {
	defer func(v int) { parallelGramWork = v }(parallelGramWork)
	parallelGramWork = 0
	rng := rand.New(rand.NewPCG(7, 8))
	n, c := 40, 90
	x := gramActs(rng, n, c)
	h := make([]float64, c*c)
	pool := NewPool(3)
	defer pool.Close()
	var s GramScratch
	AddGram(h, x, n, c, pool, &s)
	if a := testing.AllocsPerRun(20, func() { AddGram(h, x, n, c, pool, &s) }); a != 0 {
		t.Errorf("AddGram: %v allocations per call", a)
	}
	for _, g := range gramImpls() {
		if a := testing.AllocsPerRun(20, func() { addGram(h, x, n, c, pool, &s, g) }); a != 0 {
			t.Errorf("%s: %v allocations per call", g.name, a)
		}
	}
}

func TestGramBadArgs(t *testing.T) {
	for _, c := range []struct {
		h, x, n, c int
	}{{15, 16, 4, 4}, {16, 15, 4, 4}, {16, 16, -1, 4}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%+v: no panic", c)
				}
			}()
			AddGram(make([]float64, c.h), make([]float32, c.x), c.n, c.c, nil, nil)
		}()
	}
	AddGram(nil, nil, 0, 0, nil, nil) // nothing to do
}

// TestGramSplit checks that the parts cover the rows in order, on tile boundaries, with about
// the same area.
func TestGramSplit(t *testing.T) {
	for _, c := range []int{1, 12, 13, 100, 1024, 3072, 14336} {
		for _, parts := range []int{1, 2, 3, 7, 16} {
			parts := min(parts, (c+gramGo.rows-1)/gramGo.rows)
			prev := 0
			area := make([]float64, parts)
			for p := 0; p < parts; p++ {
				lo, hi := gramSplit(c, gramGo.rows, gramGo.cols, p, parts), gramSplit(c, gramGo.rows, gramGo.cols, p+1, parts)
				if lo != prev || hi < lo || (hi%gramGo.rows != 0 && hi < c) {
					t.Fatalf("c=%d parts=%d: part %d is [%d,%d)", c, parts, p, lo, hi)
				}
				prev = hi
				for i := lo; i < min(hi, c); i += gramGo.rows {
					area[p] += float64(c - i/gramGo.cols*gramGo.cols)
				}
			}
			if prev < c {
				t.Fatalf("c=%d parts=%d: parts end at %d", c, parts, prev)
			}
			// Each boundary is within one row of tiles (area ≤ c) of its goal.
			if lo, hi := slices.Min(area), slices.Max(area); parts > 1 && hi-lo > 2*float64(c) {
				t.Errorf("c=%d parts=%d: areas %v", c, parts, area)
			}
		}
	}
}

// fmaRef is the correctly rounded float32 a·b + c, by exact arithmetic.
func fmaRef(a, b, c float32) float32 {
	p := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	p.Mul(p, new(big.Float).SetFloat64(float64(b)))
	s := new(big.Float).SetPrec(1000).Add(p, new(big.Float).SetFloat64(float64(c)))
	f, _ := s.Float32()
	if f == 0 { // exact zeros: the sign IEEE gives (+0 unless both terms are −0)
		return float32(float64(a)*float64(b) + float64(c))
	}
	return f
}

// gramHard returns cases (a, b, c) of one float32 step of the Gram kernels, fma(a, b, acc)
// with acc = c: a and b bf16 values (what AddGram multiplies), c any float32 (an accumulator),
// split into three bf16 parts (c1, c2, c3 with c1 + c2 + c3 = c exactly, in that order
// without rounding). The products lie at, just below and just above half an ulp of c (ties to
// even, and sums a hair off a midpoint), far below it, and cancel c; and random ones.
func gramHard(rng *rand.Rand) [][6]float32 {
	split := func(c float32) (float32, float32, float32) {
		if math.IsInf(float64(c), 0) {
			return c, 0, 0
		}
		c1 := math.Float32frombits(math.Float32bits(c) &^ 0xffff)
		r := c - c1
		c2 := math.Float32frombits(math.Float32bits(r) &^ 0xffff)
		return c1, c2, r - c2
	}
	var cases [][6]float32
	add := func(a, b, c float32) {
		c1, c2, c3 := split(c)
		cases = append(cases, [6]float32{a, b, c, c1, c2, c3})
	}
	for i := 0; i < 2000; i++ {
		e := rng.IntN(120) - 40
		c := float32(math.Ldexp(1+float64(rng.IntN(1<<23))*0x1p-23, e))
		if rng.IntN(2) == 0 {
			c = -c
		}
		u := float64(1 + rng.IntN(127))
		half := float32(math.Ldexp(1, e-24))
		near := float32(math.Ldexp(1+u*0x1p-7, e-24))
		add(half, 1, c)                                                           // a tie
		add(near, float32(1-u*0x1p-7), c)                                         // a hair below the midpoint
		add(near, float32(1+0x1p-7), -c)                                          // above it
		add(float32(math.Ldexp(1+u*0x1p-7, e-40)), float32(math.Ldexp(1, -3)), c) // far below
		add(-math.Float32frombits(math.Float32bits(c)&^0xffff), 1, c)             // cancels c's first part
		add(float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64()))
	}
	add(1, 1, 0)
	add(1e20, 1e20, 1)
	add(3e38, 2, -1)
	add(3e38, 2, float32(math.Inf(-1)))
	for i := range cases { // a and b to bf16 values
		cases[i][0], cases[i][1] = bf16Ref(cases[i][0]), bf16Ref(cases[i][1])
	}
	return cases
}

// TestGramTileHard runs every Gram implementation's tile kernel on the hard cases of one
// step, as sums of four tokens: element (r, j) gets fma(a, b, c1 + c2 + c3) (the parts added
// first, exactly), in a 1 × 1 tile (r = j = 0) and in a full one (every (r, j) in turn, its
// other elements from zeros: 0, or NaN in the column of an infinite b), against the correctly
// rounded sum (fmaRef).
func TestGramTileHard(t *testing.T) {
	const R, C, k = 12, 32, 4
	for _, g := range gramImpls() {
		bad := 0
		for i, cs := range gramHard(rand.New(rand.NewPCG(11, 12))) {
			for _, full := range []bool{false, true} {
				rows, cols, r, j := 1, 1, 0, 0
				if full {
					rows, cols, r, j = R, C, i%R, i/R%C
				}
				a := make([]float32, k*R)
				b := make([]float32, k*C)
				h := make([]float64, R*C)
				a[r], a[R+r], a[2*R+r], a[3*R+r] = 1, 1, 1, cs[1]
				b[j], b[C+j], b[2*C+j], b[3*C+j] = cs[3], cs[4], cs[5], cs[0]
				if g.pairs {
					g.tile(h, C, pairsRef(a, R, k, R, R), pairsRef(b, C, k, C, C), C, k/2, rows, cols)
				} else {
					g.tile(h, C, a, b, C, k, rows, cols)
				}
				want := float64(fmaRef(cs[0], cs[1], cs[2]))
				for e, v := range h {
					// The other elements: products with zeros (NaN where b holds an infinity).
					var w float64
					for tk := range k {
						w = float64(float32(float64(a[tk*R+e/C])*float64(b[tk*C+e%C]) + w))
					}
					if e/C >= rows || e%C >= cols {
						w = 0
					} else if e == r*C+j {
						w = want
					}
					if math.Float64bits(v) != math.Float64bits(w) && !(math.IsNaN(v) && math.IsNaN(w)) {
						if bad++; bad <= 10 {
							t.Errorf("%s (%d × %d tile): fma(%g, %g, %g) at (%d, %d): h[%d, %d] = %g, want %g", g.name, rows, cols,
								cs[0], cs[1], cs[2], r, j, e/C, e%C, v, w)
						}
					}
				}
			}
		}
	}
}

// TestGramTile runs every Gram implementation's tile kernel against the generic one on tiles of
// every shape (rows ≤ 12, cols ≤ 32) over unpacked columns of x (b read only in its cols) and
// a few token counts, in an h larger than the tile: the same bits in the tile, nothing
// written outside it.
func TestGramTile(t *testing.T) {
	const R, C = 12, 32
	rng := rand.New(rand.NewPCG(15, 16))
	for _, k := range []int{1, 2, 7, 33} {
		for rows := 1; rows <= R; rows++ {
			for cols := 1; cols <= C; cols++ {
				ldb, ldh := cols+rng.IntN(3), cols+1+rng.IntN(3)
				a := make([]float32, k*R)
				for t := 0; t < k; t++ {
					for r := 0; r < rows; r++ {
						a[t*R+r] = float32(rng.NormFloat64())
					}
				}
				b := make([]float32, (k-1)*ldb+cols) // exactly what the kernel may read
				for i := range b {
					b[i] = float32(rng.NormFloat64())
				}
				h0 := make([]float64, rows*ldh+1)
				for i := range h0 {
					h0[i] = rng.NormFloat64()
				}
				// The pair kernel's operands: the values rounded, packed in pairs.
				ra, rb := roundRef(a), roundRef(b)
				pa, pb := pairsRef(ra, R, k, R, R), pairsRef(rb, ldb, k, cols, ldb)
				pb = pb[:((k+1)/2-1)*ldb+cols]
				want, wantR := slices.Clone(h0), slices.Clone(h0)
				gramTileGo(want, ldh, a, b, ldb, k, rows, cols)
				gramTileGo(wantR, ldh, ra, rb, ldb, k, rows, cols)
				for _, g := range gramImpls() {
					got := slices.Clone(h0)
					if g.pairs {
						g.tile(got[:(rows-1)*ldh+cols], ldh, pa, pb, ldb, (k+1)/2, rows, cols)
						if i := firstDiff(got, wantR); i >= 0 {
							t.Fatalf("%s: k=%d rows=%d cols=%d: h[%d, %d] = %g, go %g", g.name, k, rows, cols, i/ldh, i%ldh, got[i], wantR[i])
						}
						continue
					}
					g.tile(got[:(rows-1)*ldh+cols], ldh, a, b, ldb, k, rows, cols)
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s: k=%d rows=%d cols=%d: h[%d, %d] = %g, go %g", g.name, k, rows, cols, i/ldh, i%ldh, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestGramPack runs every Gram implementation's packing against the generic one, for load
// and store masks of every width and a few scattered ones: the same floats written, nothing
// outside the store mask.
func TestGramPack(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	type masks struct{ l, s int }
	var ms []masks
	for w := 1; w <= 32; w++ {
		for _, v := range []int{1, w / 2, w - 1, w} {
			if v >= 1 {
				ms = append(ms, masks{1<<v - 1, 1<<w - 1})
			}
		}
	}
	for i := 0; i < 50; i++ {
		s := int(rng.Uint32()) | 1
		ms = append(ms, masks{s & int(rng.Uint32()), s})
	}
	for _, m := range ms {
		for _, k := range []int{1, 3, 16} {
			lds, ldd := 32+rng.IntN(40), 32+rng.IntN(3)
			src := make([]float32, (k-1)*lds+32)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			dst0 := make([]float32, k*ldd)
			for i := range dst0 {
				dst0[i] = float32(i + 1)
			}
			want := slices.Clone(dst0)
			gramPackGo(want, ldd, src, lds, k, m.l, m.s)
			// Pairs: rows of the rounded values' pairs, in the store mask's columns.
			wantP, all := slices.Clone(dst0), pairsRef(roundRef(src), lds, k, 32, ldd)
			for p := 0; p < (k+1)/2; p++ {
				for j := 0; j < 32; j++ {
					switch {
					case m.l>>j&1 != 0:
						wantP[p*ldd+j] = all[p*ldd+j]
					case m.s>>j&1 != 0:
						wantP[p*ldd+j] = 0
					}
				}
			}
			for _, g := range gramImpls() {
				got, want := slices.Clone(dst0), want
				if g.pairs {
					want = wantP
				}
				g.pack(got, ldd, src, lds, k, m.l, m.s)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: k=%d lmask=%#x smask=%#x: %v, go %v", g.name, k, m.l, m.s, got, want)
				}
			}
		}
	}
}

// TestGramPrecision measures AddGram's error against float64 sums (of the same bf16 values:
// the error of the summation) on activations with outliers, beside float32 sums over all the
// tokens (no blocks) and blocks of 512: relative error of the diagonal, and of the other
// elements relative to √(H_ii·H_jj). It logs beside them the difference the rounding to bf16
// makes (against float64 sums of x itself), which the summation's error must stay well below.
func TestGramPrecision(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	c := 512
	for _, n := range []int{512, 2048} {
		rng := rand.New(rand.NewPCG(uint64(n), 13))
		x := gramActs(rng, n, c)
		ref, _ := gramRef(x, n, c)
		raw, _ := gramRefOf(x, n, c)
		rd, ro := gramErrors(ref, raw, c) // the rounding's difference
		t.Logf("n=%d x rounded to bf16        diagonal: median %.2g, max %.2g; off-diagonal (/√(HiiHjj)): median %.2g, max %.2g",
			n, rd[len(rd)/2], rd[len(rd)-1], ro[len(ro)/2], ro[len(ro)-1])
		for _, block := range []int{gramBlock, 512, n} {
			if block > n || block == 512 && n == 512 {
				continue
			}
			diag, off := gramErrors(gramBlocked(x, n, c, block), ref, c)
			name := fmt.Sprintf("n=%d block %d", n, block)
			if block == n {
				name = fmt.Sprintf("n=%d float32 throughout", n)
			}
			t.Logf("%-26s diagonal: median %.2g, max %.2g; off-diagonal (/√(HiiHjj)): median %.2g, max %.2g",
				name, diag[len(diag)/2], diag[len(diag)-1], off[len(off)/2], off[len(off)-1])
			if block == gramBlock && (diag[len(diag)-1] > 1e-5 || off[len(off)-1] > 1e-5) {
				t.Errorf("%s: error above 1e-5", name)
			}
		}
	}
}

// gramErrors returns, sorted, the relative errors of h's diagonal against ref's and of its
// other upper elements relative to √(ref_ii·ref_jj).
func gramErrors(h, ref []float64, c int) (diag, off []float64) {
	for i := 0; i < c; i++ {
		diag = append(diag, math.Abs(h[i*c+i]-ref[i*c+i])/ref[i*c+i])
		for j := i + 1; j < c; j++ {
			off = append(off, math.Abs(h[i*c+j]-ref[i*c+j])/math.Sqrt(ref[i*c+i]*ref[j*c+j]))
		}
	}
	sort.Float64s(diag)
	sort.Float64s(off)
	return diag, off
}

// gramBlocked is AddGram's scheme with token blocks of block (the first float32 kernel of
// this CPU, over x rounded: the bits of every kernel), for TestGramPrecision.
func gramBlocked(x []float32, n, c, block int) []float64 {
	h := make([]float64, c*c)
	x = roundRef(x[:n*c])
	i := slices.IndexFunc(gramImpls(), func(g gramImpl) bool { return !g.pairs })
	tile := gramImpls()[i].tile
	a := make([]float32, block*gramGo.rows)
	for t0 := 0; t0 < n; t0 += block {
		k := min(block, n-t0)
		xb := x[t0*c:]
		for i := 0; i < c; i += gramGo.rows {
			rows := min(gramGo.rows, c-i)
			for t := 0; t < k; t++ {
				dst := a[t*gramGo.rows : (t+1)*gramGo.rows]
				copy(dst, xb[t*c+i:t*c+i+rows])
				clear(dst[rows:])
			}
			for j := i / gramGo.cols * gramGo.cols; j < c; j += gramGo.cols {
				tile(h[i*c+j:], c, a, xb[j:], c, k, rows, min(gramGo.cols, c-j))
			}
		}
	}
	return h
}

// BenchmarkAddGram measures AddGram per Gram implementation (avx512, avx2, go: those this CPU
// runs) on Qwen3-0.6B's widths for 512 tokens, on 1 and 2 workers (GFLOP/s: 2 flops per
// multiply-add of the upper triangle; the generic code at c = 3072 on 2 workers only).
// calibrate's BenchmarkGram compares AddGram with the scalar float64 loop it replaces.
func BenchmarkAddGram(b *testing.B) {
	const n = 512
	for _, g := range gramImpls() {
		for _, c := range []int{1024, 3072} {
			for _, workers := range []int{1, 2} {
				if g.name == "go" && c > 1024 && workers < 2 {
					continue
				}
				b.Run(fmt.Sprintf("%s/c=%d/workers=%d", g.name, c, workers), func(b *testing.B) {
					x := gramActs(rand.New(rand.NewPCG(1, 2)), n, c)
					h := make([]float64, c*c)
					pool := NewPool(workers)
					defer pool.Close()
					var s GramScratch
					addGram(h, x, n, c, pool, &s, g)
					for b.Loop() {
						addGram(h, x, n, c, pool, &s, g)
					}
					b.ReportMetric(float64(n)*float64(c)*float64(c+1)/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// TestNewGramCoversTheTiles checks NewGram's premise: every element AddGram adds to lies in
// the part of its row that NewGram writes first (from column i0 − 32, i0 the row's tile row),
// for every implementation, on sizes around the tiles.
func TestNewGramCoversTheTiles(t *testing.T) {
	for _, g := range gramImpls() {
		for _, c := range []int{1, 13, 100, 300} {
			h := NewGram(c, nil)
			if len(h) != c*c {
				t.Fatalf("NewGram(%d): %d values", c, len(h))
			}
			x := make([]float32, 3*c)
			for i := range x {
				x[i] = 1
			}
			var s GramScratch
			addGram(h, x, 3, c, nil, &s, g)
			for i := 0; i < c; i++ {
				for j := 0; j < c; j++ {
					if h[i*c+j] != 0 && j < max(0, i-i%12-32) {
						t.Fatalf("%s, c=%d: AddGram added to [%d,%d], left of what NewGram writes first", g.name, c, i, j)
					}
					if j >= i && h[i*c+j] != 3 {
						t.Fatalf("%s, c=%d: [%d,%d] = %v, want 3", g.name, c, i, j, h[i*c+j])
					}
				}
			}
		}
	}
}
