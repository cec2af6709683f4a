package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Tests of the gqf group matrices (group.go). The reference here is written from the format
// description, not from the package's code: it decodes the caller's codes, scales and zero
// points as given to NewGroupMatrix, quantizes the activations itself and does the float32
// operations of the documented arithmetic, so that every implementation, batch size and row
// range must reproduce its bits; a float64 product of the decoded weights and the raw
// activations bounds what those bits may be.

// groupCase is one matrix as the caller hands it over.
type groupCase struct {
	f          GroupFormat
	rows, cols int
	codes      []byte
	scales     []float32
	zeros      []uint8
	w          []int32   // decoded weights (decoded), or nil
	s          []float32 // their scales
}

var groupFormats = []GroupFormat{
	{4, 16, false}, {4, 32, false}, {4, 64, false}, {4, 128, false}, {4, 256, false},
	{4, 16, true}, {4, 32, true}, {4, 64, true}, {4, 128, true}, {4, 256, true},
	{8, 0, true},
}

// groupKinds: random codes and scales; extreme codes (largest |w|) with activations that fill
// the int32 bound; mixed (random, with zero and negative scales and a few extreme rows).
const (
	gkRandom = iota
	gkExtreme
	gkMixed
)

func genGroupCase(rng *rand.Rand, f GroupFormat, rows, cols, kind int) groupCase {
	c := groupCase{f: f, rows: rows, cols: cols}
	groups := rows
	if f.Bits == 4 {
		groups = rows * cols / f.Group
		c.codes = make([]byte, rows*cols/2)
	} else {
		c.codes = make([]byte, rows*cols)
	}
	for i := range c.codes {
		c.codes[i] = byte(rng.IntN(256))
	}
	c.scales = make([]float32, groups)
	for i := range c.scales {
		c.scales[i] = float32((rng.Float64()*2 - 1) * 0.01)
	}
	if !f.Signed {
		c.zeros = make([]uint8, groups)
		for i := range c.zeros {
			c.zeros[i] = uint8(rng.IntN(16))
		}
	}
	extremeRow := func(r int) {
		// Largest |w|: int4 asymmetric u = 15, z = 0 (or u = 0, z = 15); symmetric q = −8;
		// int8 q = −128 or 127 (127 makes the unsigned sums of the assembly wrap around).
		n := len(c.codes) / rows
		v := byte(0xff)
		switch {
		case f.Bits == 4 && f.Signed:
			v = 0x88
		case f.Bits == 8:
			v = []byte{0x80, 0x7f}[r%2]
		case r%2 == 1:
			v = 0
		}
		for i := r * n; i < (r+1)*n; i++ {
			c.codes[i] = v
		}
		g := groups / rows
		for i := r * g; i < (r+1)*g; i++ {
			if c.zeros != nil {
				c.zeros[i] = 15 * uint8(r%2)
			}
			c.scales[i] = 1
		}
	}
	switch kind {
	case gkExtreme:
		for r := 0; r < rows; r++ {
			extremeRow(r)
		}
	case gkMixed:
		for i := range c.scales {
			switch rng.IntN(8) {
			case 0:
				c.scales[i] = 0
			case 1:
				c.scales[i] = -c.scales[i] * 1000
			}
		}
		for r := 0; r < rows; r += 7 {
			extremeRow(r)
		}
	}
	return c
}

