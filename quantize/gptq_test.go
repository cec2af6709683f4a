package quantize

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// correlatedInputs draws n rows of cols inputs that mix a few latent factors (plus a little
// noise), with per-channel scales spread over two orders of magnitude: the strongly
// correlated, uneven activations of a real layer.
func correlatedInputs(rng *rand.Rand, n, cols, latent int) []float64 {
	mix := make([]float64, latent*cols)
	for i := range mix {
		mix[i] = rng.NormFloat64()
	}
	scale := make([]float64, cols)
	for j := range scale {
		scale[j] = math.Exp(1.2 * rng.NormFloat64())
	}
	X := make([]float64, n*cols)
	z := make([]float64, latent)
	for t := 0; t < n; t++ {
		for k := range z {
			z[k] = rng.NormFloat64()
		}
		for j := 0; j < cols; j++ {
			var v float64
			for k := range z {
				v += z[k] * mix[k*cols+j]
			}
			X[t*cols+j] = scale[j] * (v + 0.1*rng.NormFloat64())
		}
	}
	return X
}

// hessian is XᵀX (cols × cols), computed plainly in float64.
func hessian(X []float64, n, cols int) []float64 {
	H := make([]float64, cols*cols)
	for t := 0; t < n; t++ {
		x := X[t*cols : (t+1)*cols]
		for i, a := range x {
			for j, b := range x {
				H[i*cols+j] += a * b
			}
		}
	}
	return H
}

// outputErr is ‖(W − Ŵ)Xᵀ‖² = Σ_rows dᵀ H d, in float64.
func outputErr(w, deq []float32, rows, cols int, H []float64) float64 {
	var e float64
	d := make([]float64, cols)
	for r := 0; r < rows; r++ {
		for j := range d {
			d[j] = float64(w[r*cols+j]) - float64(deq[r*cols+j])
		}
		for i := range d {
			var s float64
			for j := range d {
				s += H[i*cols+j] * d[j]
			}
			e += d[i] * s
		}
	}
	return e
}

