package runtime_test

import (
	"math"
	"strings"
	"testing"

	. "github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/kernels"
)

// TestPrefillMatchesDecode evaluates a prompt at once (multi-token products, per-token jobs
// over the pool) and token by token (single-token products) on quantized models: every
// position's logits must be bit-identical, since the quantized kernels give a token the same
// bits in any batch and every other step is done token by token in the same order. It also
// checks that a decode step allocates nothing but its logits.
func TestPrefillMatchesDecode(t *testing.T) {
	dir := presetFolder(t, "tiny-qwen3", 3)
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

// TestEvalBatch decodes three sequences of different lengths together (EvalBatch), then two of
// them in the other order, and compares every step's logits with those of each sequence
// decoded alone (Eval): bit-identical, the kernels giving a token the same bits in any batch
// (bf16 weights and quantized ones; a dense model, a sliding-window one, a mixture of
// experts), for every implementation but bf16 weights under AMX tiles (their float32 sums take
// another order than the decode's: within 1e-4 of the logits' scale); and so with attention in
// its primitive form, where the sequences are evaluated one after the other.
func TestEvalBatch(t *testing.T) {
	ids := synthIDs(40)
	prompts := [][]int{ids[:5], ids[5:14], ids[14:16]}
	// observe: a hook observes the attention scores, which puts attention in its primitive
	// form: the sequences are then evaluated one after the other (Batches false).
	for _, tc := range []struct {
		preset, scheme string
		observe        bool
	}{
		{"tiny-qwen3", "bf16", false}, {"tiny-qwen3", "q4_0", false}, {"tiny-qwen3", "q4_k_m", false},
		{"tiny-gemma3", "q8_0", false}, {"tiny-qwen3moe", "q4_0", false}, {"tiny-qwen3", "q4_0", true},
	} {
		dir := presetFolder(t, tc.preset, 5)
		path := dir // the HuggingFace folder's bf16 weights
		if tc.scheme != "bf16" {
			path = convertGGUF(t, dir, tc.scheme)
		}
		for _, impl := range kernels.Impls() {
			name := tc.preset + "/" + tc.scheme + "/" + impl
			if tc.observe {
				name += "/observed"
			}
			t.Run(name, func(t *testing.T) {
				restore, err := kernels.SetImpl(impl)
				if err != nil {
					t.Fatal(err)
				}
				defer restore()
				o := Options{Threads: 2}
				if tc.observe {
					o.Hooks = &Hooks{Activation: func(string, []float32, int, int) {}, Points: func(p string) bool { return strings.HasSuffix(p, ".kq_softmax") }}
				}
				m := loadModel(t, path, o)
				if m.Batches() == tc.observe {
					t.Fatalf("Batches() is %v", m.Batches())
				}
				V := m.Vocab()
				alone, batch := make([]*State, 3), make([]*State, 3)
				for i, p := range prompts {
					alone[i], batch[i] = m.NewState(32), m.NewState(32)
					for _, st := range []*State{alone[i], batch[i]} {
						if _, err := m.Eval(st, p, false); err != nil {
							t.Fatal(err)
						}
					}
				}
				steps := [][]int{{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {2, 0}, {2, 0}, {1}}
				for s, seqs := range steps {
					var sts []*State
					var toks []int
					for _, i := range seqs {
						sts, toks = append(sts, batch[i]), append(toks, ids[20+3*s+i])
					}
					got, err := m.EvalBatch(sts, toks)
					if err != nil {
						t.Fatal(err)
					}
					// A step allocates its logits only (the primitive attention of observe.go
					// allocates anyway, as Eval does), on average over 20: a worker's attention
					// scratch may still grow when it first meets a longer sequence.
					if s == 3 && !tc.observe {
						if n := testing.AllocsPerRun(20, func() {
							for _, st := range sts {
								st.Truncate(st.Pos() - 1)
							}
							if _, err := m.EvalBatch(sts, toks); err != nil {
								t.Fatal(err)
							}
						}); n >= 1.5 {
							t.Errorf("a step of %d sequences allocates %v times, want 1 (the logits)", len(sts), n)
						}
					}
					for r, i := range seqs {
						want, err := m.Eval(alone[i], toks[r:r+1], false)
						if err != nil {
							t.Fatal(err)
						}
						if batch[i].Pos() != alone[i].Pos() {
							t.Fatalf("step %d: sequence %d at position %d, alone %d", s, i, batch[i].Pos(), alone[i].Pos())
						}
						// Under AMX tiles the float32 sums of bf16 weights take another order
						// than the decode's: within float32 rounding of the logits' scale there.
						tol := 0.0
						if tc.scheme == "bf16" && impl == "amx" {
							tol = 1e-4 * maxAbs(want)
						}
						for k, v := range want {
							if w := got[r*V+k]; math.Float32bits(v) != math.Float32bits(w) && math.Abs(float64(v-w)) > tol {
								t.Fatalf("step %d, sequence %d, logit %d: batched %v, alone %v", s, i, k, w, v)
							}
						}
					}
				}
			})
		}
	}
}

// TestEvalBatchRefuses: mismatched arguments, a state given twice or of another model, and a
// full state are errors naming the model, and change no state.
func TestEvalBatchRefuses(t *testing.T) {
	dir := presetFolder(t, "tiny-qwen3", 5)
	m := loadModel(t, dir, Options{Threads: 1})
	other := loadModel(t, dir, Options{Threads: 1})
	a, b, full := m.NewState(8), m.NewState(8), m.NewState(1)
	if _, err := m.Eval(full, []int{1}, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sts  []*State
		toks []int
		want string
	}{
		{nil, nil, "0 states and 0 tokens"},
		{[]*State{a, b}, []int{1}, "2 states and 1 tokens"},
		{[]*State{a, a}, []int{1, 2}, "state 1 is given twice"},
		{[]*State{a, other.NewState(8)}, []int{1, 2}, "state 1 belongs to another model"},
		{[]*State{a, full}, []int{1, 2}, "state 1 is full (1 tokens)"},
		{[]*State{a, b}, []int{1, -1}, "token id -1 is out of range"},
	} {
		_, err := m.EvalBatch(tc.sts, tc.toks)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%q: %v", tc.want, err)
		}
		if a.Pos() != 0 || b.Pos() != 0 {
			t.Fatalf("%q: states moved to %d, %d", tc.want, a.Pos(), b.Pos())
		}
	}
}

// maxAbs returns the largest magnitude of x.
func maxAbs(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}
