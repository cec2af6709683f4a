package calibrate

import (
	"math/big"
	"os"
	"slices"
	"testing"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/kernels"
)

// gridInt is x rounded to the exact grid (units of 2⁻⁶⁴, half to even), computed with
// math/big.
func gridInt(x float64) *big.Int {
	r := new(big.Float).SetPrec(2000).SetMantExp(big.NewFloat(x).SetPrec(2000), 64) // x·2^64, exact
	i, _ := r.Int(nil)                                                              // toward zero
	frac := new(big.Float).SetPrec(2000).Sub(r, new(big.Float).SetInt(i))
	frac.Abs(frac)
	step := big.NewInt(1)
	if x < 0 {
		step.Neg(step)
	}
	if c := frac.Cmp(big.NewFloat(0.5)); c > 0 || (c == 0 && i.Bit(0) == 1) {
		i.Add(i, step)
	}
	return i
}

// fixedInt is f as an integer of units of 2⁻⁶⁴.
func fixedInt(f stats.Fixed) *big.Int {
	v := new(big.Int).SetUint64(f.Hi)
	v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(f.Lo))
	if f.Neg() {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	return v
}

// The exact Hessians of a real calibration are, element for element, the exact sum over the
// fold groups of each group's float64 Gram matrix (kernels.AddGram over its chunks in order,
// summed from zero) rounded to the grid: computed here with a hook of our own and math/big,
// for a shard whose chunks [3, 7) hold a whole group and a short last one (groups of 3 over 7
// windows); the same on one thread and two. (On this model every group's float64 sum happens
// to be exact, as is folding each chunk on its own: TestFoldGroupRounding tells the groupings
// apart.)
func TestFoldGroups(t *testing.T) {
	o := Options{Ctx: 32, Tokens: 32 * 7, Hessian: true, LinearOnly: true, FoldChunks: 3, Shard: Shard{1, 2}}
	res := calib(t, o)
	if m := res.Stats.Meta; m.FoldChunks != 3 || !slices.Equal(m.ChunkSet, []stats.ChunkRange{{Start: 3, End: 7}}) {
		t.Fatalf("fold group %d, chunks %v, want 3 and [3, 7)", m.FoldChunks, m.ChunkSet)
	}
	o.Threads = 2
	two := calib(t, o)

	// The reference: the leaders' inputs, per chunk, from the model run by the test.
	type ref struct {
		cols    int
		part    []float64  // the current group's float64 sum
		grouped []*big.Int // Σ over groups of the rounded group sums
	}
	refs := map[string]*ref{}
	for _, ls := range res.Stats.Linear {
		if ls.SharesInputOf != "" {
			continue
		}
		c := ls.Cols
		r := &ref{cols: c, part: make([]float64, c*c)}
		for range stats.TriangleLen(c) {
			r.grouped = append(r.grouped, new(big.Int))
		}
		refs[ls.Weight] = r
	}
	hook := func(w string, x []float32, n, cols int) {
		r := refs[w]
		if r == nil {
			return
		}
		kernels.AddGram(r.part, x, n, cols, nil, nil)
	}
	fold := func() {
		for _, r := range refs {
			k := 0
			for i := 0; i < r.cols; i++ {
				for j := i; j < r.cols; j++ {
					r.grouped[k].Add(r.grouped[k], gridInt(r.part[i*r.cols+j]))
					k++
				}
			}
			clear(r.part)
		}
	}
	m, err := runtime.Load(model260k, runtime.Options{Threads: 1, Hooks: &runtime.Hooks{LinearInput: hook}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	text, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	tok := m.Tokenizer()
	bos := -1
	if tok.AddBOS() {
		bos = tok.BOS()
	}
	chunks, err := Chunks(Tokenize(tok, string(text)), Chunking{Ctx: o.Ctx, Tokens: o.Tokens}, bos, corpus)
	if err != nil || len(chunks) != 7 {
		t.Fatalf("%d chunks, %v", len(chunks), err)
	}
	st := m.NewState(o.Ctx)
	for ci := 3; ci < 7; ci++ {
		st.Reset()
		if _, err := m.Eval(st, chunks[ci], true); err != nil {
			t.Fatal(err)
		}
		if ci == 5 || ci == 6 { // the ends of groups [3, 6) and [6, 7)
			fold()
		}
	}

	for _, ls := range res.Stats.Linear {
		r := refs[ls.Weight]
		if r == nil {
			continue
		}
		e, e2 := ls.Exact.Hessian, two.Stats.LinearFor(ls.Weight).Exact.Hessian
		if len(e) != len(r.grouped) || !slices.Equal(e, e2) {
			t.Fatalf("%s: %d exact values (%d on two threads, equal: %v), want %d", ls.Weight, len(e), len(e2), slices.Equal(e, e2), len(r.grouped))
		}
		for k, f := range e {
			if fixedInt(f).Cmp(r.grouped[k]) != 0 {
				t.Fatalf("%s: exact Hessian value %d is %v units, want %v", ls.Weight, k, fixedInt(f), r.grouped[k])
			}
		}
	}
}

// Each fold group's Hessian is summed in float64, then rounded once: over chunks [2, 6) in
// groups of two aligned on global chunk indexes ([2, 4) and [4, 6)), inputs of 2^20 then
// 2^-10 (Gram values 2^40 and 2^-20) sum to 2^40 (the float64 sum of the first group rounds)
// plus 2^-19 exactly; folding every chunk on its own, all four at once or groups [3, 5)
// would give 2^40 + 3·2^-20, 2^40, or 2^40 + 3·2^-20.
func TestFoldGroupRounding(t *testing.T) {
	col := &collector{exactHessians: true, foldGroups: 2}
	if err := col.init(stats.Model{Weights: []stats.Weight{{Name: "w", Cols: 2}}}, true, 1); err != nil {
		t.Fatal(err)
	}
	ls := col.linear["w"]
	batch := []*stats.LinearStats{ls}
	col.startPass(true, batch)
	for ci := 2; ci < 6; ci++ {
		v := float32(0x1p-10)
		if ci == 2 {
			v = 0x1p20
		}
		col.linearInput("w", []float32{v, v}, 1, 2)
		if col.err != nil {
			t.Fatal(col.err)
		}
		if err := col.endChunk(ci, 6, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := col.finishExact(batch); err != nil {
		t.Fatal(err)
	}
	units := func(exps ...int) *big.Int { // Σ 2^e in units of 2^-64
		v := new(big.Int)
		for _, e := range exps {
			v.Add(v, new(big.Int).Lsh(big.NewInt(1), uint(64+e)))
		}
		return v
	}
	want := units(40, -19)
	for k, f := range ls.Exact.Hessian {
		if fixedInt(f).Cmp(want) != 0 {
			t.Fatalf("exact Hessian value %d: %v units, want 2^40 + 2^-19 (%v)", k, fixedInt(f), want)
		}
	}
	if h := ls.Hessian; len(h) != 4 || h[0] != 0x1p40 || h[1] != 0x1p40 || h[2] != 0x1p40 || h[3] != 0x1p40 {
		t.Errorf("float64 Hessian %v, want 2^40 (2^40 + 2^-19 rounded) everywhere", h)
	}
	// Σx² is folded per chunk: 2^40 + 3·2^-20 exactly.
	if got, want := fixedInt(ls.Exact.Sum2[0]), units(40, -20, -20, -20); got.Cmp(want) != 0 {
		t.Errorf("exact Σx² %v units, want %v", got, want)
	}
}