func (c groupCase) matrix(tb testing.TB) *Matrix {
	tb.Helper()
	m, err := NewGroupMatrix(c.f, c.rows, c.cols, c.codes, c.scales, c.zeros)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// weight returns the integer weight of element k of row r and its scale group's scale.
func (c groupCase) weight(r, k int) (w int32, s float32) {
	if c.w != nil {
		return c.w[r*c.cols+k], c.s[r*c.cols+k]
	}
	return c.decode(r, k)
}

// decoded returns c with every weight decoded once (weight then reads the copies).
func (c groupCase) decoded() groupCase {
	c.w, c.s = make([]int32, c.rows*c.cols), make([]float32, c.rows*c.cols)
	for r := 0; r < c.rows; r++ {
		for k := 0; k < c.cols; k++ {
			c.w[r*c.cols+k], c.s[r*c.cols+k] = c.decode(r, k)
		}
	}
	return c
}

func (c groupCase) decode(r, k int) (w int32, s float32) {
	if c.f.Bits == 8 {
		return int32(int8(c.codes[r*c.cols+k])), c.scales[r]
	}
	i := r*c.cols + k
	nib := int32(c.codes[i/2]>>(4*(i%2))) & 15
	g := i / c.f.Group // groups never cross rows
	if c.f.Signed {
		return nib - 16*(nib>>3), c.scales[g]
	}
	return nib - int32(c.zeros[g]), c.scales[g]
}

// refUnit16 is the a16 activation block: G for int4; for int8 the spec's rule.
func refUnit16(f GroupFormat, cols int) int {
	if f.Bits == 4 {
		return f.Group
	}
	var small, large int
	for u := cols; u >= 4; u-- {
		if cols%u != 0 || u%4 != 0 {
			continue
		}
		if small == 0 && u <= 128 {
			small = u
		}
		if large == 0 && u <= 512 {
			large = u
		}
	}
	if small >= 32 {
		return small
	}
	return large
}

// refQuant quantizes one block of activations to codes of ±qmax: d = float32(amax/qmax),
// a = clamp(round-half-even(float32(x/d))); NaN d for a non-finite amax.
func refQuant(x []float32, qmax float32) ([]int32, float32) {
	var amax float64
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return make([]int32, len(x)), float32(math.NaN())
		}
		amax = math.Max(amax, math.Abs(float64(v)))
	}
	d := float32(amax) / qmax
	q := make([]int32, len(x))
	if d == 0 {
		return q, 0
	}
	for i, v := range x {
		r := math.RoundToEven(float64(v / d))
		q[i] = int32(math.Max(-float64(qmax), math.Min(float64(qmax), r)))
	}
	return q, d
}

// refGroupProduct returns row r of the product with token x, bit for bit as documented; and,
// unless close is false, a float64 value (Σ s·w·x over the decoded weights and the raw
// activations) with the bound that the activation rounding and the float32 operations put on
// |bits − value|. The bound is derived as follows: with d normal, |x/d| ≤ qmax·(1+2^-23), so
// no code is clamped and |x − a·d| ≤ d/2 + |x|·2^-24 ≤ 0.51·d; each float32 operation adds a
// relative error of at most 2^-24 of its result (two per term: the factor, the product; one per
// addition, counted for every term) and, where a result is subnormal, an absolute one of at
// most 2^-150. It is not checked (close false) where a block's d is subnormal (the codes then
// may clamp), where the product may overflow float32, or where the token is not finite.
func refGroupProduct(c groupCase, mode ActMode, r int, x []float32) (got float32, want, tol float64, close bool) {
	cols := c.cols
	eps, tiny := math.Ldexp(1, -24), math.Ldexp(1, -149)
	close = true
	for k := 0; k < cols; k++ {
		w, s := c.weight(r, k)
		want += float64(s) * float64(w) * float64(x[k])
	}
	if mode == ActQuant {
		q, d := refQuant(x, 127)
		unit := cols
		if c.f.Bits == 4 {
			unit = c.f.Group
		}
		var acc float32
		var terms, sw, swx, sumI float64
		n := cols / unit
		for u := 0; u < n; u++ {
			var I int32
			var s float32
			for k := u * unit; k < (u+1)*unit; k++ {
				w, sk := c.weight(r, k)
				I += w * q[k]
				s = sk
				sw += math.Abs(float64(sk) * float64(w))
				swx += math.Abs(float64(sk) * float64(w) * float64(x[k]))
			}
			p := float32(float32(I) * s)
			acc = float32(acc + p)
			terms += math.Abs(float64(p))
			sumI += math.Abs(float64(I))
		}
		got = float32(acc * d)
		dd := float64(d)
		tol = 0.51*dd*sw + float64(2*n+2)*eps*terms*dd + (sumI+float64(2*n+2))*tiny*dd + tiny
		if d == 0 { // every code 0: the error is the whole product
			tol = swx
		}
		close = dd >= math.Ldexp(1, -126) || d == 0
		return got, want, tol, close && math.Abs(want)+tol < math.MaxFloat32
	}
	unit := refUnit16(c.f, cols)
	var y float32
	n := cols / unit
	for b := 0; b < n; b++ {
		q, d := refQuant(x[b*unit:(b+1)*unit], 32767)
		var I int32
		var s float32
		var sw, swx float64
		for k := b * unit; k < (b+1)*unit; k++ {
			w, sk := c.weight(r, k)
			I += w * q[k-b*unit]
			s = sk // one scale per block: int4 blocks are the groups, int8 rows have one
			sw += math.Abs(float64(sk) * float64(w))
			swx += math.Abs(float64(sk) * float64(w) * float64(x[k]))
		}
		p := float32(float32(I) * float32(s*d))
		y = float32(y + p)
		tol += 0.51*float64(d)*sw + float64(n+3)*eps*math.Abs(float64(p)) + (math.Abs(float64(I))+2)*tiny
		if d == 0 { // every code 0: the error is the block's whole product
			tol += swx
		}
		close = close && (float64(d) >= math.Ldexp(1, -126) || d == 0)
	}
	return y, want, tol, close && math.Abs(want)+tol < math.MaxFloat32
}