// TestGPTQBeatsRTN: on a layer with correlated inputs, GPTQ's output error is well below RTN's
// for every encoding and option set.
func TestGPTQBeatsRTN(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, cols, n = 24, 256, 1024
	X := correlatedInputs(rng, n, cols, 24)
	H := hessian(X, n, cols)
	w := randWeights(rng, rows, cols, false)
	cases := []struct {
		spec GroupSpec
		opts GPTQOptions
		max  float64 // GPTQ error / RTN error must stay below this
	}{
		{GroupSpec{Bits: 4, Group: 32, Symmetric: true}, GPTQOptions{}, 0.5},
		{GroupSpec{Bits: 4, Group: 128}, GPTQOptions{BlockSize: 64}, 0.5},
		{GroupSpec{Bits: 4, Group: 64, Symmetric: true}, GPTQOptions{ActOrder: true}, 0.5},
		{GroupSpec{Bits: 4, Group: 64, Symmetric: true}, GPTQOptions{ActOrder: true, StaticGroups: true}, 0.5},
		{GroupSpec{Bits: 4, Group: 32}, GPTQOptions{ActOrder: true, StaticGroups: true, ClipSearch: true}, 0.5},
		{GroupSpec{Bits: 4, Symmetric: true}, GPTQOptions{ActOrder: true}, 0.5},
		{GroupSpec{Bits: 8, Symmetric: true}, GPTQOptions{}, 0.5},
	}
	for _, c := range cases {
		rtn, err := QuantizeGroups(c.spec, w, rows, cols, nil)
		if err != nil {
			t.Fatal(err)
		}
		gq, err := GPTQ(w, rows, cols, H, c.spec, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		er, eg := outputErr(w, rtn.Dequantize(), rows, cols, H), outputErr(w, gq.Dequantize(), rows, cols, H)
		t.Logf("%v %+v: output error RTN %.4g, GPTQ %.4g (ratio %.3f)", c.spec, c.opts, er, eg, eg/er)
		if !(eg < c.max*er) {
			t.Errorf("%v %+v: GPTQ error %g is not below %.2f × RTN %g", c.spec, c.opts, eg, c.max, er)
		}
		wantGIdx := c.opts.ActOrder && !c.opts.StaticGroups && c.spec.Group > 0
		if (gq.GIdx != nil) != wantGIdx {
			t.Errorf("%v %+v: GIdx set %v, want %v", c.spec, c.opts, gq.GIdx != nil, wantGIdx)
		}
		if gq.GIdx != nil { // every group holds exactly Group columns
			count := make([]int, gq.Groups())
			for _, g := range gq.GIdx {
				count[g]++
			}
			for g, k := range count {
				if k != c.spec.Group {
					t.Fatalf("group %d has %d columns", g, k)
				}
			}
		}
	}
}

// TestGPTQDiagonalHessianIsRTN: with a diagonal H the inverse has no off-diagonal terms, so no
// error is propagated and GPTQ must give RTN's codes exactly (act-order with static groups
// only changes the order of independent roundings).
func TestGPTQDiagonalHessianIsRTN(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, cols = 8, 128
	w := randWeights(rng, rows, cols, true)
	H := make([]float64, cols*cols)
	for i := 0; i < cols; i++ {
		H[i*cols+i] = 1 + float64(i%7)
	}
	for _, spec := range allSpecs() {
		if cols%spec.groupLen(cols) != 0 {
			continue
		}
		rtn, err := QuantizeGroups(spec, w, rows, cols, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range []GPTQOptions{{}, {ActOrder: true, StaticGroups: true, BlockSize: 32}} {
			gq, err := GPTQ(w, rows, cols, H, spec, opts)
			if err != nil {
				t.Fatal(err)
			}
			if string(gq.Q) != string(rtn.Q) || !equalF32(gq.Scales, rtn.Scales) || string(gq.Zeros) != string(rtn.Zeros) {
				t.Errorf("%v %+v: GPTQ with a diagonal Hessian differs from RTN", spec, opts)
			}
		}
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGPTQMatchesTextbook compares the lazy-block implementation with a direct float64
// transcription of the algorithm written here (own Cholesky and inverse, one column at a time,
// every later column updated immediately), for per-channel int4 with no groups to refit.
func TestGPTQMatchesTextbook(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, cols, n = 16, 64, 256
	H := hessian(correlatedInputs(rng, n, cols, 8), n, cols)
	w := randWeights(rng, rows, cols, false)
	spec := GroupSpec{Bits: 4, Symmetric: true}
	gq, err := GPTQ(w, rows, cols, H, spec, GPTQOptions{BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	// Reference: U = chol(inv(H + λI))ᵀ upper; grids from the starting rows (per channel).
	h := append([]float64(nil), H...)
	var mean float64
	for i := 0; i < cols; i++ {
		mean += h[i*cols+i]
	}
	for i := 0; i < cols; i++ {
		h[i*cols+i] += 0.01 * mean / cols
	}
	U := refUpperCholOfInverse(h, cols)
	rtn, _ := QuantizeGroups(spec, w, rows, cols, nil) // per-channel grids fitted on the start values
	got := gq.Dequantize()
	var differ int
	for r := 0; r < rows; r++ {
		s := float64(rtn.Scales[r])
		W := make([]float64, cols)
		for j := range W {
			W[j] = float64(w[r*cols+j])
		}
		for i := 0; i < cols; i++ {
			q := math.Max(-8, math.Min(7, math.RoundToEven(W[i]/s))) * s
			if float32(q) != got[r*cols+i] {
				differ++
			}
			e := (W[i] - q) / U[i*cols+i]
			for j := i + 1; j < cols; j++ {
				W[j] -= e * U[i*cols+j]
			}
		}
	}
	t.Logf("%d of %d reconstructions differ from the textbook algorithm", differ, rows*cols)
	if differ > rows*cols/200 {
		t.Errorf("%d of %d reconstructions differ from the textbook algorithm", differ, rows*cols)
	}
	if gq.Scales[0] != rtn.Scales[0] {
		t.Errorf("per-channel scale %v, RTN's %v", gq.Scales[0], rtn.Scales[0])
	}
}

// refUpperCholOfInverse returns upper U with UᵀU = A⁻¹, by Gauss–Jordan inversion and a
// Cholesky–Banachiewicz factorisation (A⁻¹ = LLᵀ, U = Lᵀ).
func refUpperCholOfInverse(a []float64, n int) []float64 {
	m := make([]float64, n*2*n)
	for i := 0; i < n; i++ {
		copy(m[i*2*n:], a[i*n:(i+1)*n])
		m[i*2*n+n+i] = 1
	}
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r*2*n+c]) > math.Abs(m[p*2*n+c]) {
				p = r
			}
		}
		for k := 0; k < 2*n; k++ {
			m[c*2*n+k], m[p*2*n+k] = m[p*2*n+k], m[c*2*n+k]
		}
		d := m[c*2*n+c]
		for k := 0; k < 2*n; k++ {
			m[c*2*n+k] /= d
		}
		for r := 0; r < n; r++ {
			if f := m[r*2*n+c]; r != c && f != 0 {
				for k := 0; k < 2*n; k++ {
					m[r*2*n+k] -= f * m[c*2*n+k]
				}
			}
		}
	}
	inv := func(i, j int) float64 { return (m[i*2*n+n+j] + m[j*2*n+n+i]) / 2 }
	L := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			s := inv(i, j)
			for k := 0; k < j; k++ {
				s -= L[i*n+k] * L[j*n+k]
			}
			if i == j {
				L[i*n+i] = math.Sqrt(s)
			} else {
				L[i*n+j] = s / L[j*n+j]
			}
		}
	}
	U := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			U[i*n+j] = L[j*n+i]
		}
	}
	return U
}

