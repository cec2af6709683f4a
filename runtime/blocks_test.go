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