// groupInputs returns nTok tokens of activations with the quantizers' corner cases: a zero
// token, rounding ties, a token with one huge value, subnormal values, one with a NaN (t = 3)
// and one with an infinity (t = 5).
func groupInputs(rng *rand.Rand, nTok, cols int) []float32 {
	X := make([]float32, nTok*cols)
	for i := range X {
		X[i] = float32(rng.NormFloat64())
	}
	for t := 0; t < nTok; t++ {
		x := X[t*cols : (t+1)*cols]
		switch t % 8 {
		case 1:
			clear(x)
		case 2: // ties: k + 1/2 steps of a block whose amax is 32767 (a16) or 127 (a8) steps
			for k := range x {
				x[k] = float32(k%9) - 4 + 0.5
			}
			x[0] = 127
		case 3:
			x[cols/2] = float32(math.NaN())
		case 4:
			x[cols-1] = 3e38
		case 5:
			x[1] = float32(math.Inf(-1))
		case 6:
			for k := range x {
				x[k] *= 1e-41 // subnormal: d underflows to 0 or is itself subnormal
			}
			if t%16 == 14 {
				// amax/qmax just under 1.5 times the smallest subnormal: d rounds down to it,
				// and ±amax/d ≈ ±1.49·qmax clamps (to −qmax, not −qmax−1).
				qmax := float32(32767)
				if t%32 == 30 {
					qmax = 127
				}
				amax := float32(1.49 * math.Ldexp(1, -149) * float64(qmax))
				for k := range x {
					x[k] = amax * float32(k%3-1)
				}
			}
		case 7:
			for k := range x {
				x[k] = 1 // one value everywhere: every code is ±qmax (int32 bound with extreme weights)
			}
		}
	}
	return X
}

// sameBits reports whether a and b are the same float32, any NaN matching any NaN.
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// groupRef is the reference of one product: per (token, row) the bits, and where checked
// the float64 value and bound.
type groupRef struct {
	bits       []float32
	want, tol  []float64
	near       []bool
	nonFinite  []bool // per token
	rows, nTok int
}

func newGroupRef(c groupCase, mode ActMode, X []float32, nTok int) *groupRef {
	g := &groupRef{rows: c.rows, nTok: nTok, bits: make([]float32, nTok*c.rows), want: make([]float64, nTok*c.rows),
		tol: make([]float64, nTok*c.rows), near: make([]bool, nTok*c.rows), nonFinite: make([]bool, nTok)}
	for tok := 0; tok < nTok; tok++ {
		x := X[tok*c.cols : (tok+1)*c.cols]
		for _, v := range x {
			g.nonFinite[tok] = g.nonFinite[tok] || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)
		}
		for r := 0; r < c.rows; r++ {
			i := tok*c.rows + r
			g.bits[i], g.want[i], g.tol[i], g.near[i] = refGroupProduct(c, mode, r, x)
		}
	}
	return g
}