// TestGPTQDeadColumns: inputs that are never active get H_ii = 0; their weights become 0.
func TestGPTQDeadColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const rows, cols, n = 4, 64, 128
	X := correlatedInputs(rng, n, cols, 8)
	for t := 0; t < n; t++ {
		X[t*cols+5], X[t*cols+40] = 0, 0
	}
	H := hessian(X, n, cols)
	w := randWeights(rng, rows, cols, false)
	for _, opts := range []GPTQOptions{{}, {ActOrder: true}} {
		gq, err := GPTQ(w, rows, cols, H, GroupSpec{Bits: 4, Group: 32}, opts)
		if err != nil {
			t.Fatal(err)
		}
		d := gq.Dequantize()
		for r := 0; r < rows; r++ {
			if d[r*cols+5] != 0 || d[r*cols+40] != 0 {
				t.Fatalf("%+v: dead columns reconstruct as %g, %g", opts, d[r*cols+5], d[r*cols+40])
			}
		}
	}
}

func TestGPTQErrors(t *testing.T) {
	w := make([]float32, 64)
	H := make([]float64, 64*64)
	spec := GroupSpec{Bits: 4, Group: 32}
	if _, err := GPTQ(w, 1, 64, H[:10], spec, GPTQOptions{}); err == nil || !strings.Contains(err.Error(), "Hessian has 10 values") {
		t.Errorf("short H: %v", err)
	}
	H[3] = math.NaN()
	if _, err := GPTQ(w, 1, 64, H, spec, GPTQOptions{}); err == nil || !strings.Contains(err.Error(), "Hessian [0, 3] is NaN") {
		t.Errorf("NaN H: %v", err)
	}
	H[3] = 0
	for i := 0; i < 64; i++ { // indefinite: −1 on the diagonal
		H[i*64+i] = -1
	}
	if _, err := GPTQ(w, 1, 64, H, spec, GPTQOptions{}); err == nil || !strings.Contains(err.Error(), "not positive definite") {
		t.Errorf("indefinite H: %v", err)
	}
}

