package runtime

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/quantize"
)

// TestEvalBlocks: the blocks run one at a time over the residual stream the caller keeps give
// the logits of Eval, bit for bit (the same steps in the same order); ReplaceLinear with a
// weight's own values changes nothing, with zeros it changes the logits; a released block
// cannot run.
func TestEvalBlocks(t *testing.T) {
	dir := filepath.Join("..", "testdata", "models", "stories260k")
	ref, err := Load(dir, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	m, err := Load(dir, Options{Threads: 2, Blocks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tokens := []int{1, 403, 407, 261, 103, 77, 5, 290, 301, 9}
	want, err := ref.Eval(ref.NewState(0), tokens, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.EvalBlocks(ref.NewState(0), tokens, nil, 0, 1); err == nil {
		t.Fatal("EvalBlocks on a model loaded without Blocks: no error")
	}
	run := func() []float32 {
		t.Helper()
		st := m.NewState(0)
		L := m.Spec().Layers
		var x []float32
		for l := 0; l <= L; l++ {
			st.Reset()
			if x, err = m.EvalBlocks(st, tokens, x, l, min(l+1, L)); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	got := run()
	if len(got) != len(want) {
		t.Fatalf("%d logits, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("logit %d: %v, Eval %v", i, got[i], want[i])
		}
	}
	// The same values as float32: the products change only in their arithmetic (float32
	// instead of the source's bf16 widened): close, not identical.
	name := "blk.0.ffn_down.weight"
	w := m.mats[name]
	vals := make([]float32, w.Rows*w.Cols)
	codec, err := quantize.For(gguf.Type(w.Type))
	if err != nil {
		t.Fatal(err)
	}
	codec.Dequantize(vals, w.Data)
	if err := m.ReplaceLinear(name, vals); err != nil {
		t.Fatal(err)
	}
	same := run()
	for i := range want {
		if d := math.Abs(float64(same[i] - want[i])); d > 1e-3*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("own values: logit %d: %v, want %v", i, same[i], want[i])
		}
	}
	if err := m.ReplaceLinear(name, make([]float32, len(vals))); err != nil {
		t.Fatal(err)
	}
	zero := run()
	diff := 0
	for i := range want {
		if zero[i] != want[i] {
			diff++
		}
	}
	if diff < len(want)/2 {
		t.Fatalf("a zeroed ffn_down changed %d of %d logits", diff, len(want))
	}
	if err := m.ReplaceLinear(name, vals[1:]); err == nil {
		t.Fatal("ReplaceLinear with the wrong size: no error")
	}
	m.ReleaseBlock(0)
	if _, err := m.EvalBlocks(m.NewState(0), tokens, nil, 0, 1); err == nil {
		t.Fatal("a released block ran")
	}
}

// TestReplaceVectorFold: dividing block 0's norms by a scaling and multiplying the columns of
// the layers that read them by it (AWQ's folds, as layer-sequential AWQ hands them to the
// model) leaves the logits unchanged up to float rounding, which only holds if the replaced
// norms are the ones the block runs with: the scaled columns alone change them. A vector of
// the wrong size, or a name that is no vector, is refused.
func TestReplaceVectorFold(t *testing.T) {
	dir := filepath.Join("..", "testdata", "models", "stories260k")
	m, err := Load(dir, Options{Threads: 2, Blocks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tokens := []int{1, 403, 407, 261, 103, 77, 5, 290, 301, 9}
	run := func() []float32 {
		t.Helper()
		st := m.NewState(0)
		L := m.Spec().Layers
		var x []float32
		for l := 0; l <= L; l++ {
			st.Reset()
			if x, err = m.EvalBlocks(st, tokens, x, l, min(l+1, L)); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	want := run()
	values := func(name string) ([]float32, int) {
		w := m.mats[name]
		vals := make([]float32, w.Rows*w.Cols)
		codec, err := quantize.For(gguf.Type(w.Type))
		if err != nil {
			t.Fatal(err)
		}
		codec.Dequantize(vals, w.Data)
		return vals, w.Cols
	}
	maxRel := func(got []float32) float64 {
		var num, den float64
		for i := range want {
			d := float64(got[i] - want[i])
			num, den = max(num, math.Abs(d)), max(den, math.Abs(float64(want[i])))
		}
		return num / den
	}
	for _, f := range []struct {
		norm    string
		targets []string
	}{{"blk.0.attn_norm.weight", []string{"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}},
		{"blk.0.ffn_norm.weight", []string{"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"}}} {
		norm := append([]float32(nil), m.vecs[f.norm]...)
		s := make([]float32, len(norm))
		for j := range s {
			s[j] = 0.25 + float32((j*37)%64)/16 // 0.25 … 4.19
			norm[j] /= s[j]
		}
		for _, name := range f.targets {
			w, cols := values(name)
			for i := range w {
				w[i] *= s[i%cols]
			}
			if err := m.ReplaceLinear(name, w); err != nil {
				t.Fatal(err)
			}
		}
		if rel := maxRel(run()); rel < 1e-2 {
			t.Fatalf("%s: scaled columns alone changed the logits by %.2g of their largest", f.norm, rel)
		}
		if err := m.ReplaceVector(f.norm, norm); err != nil {
			t.Fatal(err)
		}
		if rel := maxRel(run()); rel > 1e-4 {
			t.Fatalf("%s folded: the logits moved by %.2g of their largest", f.norm, rel)
		}
	}
	if err := m.ReplaceVector("blk.0.attn_norm.weight", make([]float32, 3)); err == nil {
		t.Fatal("ReplaceVector with the wrong size: no error")
	}
	if err := m.ReplaceVector("blk.0.attn_q.weight", make([]float32, 3)); err == nil {
		t.Fatal("ReplaceVector of a matrix: no error")
	}
}

// TestSkipLogits: a state that skips the logits hands the output layer the same input as one
// that computes them, for every position, and returns none.
func TestSkipLogits(t *testing.T) {
	dir := filepath.Join("..", "testdata", "models", "stories260k")
	var seen [][]float32
	hooks := &Hooks{LinearInput: func(w string, x []float32, n, cols int) {
		if w == "output.weight" {
			seen = append(seen, append([]float32(nil), x...))
		}
	}}
	m, err := Load(dir, Options{Threads: 2, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tokens := []int{1, 403, 407, 261, 103, 77, 5}
	logits, err := m.Eval(m.NewState(0), tokens, true)
	if err != nil || len(logits) != len(tokens)*m.Vocab() {
		t.Fatalf("%d logits, %v", len(logits), err)
	}
	st := m.NewState(0)
	st.SkipLogits(true)
	if logits, err = m.Eval(st, tokens, true); err != nil || logits != nil {
		t.Fatalf("skipping: %d logits, %v", len(logits), err)
	}
	if len(seen) != 2 || len(seen[0]) != len(tokens)*m.Spec().Hidden {
		t.Fatalf("output inputs seen: %d", len(seen))
	}
	for i := range seen[0] {
		if math.Float32bits(seen[0][i]) != math.Float32bits(seen[1][i]) {
			t.Fatalf("output input %d: %v skipping, %v computing", i, seen[1][i], seen[0][i])
		}
	}
}