// checkGroupProduct compares Y (nTok×rows, rows [r0,r1) computed, the others NaN-prefilled) with
// the reference's first nTok tokens.
func checkGroupProduct(t *testing.T, name string, ref *groupRef, nTok int, Y []float32, r0, r1 int) {
	t.Helper()
	bad := 0
	for tok := 0; tok < nTok; tok++ {
		nonFinite := ref.nonFinite[tok]
		for r := 0; r < ref.rows; r++ {
			i := tok*ref.rows + r
			y := Y[i]
			if r < r0 || r >= r1 {
				if y == y {
					t.Fatalf("%s: token %d row %d outside [%d,%d) written: %v", name, tok, r, r0, r1, y)
				}
				continue
			}
			bits, want, tol, near := ref.bits[i], ref.want[i], ref.tol[i], ref.near[i]
			switch {
			case nonFinite && y == y:
				t.Errorf("%s: token %d (non-finite activations) row %d: %v, want NaN", name, tok, r, y)
			case !sameBits(y, bits):
				t.Errorf("%s: token %d row %d: %v (%#x), reference %v (%#x)", name, tok, r, y, math.Float32bits(y), bits, math.Float32bits(bits))
			case near && !(math.Abs(float64(bits)-want) <= tol):
				t.Errorf("%s: token %d row %d: reference bits %v are %g from the float64 product %v (bound %g)", name, tok, r, bits, math.Abs(float64(bits)-want), want, tol)
			default:
				continue
			}
			if bad++; bad > 10 {
				t.Fatalf("%s: too many errors", name)
			}
		}
	}
}

// groupProduct runs the product of m with X over the row ranges split (consecutive bounds),
// into a NaN-prefilled Y.
func groupProduct(m *Matrix, mode ActMode, X []float32, nTok int, split []int) []float32 {
	m.Mode = mode
	Y := make([]float32, nTok*m.Rows)
	for i := range Y {
		Y[i] = float32(math.NaN())
	}
	var a Acts
	m.Prepare(&a, X, nTok)
	for i := 1; i < len(split); i++ {
		m.MulActs(Y, &a, split[i-1], split[i])
	}
	return Y
}

// groupShapes returns (rows, cols) shapes for f: one block of rows and fewer, rows not a
// multiple of 16, the shortest rows and the Qwen3-0.6B row lengths.
func groupShapes(f GroupFormat) [][2]int {
	if f.Bits == 8 {
		// 172: no block of 32 to 128 divides it (a16 unit 172); 508 = 4·127: a16 unit 508,
		// the int32 bound; 12: unit 12; 4: the shortest row.
		return [][2]int{{1, 4}, {5, 12}, {16, 64}, {37, 172}, {19, 508}, {21, 1024}, {3, 3072}}
	}
	g := f.Group
	return [][2]int{{1, g}, {5, 2 * g}, {16, 3 * g}, {37, 1024}, {3, 3072}}
}

// TestGroupProducts checks every implementation, both activation modes and every format on
// all the shapes against the reference bits and the float64 bound, with the rows computed in
// uneven ranges.
func TestGroupProducts(t *testing.T) {
	type item struct {
		name  string
		m     *Matrix
		mode  ActMode
		X     []float32
		ref   *groupRef
		split []int
	}
	var items []item
	rng := rand.New(rand.NewPCG(31, 32))
	for _, f := range groupFormats {
		for _, sh := range groupShapes(f) {
			rows, cols := sh[0], sh[1]
			for kind := gkRandom; kind <= gkMixed; kind++ {
				c := genGroupCase(rng, f, rows, cols, kind).decoded()
				m := c.matrix(t)
				X := groupInputs(rng, 9, cols)
				split := []int{0, rows / 3, rows}
				if rows > 20 {
					split = []int{0, 3, 19, 20, rows}
				}
				for _, mode := range []ActMode{ActDefault, ActFloat, ActQuant} {
					ref := newGroupRef(c, mode, X, 9)
					items = append(items, item{fmt.Sprintf("%v %dx%d kind %d %v", f, rows, cols, kind, mode), m, mode, X, ref, split})
				}
			}
		}
	}
	forEachImpl(t, func(t *testing.T, impl string) {
		for _, it := range items {
			Y := groupProduct(it.m, it.mode, it.X, 9, it.split)
			checkGroupProduct(t, it.name, it.ref, 9, Y, 0, it.m.Rows)
			// Two tokens, a row range that leaves rows out on both sides.
			if rows := it.m.Rows; rows > 4 {
				Y := groupProduct(it.m, it.mode, it.X, 2, []int{2, rows - 1})
				checkGroupProduct(t, it.name+" rows [2,n-1)", it.ref, 2, Y, 2, rows-1)
			}
		}
	})
}

