package runtime_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/convert"
	. "github.com/gquant/gquant/runtime"
)

// Model folders used by the tests: the bundled copies of stories260k and stories3m.
var (
	stories260k = filepath.Join("..", "testdata", "models", "stories260k")
	stories3m   = filepath.Join("..", "testdata", "models", "stories3m")
)

// reference is the part of a model folder's reference.json the tests read: logits computed
// outside this repository from the same BF16 weights with HF semantics.
type reference struct {
	Prompts []struct {
		Text   string    `json:"text"`
		IDs    []int     `json:"ids"`
		Logits []float32 `json:"last_position_logits"`
	} `json:"prompts"`
	Greedy struct {
		Prompt    string `json:"prompt"`
		PromptIDs []int  `json:"prompt_ids"`
		NewIDs    []int  `json:"new_ids"`
		Text      string `json:"full_text"`
	} `json:"greedy"`
}

// modelDir returns dir, a model bundled in testdata; a missing one fails the test.
func modelDir(t testing.TB, dir string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatalf("bundled model %s: %v", dir, err)
	}
	return dir
}

func readReference(t testing.TB, dir string) *reference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Prompts) == 0 || len(r.Greedy.NewIDs) == 0 {
		t.Fatalf("%s: reference.json has no prompts or greedy ids", dir)
	}
	return &r
}

func loadModel(t testing.TB, path string, opts Options) *Model {
	t.Helper()
	m, err := Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// checkReference compares the last-position logits of every reference prompt, evaluated
// whole (prefill) and token by token (decode), with tolerance tol·max|logit|, and the greedy
// continuation through Generate.
func checkReference(t *testing.T, m *Model, ref *reference, tol float64) {
	t.Helper()
	for _, p := range ref.Prompts {
		if got := m.Tokenizer().Encode(p.Text, true); !equalInts(got, p.IDs) {
			t.Errorf("%q: tokenizer gives %v, want %v", p.Text, got, p.IDs)
		}
		st := m.NewState(len(p.IDs))
		got, err := m.Eval(st, p.IDs, false)
		if err != nil {
			t.Fatal(err)
		}
		compareLogits(t, p.Text+" (prefill)", got, p.Logits, tol)
		st.Reset()
		for _, id := range p.IDs {
			if got, err = m.Eval(st, []int{id}, false); err != nil {
				t.Fatal(err)
			}
		}
		compareLogits(t, p.Text+" (decode)", got, p.Logits, tol)
	}
	var ids []int
	err := m.Generate(ref.Greedy.PromptIDs, len(ref.Greedy.NewIDs), Sampler{}, func(id int) bool {
		ids = append(ids, id)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if !equalInts(ids, ref.Greedy.NewIDs) {
		t.Errorf("greedy continuation\n got %v\nwant %v", ids, ref.Greedy.NewIDs)
	}
}

// compareLogits fails when any logit differs from the reference by more than tol·max|ref|.
func compareLogits(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
	}
	var amax, dmax float64
	for i := range want {
		amax = math.Max(amax, math.Abs(float64(want[i])))
		dmax = math.Max(dmax, math.Abs(float64(got[i])-float64(want[i])))
	}
	t.Logf("%s: max |Δlogit| %.3g (%.3g of max |logit| %.3g)", what, dmax, dmax/amax, amax)
	if dmax > tol*amax {
		t.Errorf("%s: max |Δlogit| %g exceeds %g·%g", what, dmax, tol, amax)
	}
}

func equalInts(a, b []int) bool {
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

func TestReferenceHF(t *testing.T) {
	for _, dir := range []string{stories260k, stories3m} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			dir := modelDir(t, dir)
			m := loadModel(t, dir, Options{Threads: 2})
			if all, lin := m.BPW(); all != 16 || lin != 16 {
				t.Errorf("BPW = %v, %v; want 16, 16 for a BF16 checkpoint", all, lin)
			}
			checkReference(t, m, readReference(t, dir), 1e-3)
		})
	}
}

// TestReferenceGGUF runs the same checks on F16 GGUFs written by gquant's converter (for
// stories260k and stories3m that is lossless: every BF16 weight is exact in F16). The llama
// GGUF holds q/k rows permuted to the interleaved RoPE pairing, so this also checks that
// layout.
func TestReferenceGGUF(t *testing.T) {
	for _, dir := range []string{stories260k, stories3m} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			dir := modelDir(t, dir)
			out := convertGGUF(t, dir, "f16")
			m := loadModel(t, out, Options{Threads: 2})
			checkReference(t, m, readReference(t, dir), 1e-3)
		})
	}
}

// convertGGUF converts a model folder with gquant's converter into the test's temp dir.
func convertGGUF(t testing.TB, dir, scheme string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+"-"+scheme+".gguf")
	if _, err := convert.Convert(dir, out, convert.Options{Scheme: scheme, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReferenceSplitGGUF loads a GGUF split into parts by the converter, given its first part.
func TestReferenceSplitGGUF(t *testing.T) {
	dir := modelDir(t, stories260k)
	out := filepath.Join(t.TempDir(), "split.gguf")
	if _, err := convert.Convert(dir, out, convert.Options{Scheme: "f16", Threads: 1, SplitMaxSize: 200_000}); err != nil {
		t.Fatal(err)
	}
	parts, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "split-*-of-*.gguf"))
	if len(parts) < 2 {
		t.Fatalf("converter wrote %d parts: %v", len(parts), parts)
	}
	m := loadModel(t, parts[0], Options{Threads: 1})
	checkReference(t, m, readReference(t, dir), 1e-3)
}
