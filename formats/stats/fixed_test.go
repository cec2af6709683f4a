package stats

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// bigOf is f as an exact rational number of units of 2⁻⁶⁴.
func bigOf(f Fixed) *big.Int {
	v := new(big.Int).SetUint64(f.Hi)
	v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(f.Lo))
	if f.Neg() {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	return v
}

// roundToGrid is x rounded to the grid half to even, computed with math/big.
func roundToGrid(x float64) *big.Int {
	r := new(big.Float).SetPrec(2000).SetFloat64(x)
	r.SetMantExp(r, fixedUnit) // x·2^64, exact
	i, acc := r.Int(nil)       // truncated toward zero
	if acc == big.Exact {
		return i
	}
	frac := new(big.Float).SetPrec(2000).Sub(r, new(big.Float).SetInt(i))
	frac.Abs(frac)
	half := big.NewFloat(0.5)
	step := big.NewInt(1)
	if x < 0 {
		step.Neg(step)
	}
	switch frac.Cmp(half) {
	case 1:
		i.Add(i, step)
	case 0:
		if i.Bit(0) == 1 {
			i.Add(i, step)
		}
	}
	return i
}

// testValues are values across the range: tiny, halves of a unit, huge, random.
func testValues() []float64 {
	vs := []float64{0, 1, -1, 0.5, -0.5, 3, math.Ldexp(1, -64), math.Ldexp(1, -65), math.Ldexp(3, -65), math.Ldexp(5, -66),
		math.Ldexp(1, -66), -math.Ldexp(3, -65), math.Ldexp(1, -1074), math.Ldexp(1, 62), math.Nextafter(math.Ldexp(1, 63), 0),
		-math.Nextafter(math.Ldexp(1, 63), 0), 1e-300, 123456.789, math.Ldexp(1<<53-1, -117), math.Ldexp(1<<53-1, -118)}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 2000; i++ {
		v := math.Ldexp(r.Float64()+0.5, r.IntN(139)-76)
		if r.IntN(2) == 0 {
			v = -v
		}
		vs = append(vs, v)
	}
	return vs
}

// FixedOf rounds to the grid half to even (checked with math/big), refuses what does not fit,
// and Float64 is the correctly rounded value of the integer (exact when x is on the grid).
func TestFixedOf(t *testing.T) {
	for _, x := range testValues() {
		f, ok := FixedOf(x)
		if !ok {
			t.Fatalf("FixedOf(%g) refused", x)
		}
		if got, want := bigOf(f), roundToGrid(x); got.Cmp(want) != 0 {
			t.Fatalf("FixedOf(%g) = %v units, want %v", x, got, want)
		}
		back := f.Float64()
		want, _ := new(big.Float).SetMantExp(new(big.Float).SetInt(bigOf(f)), -fixedUnit).Float64()
		if back != want {
			t.Fatalf("Float64(FixedOf(%g)) = %g, want %g", x, back, want)
		}
		if math.Abs(x) >= math.Ldexp(1, -11) && back != x { // 53 bits above 2^-64
			t.Fatalf("%g does not come back exactly: %g", x, back)
		}
	}
	// FoldFloats's inline conversion is FixedOf's.
	vs := testValues()
	for _, x := range []float64{math.Ldexp(1, -11), math.Nextafter(math.Ldexp(1, -11), 0), math.Ldexp(1, 52), math.Nextafter(math.Ldexp(1, 52), 0)} {
		vs = append(vs, x, -x)
	}
	for _, x := range vs {
		acc := []Fixed{{}}
		f, _ := FixedOf(x)
		if _, ok := FoldFloats(acc, []float64{x}); !ok || acc[0] != f {
			t.Fatalf("FoldFloats(%g) = %v, FixedOf %v", x, acc[0], f)
		}
	}
	for _, x := range []float64{math.Ldexp(1, 63), -math.Ldexp(1, 63), 1e300, math.Inf(1), math.NaN()} {
		if _, ok := FixedOf(x); ok {
			t.Errorf("FixedOf(%g) accepted", x)
		}
	}
}