// TestGroupBatchInvariance checks that a token's outputs do not depend on the batch it is in
// nor on the implementation: batch sizes that use every tile of the multi-token kernels (8, 4,
// 1 tokens; AMX tiles of 16 and partial ones) must give each token the bits of a MatVec of it
// alone under the generic implementation.
func TestGroupBatchInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const rows, maxTok = 70, 50
	type item struct {
		f     GroupFormat
		m     *Matrix
		mode  ActMode
		X     []float32
		alone []float32
	}
	var items []item
	add := func(f GroupFormat, cols int) {
		m := genGroupCase(rng, f, rows, cols, gkMixed).matrix(t)
		X := groupInputs(rng, maxTok, cols)
		for _, mode := range []ActMode{ActFloat, ActQuant} {
			// The generic implementation, one token at a time.
			restore, _ := SetImpl("generic")
			alone := make([]float32, maxTok*rows)
			var s Scratch
			m.Mode = mode
			for tok := 0; tok < maxTok; tok++ {
				m.MatVec(alone[tok*rows:(tok+1)*rows], X[tok*cols:(tok+1)*cols], 0, rows, &s)
			}
			restore()
			items = append(items, item{f, m, mode, X, alone})
		}
	}
	for _, f := range []GroupFormat{{4, 128, false}, {4, 32, true}, {4, 16, false}, {4, 64, true}, {4, 256, false}, {8, 0, true}} {
		for _, cols := range []int{256, 1024} {
			add(f, cols)
		}
	}
	add(GroupFormat{8, 0, true}, 172)
	forEachImpl(t, func(t *testing.T, impl string) {
		for _, it := range items {
			cols := it.m.Cols
			for _, nTok := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 24, 31, 33, 48, 50} {
				// Tokens from an offset, so that a token's neighbours differ between batches.
				off := (nTok * 7) % (maxTok - nTok + 1)
				Y := groupProduct(it.m, it.mode, it.X[off*cols:], nTok, []int{0, 5, 16, 37, rows})
				for tok := 0; tok < nTok; tok++ {
					for r := 0; r < rows; r++ {
						got, want := Y[tok*rows+r], it.alone[(off+tok)*rows+r]
						if !sameBits(got, want) {
							t.Fatalf("%v %dx%d %v, %d tokens: token %d row %d: %v, alone (generic) %v", it.f, rows, cols, it.mode, nTok, off+tok, r, got, want)
						}
					}
				}
			}
		}
	})
}

// TestGroupPrepareOn checks that PrepareOn over a pool gives the products of Prepare, and that
// an Acts prepared for one matrix serves exactly the matrices SharesActs names.
func TestGroupPrepareOn(t *testing.T) {
	pool := NewPool(3)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(51, 52))
	forEachImpl(t, func(t *testing.T, impl string) {
		for _, f := range []GroupFormat{{4, 64, false}, {8, 0, true}} {
			c := genGroupCase(rng, f, 33, 512, gkRandom)
			m := c.matrix(t)
			for _, mode := range []ActMode{ActFloat, ActQuant} {
				m.Mode = mode
				for _, nTok := range []int{1, 40, 100} {
					X := groupInputs(rng, nTok, 512)
					var a, b Acts
					m.Prepare(&a, X, nTok)
					m.PrepareOn(pool, &b, X, nTok)
					ya, yb := make([]float32, nTok*33), make([]float32, nTok*33)
					m.MulActs(ya, &a, 0, 33)
					m.MulActs(yb, &b, 0, 33)
					for i := range ya {
						if !sameBits(ya[i], yb[i]) {
							t.Fatalf("%v %v %d tokens: PrepareOn gives %v, Prepare %v at %d", f, mode, nTok, yb[i], ya[i], i)
						}
					}
				}
			}
		}
	})
}

