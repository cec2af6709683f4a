package runtime_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/hf/synth"
	. "github.com/gquant/gquant/runtime"
)

// TestHooks checks that Activation sees exactly ActivationNames in graph order with the right
// shapes, that LinearInput sees every linear layer's input, that an identity hook changes
// nothing, and that a modifying hook flows on through the graph.
func TestHooks(t *testing.T) {
	dir := modelDir(t, stories260k)
	ids := []int{1, 403, 407, 261, 378}
	plain := loadModel(t, dir, Options{Threads: 1})
	want, err := plain.Eval(plain.NewState(8), ids, true)
	if err != nil {
		t.Fatal(err)
	}

	var seen []string
	dims := map[string]int{}
	linear := map[string]int{}
	h := &Hooks{
		Activation: func(name string, x []float32, nTok, dim int) {
			seen = append(seen, name)
			dims[name] = dim
			if len(x) != nTok*dim {
				t.Errorf("%s: %d values for %d×%d", name, len(x), nTok, dim)
			}
			if want := len(ids); nTok != want && name != "output_norm" && name != "logits" {
				t.Errorf("%s: nTok %d, want %d", name, nTok, want)
			}
		},
		LinearInput: func(weight string, x []float32, nTok, cols int) {
			linear[weight] += nTok
			if len(x) != nTok*cols {
				t.Errorf("%s: %d values for %d×%d", weight, len(x), nTok, cols)
			}
		},
	}
	m := loadModel(t, dir, Options{Threads: 1, Hooks: h})
	got, err := m.Eval(m.NewState(8), ids, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Error("observing hooks changed the logits")
	}
	if names := ActivationNames(m.Spec()); !slices.Equal(seen, names) {
		t.Errorf("activation names\n got %v\nwant %v", seen, names)
	}
	s := m.Spec()
	for name, d := range map[string]int{"blk.0.q": s.Heads * s.HeadDim, "blk.4.k_rope": s.KVHeads * s.HeadDim,
		"blk.2.ffn_act": s.Intermediate, "logits": s.Vocab, "token_embd": s.Hidden} {
		if dims[name] != d {
			t.Errorf("%s: dim %d, want %d", name, dims[name], d)
		}
	}
	// 7 linear layers per block plus the output, every token each.
	if len(linear) != 7*s.Layers+1 || linear["output.weight"] != len(ids) || linear["blk.4.ffn_down.weight"] != len(ids) {
		t.Errorf("linear inputs: %v", linear)
	}

	// A hook that zeroes the last block's MLP output must give the logits of the model
	// without that MLP: check against the same computation done by zeroing ffn_act instead
	// (ffn_down of zeros is zero), and against the unmodified logits (must differ).
	zero := func(target string) []float32 {
		hm := loadModel(t, dir, Options{Threads: 1, Hooks: &Hooks{Activation: func(name string, x []float32, _, _ int) {
			if name == target {
				clear(x)
			}
		}}})
		l, err := hm.Eval(hm.NewState(8), ids, true)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := zero("blk.4.ffn_out"), zero("blk.4.ffn_act")
	if !slices.Equal(a, b) {
		t.Error("zeroing ffn_out and ffn_act of the same block disagree")
	}
	if slices.Equal(a, want) {
		t.Error("a modifying hook did not change the logits")
	}
}

// TestActivationNamesQwen3 checks the per-family names.
func TestActivationNamesQwen3(t *testing.T) {
	spec, err := synth.Preset("tiny-qwen3")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := synth.Generate(dir, spec, synth.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, dir, Options{Threads: 1})
	names := strings.Join(ActivationNames(m.Spec()), " ")
	for _, n := range []string{"blk.1.q_norm", "blk.1.k_norm", "blk.0.q_rope", "output_norm"} {
		if !strings.Contains(names, n) {
			t.Errorf("ActivationNames lacks %s", n)
		}
	}
}

// TestSampler checks greedy picks, seeded determinism and that top-k restricts the choice.
func TestSampler(t *testing.T) {
	logits := []float32{0.1, 2, 1.9, -3, 2}
	if got := (Sampler{}).Pick(logits, nil); got != 1 {
		t.Errorf("greedy pick %d, want 1 (first of the tied maxima)", got)
	}
	draw := func(s Sampler) []int {
		rng := rand.New(rand.NewPCG(s.Seed, 1))
		var out []int
		for i := 0; i < 200; i++ {
			out = append(out, s.Pick(logits, rng))
		}
		return out
	}
	s := Sampler{Temperature: 1, Seed: 42}
	a, b := draw(s), draw(s)
	if !slices.Equal(a, b) {
		t.Error("same seed, different draws")
	}
	// Empirical frequencies near the softmax probabilities.
	counts := make([]float64, len(logits))
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 20000
	for i := 0; i < n; i++ {
		counts[s.Pick(logits, rng)]++
	}
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v))
	}
	for i, v := range logits {
		p := math.Exp(float64(v)) / z
		if math.Abs(counts[i]/n-p) > 0.02 {
			t.Errorf("token %d drawn %.3f of the time, want %.3f", i, counts[i]/n, p)
		}
	}
	for _, id := range draw(Sampler{Temperature: 1, TopK: 2, Seed: 1}) {
		if id != 1 && id != 4 {
			t.Fatalf("top-2 sampling drew %d", id)
		}
	}
}

// TestGenerateSeeded checks that sampled generation is reproducible and stops when asked.
func TestGenerateSeeded(t *testing.T) {
	m := loadModel(t, modelDir(t, stories260k), Options{Threads: 1})
	run := func(seed uint64, limit int) []int {
		var ids []int
		err := m.Generate([]int{1, 403, 407, 261, 378}, 24, Sampler{Temperature: 0.9, Seed: seed}, func(id int) bool {
			ids = append(ids, id)
			return len(ids) < limit
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	a, b := run(5, 100), run(5, 100)
	if !slices.Equal(a, b) || len(a) == 0 {
		t.Errorf("seeded generation not reproducible: %v vs %v", a, b)
	}
	if c := run(5, 3); len(c) != 3 {
		t.Errorf("emit returning false did not stop generation: %d tokens", len(c))
	}
}

// TestLoadErrors checks that bad inputs give one-line errors naming the file and tensor.
func TestLoadErrors(t *testing.T) {
	if _, err := Load("does-not-exist.gguf", Options{}); err == nil {
		t.Error("loaded a missing file")
	}
	spec, _ := synth.Preset("tiny-llama")
	dir := t.TempDir()
	if err := synth.Generate(dir, spec, synth.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, dir, Options{Threads: 1})
	st := m.NewState(4)
	if _, err := m.Eval(st, []int{1, 2, 3, 4, 5}, false); err == nil || !strings.Contains(err.Error(), "capacity") {
		t.Errorf("overlong eval: %v", err)
	}
	if _, err := m.Eval(st, []int{m.Vocab()}, false); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("bad token id: %v", err)
	}
	if st.Pos() != 0 {
		t.Errorf("failed evals moved the position to %d", st.Pos())
	}
}