// Float64 rounds integers of more than 53 bits correctly (half to even, ties included), in
// both words.
func TestFixedFloat64Rounding(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	check := func(f Fixed) {
		t.Helper()
		want, _ := new(big.Float).SetMantExp(new(big.Float).SetInt(bigOf(f)), -fixedUnit).Float64()
		if got := f.Float64(); got != want {
			t.Fatalf("Float64(%#x:%#x) = %g, want %g", f.Hi, f.Lo, got, want)
		}
	}
	for i := 0; i < 5000; i++ {
		f := Fixed{r.Uint64(), r.Uint64() >> r.IntN(64)}
		check(f)
		check(f.neg())
		// Ties: 53 significant bits, then a one, then zeros.
		sh := uint(r.IntN(70))
		m := r.Uint64()>>11 | 1<<52
		tie := new(big.Int).Lsh(new(big.Int).SetUint64(m*2+1), sh)
		if tie.BitLen() < 127 {
			lo := new(big.Int).And(tie, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
			hi := new(big.Int).Rsh(tie, 64).Uint64()
			check(Fixed{lo, hi})
			check(Fixed{lo, hi}.neg())
		}
	}
	check(Fixed{0, 1 << 63}) // −2^127
}

// Adding partial sums exactly gives the same bits in any order and grouping, and the range is
// guarded.
func TestFixedAssociative(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	parts := make([][]float64, 40)
	for i := range parts {
		parts[i] = make([]float64, 16)
		for j := range parts[i] {
			parts[i][j] = r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-4))
		}
	}
	sum := func(order []int, groups int) []Fixed {
		total := make([]Fixed, 16)
		for g := 0; g < groups; g++ {
			acc := make([]Fixed, 16)
			for k := g; k < len(order); k += groups {
				if _, ok := FoldFloats(acc, parts[order[k]]); !ok {
					t.Fatal("fold refused")
				}
			}
			if _, ok := AddFixed(total, acc); !ok {
				t.Fatal("add refused")
			}
		}
		return total
	}
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	want := sum(order, 1)
	for trial := 0; trial < 5; trial++ {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		got := sum(order, 1+trial)
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("trial %d: element %d differs", trial, j)
			}
		}
	}
	huge, _ := FixedOf(math.Ldexp(1, 62))
	acc := []Fixed{huge}
	if j, ok := FoldFloats(acc, []float64{math.Ldexp(1, 62)}); ok || j != 0 || acc[0] != huge {
		t.Errorf("2^62 + 2^62 accepted or left the sum changed: %v %v", ok, acc[0])
	}
	if _, ok := FoldFloats([]Fixed{{}}, []float64{math.NaN()}); ok {
		t.Error("NaN accepted")
	}
}

// FoldUpper adds the upper triangle (rows split between goroutines or not: the same),
// FoldUpperZero too, zeroing the matrix, and UpperToFull mirrors it.
func TestFoldUpper(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const c = 301 // TriangleLen above foldMinWork: several goroutines
	h := make([]float64, c*c)
	for i := range h {
		h[i] = r.NormFloat64()
	}
	one, many := make([]Fixed, TriangleLen(c)), make([]Fixed, TriangleLen(c))
	if _, _, ok := FoldUpper(one, h, c, 1); !ok {
		t.Fatal("refused")
	}
	if _, _, ok := FoldUpper(many, h, c, 4); !ok {
		t.Fatal("refused")
	}
	full := make([]float64, c*c)
	UpperToFull(full, many, c)
	for i := 0; i < c; i++ {
		for j := 0; j < c; j++ {
			a, b := min(i, j), max(i, j)
			want, _ := FixedOf(h[a*c+b])
			if full[i*c+j] != want.Float64() {
				t.Fatalf("(%d, %d): %g, want %g", i, j, full[i*c+j], want.Float64())
			}
		}
	}
	for k := range one {
		if one[k] != many[k] {
			t.Fatalf("element %d differs between one goroutine and four", k)
		}
		if i := triRowOf(k, c); k < triRow(i, c) || (i+1 < c && k >= triRow(i+1, c)) {
			t.Fatalf("triRowOf(%d) = %d", k, i)
		}
	}
	// FoldUpperZero adds the same and zeroes the upper triangle, leaving the lower one, on one
	// goroutine or four.
	for _, threads := range []int{1, 4} {
		z, hz := make([]Fixed, TriangleLen(c)), slices.Clone(h)
		if _, _, ok := FoldUpperZero(z, hz, c, threads); !ok || !slices.Equal(z, one) {
			t.Fatalf("FoldUpperZero on %d goroutines: %v, or sums that differ from FoldUpper's", threads, ok)
		}
		checkZeroUpper(t, hz, h, c)
	}
	h[5*c+7] = math.Inf(1)
	if i, j, ok := FoldUpper(one, h, c, 4); ok || i != 5 || j != 7 {
		t.Errorf("an Inf at (5, 7): %d %d %v", i, j, ok)
	}
}

// checkZeroUpper checks that h is zero on and above the diagonal and was (the original) below.
func checkZeroUpper(t *testing.T, h, was []float64, c int) {
	t.Helper()
	for i := 0; i < c; i++ {
		for j := 0; j < c; j++ {
			if want := was[i*c+j]; j >= i && h[i*c+j] != 0 || j < i && h[i*c+j] != want {
				t.Fatalf("(%d, %d) is %g after the fold (was %g)", i, j, h[i*c+j], want)
			}
		}
	}
}