// TestGroupSharesActs checks which matrices share prepared activations.
func TestGroupSharesActs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(f GroupFormat, cols int, mode ActMode) *Matrix {
		m := genGroupCase(rng, f, 3, cols, gkRandom).matrix(t)
		m.Mode = mode
		return m
	}
	q0, err := NewMatrix(Q8_0, 1, 256, make([]byte, 8*34))
	if err != nil {
		t.Fatal(err)
	}
	a := mk(GroupFormat{4, 64, false}, 256, ActDefault)
	for _, c := range []struct {
		o     *Matrix
		share bool
	}{
		{mk(GroupFormat{4, 64, true}, 256, ActFloat), true}, // same unit and width: zero points do not matter
		{mk(GroupFormat{4, 64, false}, 256, ActQuant), false},
		{mk(GroupFormat{4, 128, false}, 256, ActDefault), false},
		{mk(GroupFormat{4, 64, false}, 512, ActDefault), false},
		{mk(GroupFormat{8, 0, true}, 256, ActDefault), false}, // int8 a16 unit 128, other order
		{q0, false},
	} {
		if got := a.SharesActs(c.o) || c.o.SharesActs(a); got != c.share {
			t.Errorf("SharesActs(%v %v, %v %v) = %v, want %v", a.Type, a.Mode, c.o.Type, c.o.Mode, got, c.share)
		}
	}
	i8a, i8b := mk(GroupFormat{8, 0, true}, 256, ActQuant), mk(GroupFormat{8, 0, true}, 256, ActQuant)
	if !i8a.SharesActs(i8b) {
		t.Errorf("two int8 a8 matrices of 256 columns do not share activations")
	}
	// Activations of another form are refused.
	var acts Acts
	i8a.Prepare(&acts, make([]float32, 256), 1)
	defer func() {
		if recover() == nil {
			t.Errorf("MulActs took activations prepared for another matrix kind")
		}
	}()
	a.MulActs(make([]float32, 3), &acts, 0, 3)
}

// TestGroupTypes checks the matrices' identity: their types are none of ggml's, name the
// format, and resolve back to it; ggml type ids are no group type.
func TestGroupTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names := map[string]bool{}
	for _, f := range groupFormats {
		c := genGroupCase(rng, f, 17, 256, gkRandom)
		m := c.matrix(t)
		if got, ok := m.GroupFormat(); !ok || got != f {
			t.Errorf("%v: GroupFormat() = %v, %v", f, got, ok)
		}
		if got, ok := m.Type.Group(); !ok || got != f {
			t.Errorf("%v: Type.Group() = %v, %v", f, got, ok)
		}
		if m.Type.Supported() || m.Type.BlockSize() != 0 || uint32(m.Type) < 1<<16 {
			t.Errorf("%v: type %d looks like a ggml type", f, uint32(m.Type))
		}
		if _, err := NewMatrix(m.Type, 17, 256, m.Data); err == nil {
			t.Errorf("NewMatrix took a group type")
		}
		name := m.Type.String()
		if names[name] || !strings.HasPrefix(name, "gqf-int") {
			t.Errorf("%v: name %q", f, name)
		}
		names[name] = true
		if f.Bits == 4 && f.Signed {
			if want := 2 * (64*(256/f.Group) + 8*256); m.Bytes() != want {
				t.Errorf("%v: Bytes() = %d, want %d (2 blocks of 16 rows: codes and scales)", f, m.Bytes(), want)
			}
		}
		if m.Bytes() != len(m.Data) {
			t.Errorf("%v: Bytes() = %d, len(Data) = %d", f, m.Bytes(), len(m.Data))
		}
	}
	for _, want := range []string{"gqf-int4-g128-asym", "gqf-int4-g64-sym", "gqf-int8-channel"} {
		if !names[want] {
			t.Errorf("no format is named %s (have %v)", want, names)
		}
	}
	for id := WType(0); id < 64; id++ {
		if _, ok := id.Group(); ok {
			t.Errorf("ggml type id %d is a group type", id)
		}
	}
	if _, ok := (groupTypeTag | 0x4ff).Group(); ok {
		t.Errorf("a malformed group type resolves")
	}
}