// TestGPTQRowBlocks: one plan quantizes any block of rows to the bits the rows get in a run
// over the whole matrix (the converter runs GPTQ on row blocks), with and without act-order.
func TestGPTQRowBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	rows, cols, n := 300, 256, 600
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	x := make([]float64, n*cols)
	for i := range x {
		x[i] = r.NormFloat64() * (1 + float64(i%cols)/64)
	}
	H := make([]float64, cols*cols)
	for s := 0; s < n; s++ {
		for i := 0; i < cols; i++ {
			for j := 0; j < cols; j++ {
				H[i*cols+j] += x[s*cols+i] * x[s*cols+j]
			}
		}
	}
	for _, opts := range []GPTQOptions{{}, {ActOrder: true, StaticGroups: true}} {
		spec := GroupSpec{Bits: 4, Group: 64}
		whole, err := GPTQ(w, rows, cols, H, spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := NewGPTQPlan(H, cols, spec.Group, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := whole.Dequantize()
		for _, blk := range [][2]int{{0, 1}, {1, 17}, {17, 200}, {200, 300}} {
			part, err := GPTQRows(plan, w[blk[0]*cols:blk[1]*cols], blk[1]-blk[0], spec)
			if err != nil {
				t.Fatal(err)
			}
			got := part.Dequantize()
			for i, v := range got {
				if v != want[blk[0]*cols+i] {
					t.Fatalf("act-order %v: rows [%d, %d): element %d %g, whole matrix %g", opts.ActOrder, blk[0], blk[1], i, v, want[blk[0]*cols+i])
				}
			}
		}
	}
}

// TestGPTQPlanInPlace checks that the plan built in the Hessian's own memory is NewGPTQPlan's,
// bit for bit (its factor, and the rows GPTQ rounds with it), with and without act-order (the
// in-place permutation) and with dead columns, and that NewGPTQPlan leaves H alone.
func TestGPTQPlanInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	rows, cols, n := 40, 192, 400
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	H := make([]float64, cols*cols)
	for s := 0; s < n; s++ {
		x := make([]float64, cols)
		for i := range x {
			if i%37 != 5 { // dead columns
				x[i] = r.NormFloat64() * (1 + float64((i*7)%cols)/32)
			}
		}
		for i := 0; i < cols; i++ {
			for j := 0; j < cols; j++ {
				H[i*cols+j] += x[i] * x[j]
			}
		}
	}
	for _, opts := range []GPTQOptions{{}, {ActOrder: true, StaticGroups: true}, {ActOrder: true}} {
		spec := GroupSpec{Bits: 4, Group: 64}
		keep := append([]float64(nil), H...)
		a, err := NewGPTQPlan(H, cols, spec.Group, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(H, keep) {
			t.Fatal("NewGPTQPlan modified H")
		}
		mine := append([]float64(nil), H...)
		b, err := NewGPTQPlanInPlace(mine, cols, spec.Group, opts)
		if err != nil {
			t.Fatal(err)
		}
		if &b.U[0] != &mine[0] {
			t.Errorf("act-order %v: the in-place plan's factor is not in H's memory", opts.ActOrder)
		}
		if !slices.Equal(a.U, b.U) || !slices.Equal(a.perm, b.perm) || !slices.Equal(a.diag, b.diag) {
			t.Fatalf("act-order %v: the in-place plan differs", opts.ActOrder)
		}
		ga, err := GPTQRows(a, w, rows, spec)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := GPTQRows(b, w, rows, spec)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ga.Dequantize(), gb.Dequantize()) {
			t.Fatalf("act-order %v: rounded rows differ", opts.ActOrder)
		}
	}
	// The permutation alone, on cycles of every length and fixed points.
	for _, m := range []int{1, 2, 7, 50} {
		h := make([]float64, m*m)
		for i := range h {
			h[i] = float64(i)
		}
		perm := r.Perm(m)
		if got, want := permuteSymInPlace(append([]float64(nil), h...), m, perm), permuteSym(h, m, perm); !slices.Equal(got, want) {
			t.Fatalf("%d: permuteSymInPlace %v, permuteSym %v", m, got, want)
		}
	}
}
