package runtime_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/formats/hf/synth"
	. "github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/kernels"
)

// TestPrefillMatchesDecode evaluates a prompt at once (multi-token products, per-token jobs
// over the pool) and token by token (single-token products) on quantized models: every
// position's logits must be bit-identical, since the quantized kernels give a token the same
// bits in any batch and every other step is done token by token in the same order. It also
// checks that a decode step allocates nothing but its logits.
func TestPrefillMatchesDecode(t *testing.T) {
	spec, err := synth.Preset("tiny-qwen3")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "qwen3")
	if err := synth.Generate(dir, spec, synth.Options{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	ids := synthIDs(21) // 8 + 8 + 4 + 1 tokens: every tile size of the GEMM kernels
	for _, scheme := range []string{"q4_0", "q8_0", "q4_k_m"} {
		path := convertGGUF(t, dir, scheme)
		for _, impl := range kernels.Impls() {
			t.Run(scheme+"/"+impl, func(t *testing.T) {
				restore, err := kernels.SetImpl(impl)
				if err != nil {
					t.Fatal(err)
				}
				defer restore()
				m := loadModel(t, path, Options{Threads: 2})
				batch, err := m.Eval(m.NewState(len(ids)), ids, true)
				if err != nil {
					t.Fatal(err)
				}
				st := m.NewState(len(ids))
				V := m.Vocab()
				for p, id := range ids {
					l, err := m.Eval(st, []int{id}, false)
					if err != nil {
						t.Fatal(err)
					}
					for i, v := range l {
						if w := batch[p*V+i]; math.Float32bits(v) != math.Float32bits(w) {
							t.Fatalf("position %d logit %d: token by token %v, prefill %v", p, i, v, w)
						}
					}
				}
				one := []int{ids[0]}
				st.Truncate(len(ids) - 1)
				if n := testing.AllocsPerRun(5, func() {
					st.Truncate(len(ids) - 1)
					if _, err := m.Eval(st, one, false); err != nil {
						t.Fatal(err)
					}
				}); n > 1 {
					t.Errorf("a decode step allocates %v times, want 1 (the logits)", n)
				}
			})
		}
	}
}