// TestNewGroupMatrixErrors checks that bad arguments are errors, not panics.
func TestNewGroupMatrixErrors(t *testing.T) {
	i4 := func(rows, cols int) []byte { return make([]byte, rows*cols/2) }
	for _, c := range []struct {
		name       string
		f          GroupFormat
		rows, cols int
		codes      []byte
		scales     []float32
		zeros      []uint8
		msg        string
	}{
		{"int4 group 0", GroupFormat{4, 0, true}, 1, 64, i4(1, 64), make([]float32, 1), nil, "group size"},
		{"int4 group 48", GroupFormat{4, 48, true}, 1, 96, i4(1, 96), make([]float32, 2), nil, "group size 48"},
		{"int4 group 512", GroupFormat{4, 512, true}, 1, 512, i4(1, 512), make([]float32, 1), nil, "group size 512"},
		{"group does not divide", GroupFormat{4, 64, true}, 1, 96, i4(1, 96), make([]float32, 1), nil, "does not divide"},
		{"short codes", GroupFormat{4, 64, true}, 2, 64, i4(1, 64), make([]float32, 2), nil, "code bytes"},
		{"long scales", GroupFormat{4, 64, true}, 1, 64, i4(1, 64), make([]float32, 2), nil, "scales"},
		{"missing zeros", GroupFormat{4, 64, false}, 1, 64, i4(1, 64), make([]float32, 1), nil, "zero points"},
		{"zeros for sym", GroupFormat{4, 64, true}, 1, 64, i4(1, 64), make([]float32, 1), make([]uint8, 1), "zero points"},
		{"zero 16", GroupFormat{4, 64, false}, 1, 64, i4(1, 64), make([]float32, 1), []uint8{16}, "zero point 16"},
		{"rows 0", GroupFormat{4, 64, true}, 0, 64, nil, nil, nil, "not positive"},
		{"cols -64", GroupFormat{4, 64, true}, 1, -64, nil, nil, nil, "not positive"},
		{"bits 2", GroupFormat{2, 64, true}, 1, 64, nil, nil, nil, "2-bit"},
		{"int8 group", GroupFormat{8, 64, true}, 1, 64, make([]byte, 64), make([]float32, 1), nil, "per channel"},
		{"int8 asym", GroupFormat{8, 0, false}, 1, 64, make([]byte, 64), make([]float32, 1), make([]uint8, 1), "symmetric"},
		{"int8 cols 6", GroupFormat{8, 0, true}, 1, 6, make([]byte, 6), make([]float32, 1), nil, "multiple of 4"},
		{"int8 too long", GroupFormat{8, 0, true}, 1, int8MaxCols + 4, make([]byte, int8MaxCols+4), make([]float32, 1), nil, "longer"},
		{"int8 scales", GroupFormat{8, 0, true}, 2, 8, make([]byte, 16), make([]float32, 1), nil, "scales"},
	} {
		m, err := NewGroupMatrix(c.f, c.rows, c.cols, c.codes, c.scales, c.zeros)
		if err == nil || m != nil {
			t.Errorf("%s: no error", c.name)
		} else if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %q does not say %q", c.name, err, c.msg)
		}
	}
}

// TestGroupUnit checks the a16 block of int8 rows.
func TestGroupUnit(t *testing.T) {
	for cols, want := range map[int]int{1024: 128, 3072: 128, 172: 172, 508: 508, 4 * 131: 4, 96: 96, 160: 80, 12: 12, 4: 4, 6: 0} {
		if got := groupUnit16(cols); got != want {
			t.Errorf("groupUnit16(%d) = %d, want %d", cols, got, want)
		}
		if cols%4 == 0 && refUnit16(GroupFormat{8, 0, true}, cols) != want {
			t.Errorf("test reference unit of %d is not %d", cols, want)
		}
	}
}

// TestGroupQuantizers checks every implementation's activation quantizers against the Go
// ones (which TestGroupProducts holds to the reference), bit for bit, on blocks of every unit
// length the formats use, with the corner cases of groupInputs, ties, values that round to
// ±qmax and beyond, and lengths that leave a partial vector.
func TestGroupQuantizers(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, im := range impls {
		if im.groupQuant16 == nil {
			continue
		}
		for _, unit := range []int{4, 12, 16, 32, 64, 128, 172, 256, 508} {
			for _, blocks := range []int{1, 3, 8} {
				cols := unit * blocks
				X := groupInputs(rng, 10, cols)
				// Exact ties of the a8 and a16 steps: amax 127 (or 32767) at the block start.
				for k := range cols {
					X[2*cols+k] = float32(k%255) - 127 + 0.5
					X[8*cols+k] = float32(k%4001)*16.25 - 32500
				}
				X[8*cols], X[2*cols] = 32767, 127
				// Subnormal d with clamped codes (see groupInputs).
				for k := range cols {
					X[3*cols+k] = float32(1.49*math.Ldexp(1, -149)*32767) * float32(k%3-1)
					X[5*cols+k] = float32(1.49*math.Ldexp(1, -149)*127) * float32(k%3-1)
				}
				for tok := 0; tok < 10; tok++ {
					x := X[tok*cols : (tok+1)*cols]
					for _, perm := range []*[16]uint16{&groupPermNone, &groupPermI4, &groupPermI8} {
						if perm == &groupPermI4 && unit%16 != 0 {
							continue
						}
						q1, q2 := make([]int16, cols), make([]int16, cols)
						d1, d2 := make([]float32, blocks), make([]float32, blocks)
						s1, s2 := make([]int32, blocks), make([]int32, blocks)
						for i := range q2 {
							q2[i] = 0x5555 // stale values must be overwritten
						}
						groupQuant16Go(q1, d1, s1, x, unit, perm)
						im.groupQuant16(q2, d2, s2, x, unit, perm)
						for b := range d1 {
							if !sameBits(d1[b], d2[b]) || s1[b] != s2[b] {
								t.Fatalf("%s a16 unit %d token %d block %d: d %v Σ %d, want %v %d", im.name, unit, tok, b, d2[b], s2[b], d1[b], s1[b])
							}
						}
						for k := range q1 {
							if q1[k] != q2[k] {
								t.Fatalf("%s a16 unit %d token %d: code %d = %d, want %d (x %v)", im.name, unit, tok, k, q2[k], q1[k], x[k])
							}
						}
						im.groupQuant16(q2, d2, nil, x, unit, perm) // no sums
					}
					p1, p2 := make([]int8, cols), make([]int8, cols)
					s1, s2 := make([]int32, blocks), make([]int32, blocks)
					for i := range p2 {
						p2[i] = 0x55
					}
					d1, d2 := groupQuant8Go(p1, s1, x, unit), im.groupQuant8(p2, s2, x, unit)
					if !sameBits(d1, d2) {
						t.Fatalf("%s a8 unit %d token %d: d %v, want %v", im.name, unit, tok, d2, d1)
					}
					for k := range p1 {
						if p1[k] != p2[k] {
							t.Fatalf("%s a8 unit %d token %d: code %d = %d, want %d (x %v)", im.name, unit, tok, k, p2[k], p1[k], x[k])
						}
					}
					for u := range s1 {
						if s1[u] != s2[u] {
							t.Fatalf("%s a8 unit %d token %d: Σ of unit %d = %d, want %d", im.name, unit, tok, u, s2[u], s1[u])
						}
					}
					if d := im.groupQuant8(p2, nil, x, unit); !sameBits(d, d1) {
						t.Fatalf("%s a8 without sums: d %v, want %v", im.name, d, d1)
					}
					q := make([]int16, cols)
					groupQuant16Go(q, d1s(blocks), nil, x, unit, &groupPermNone)
					h1, l1, h2, l2 := make([]byte, cols), make([]byte, cols), make([]byte, cols), make([]byte, cols)
					groupSplitGo(q, h1, l1)
					im.groupSplit(q, h2, l2)
					if string(h1) != string(h2) || string(l1) != string(l2) {
						t.Fatalf("%s split of %d codes differs", im.name, cols)
					}
				}
			}
		}
	}
}

func d1s(n int) []float32 { return make([]float32, n) }
