package stats

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gquant/gquant/formats/imatrix"
)

// TestImatrixExperts: the statistics of a stack's experts become one llama.cpp imatrix entry
// of one matrix per expert, in expert order, with each expert's count (0 for an expert no
// token reached), as llama-imatrix writes MUL_MAT_ID's; read back, the entry splits into the
// same per-expert statistics, and the expert of count 0 weighs its columns equally.
func TestImatrixExperts(t *testing.T) {
	const cols = 4
	s := &Stats{Kind: "gquant", Meta: Meta{Ctx: 8, Chunks: 2, CorpusName: "c.txt"}}
	add := func(name string, count int64, base float64) {
		ls := &LinearStats{Weight: name, Cols: cols, Count: count, Sum2: make([]float64, cols)}
		for j := range ls.Sum2 {
			if count > 0 {
				ls.Sum2[j] = base + float64(j)
			}
		}
		s.Linear = append(s.Linear, ls)
	}
	add("blk.0.ffn_gate_inp.weight", 16, 1)
	for e, c := range []int64{10, 0, 6} { // expert 1: no token routed to it
		add(ExpertWeight("blk.0.ffn_down_exps.weight", e), c, float64(10*(e+1)))
	}
	s.index()
	m, err := s.Imatrix(false)
	if err != nil {
		t.Fatal(err)
	}
	e := m.Entry("blk.0.ffn_down_exps.weight")
	if len(m.Entries) != 2 || e == nil || !slices.Equal(e.Counts, []int64{10, 0, 6}) ||
		!slices.Equal(e.Sum2, []float32{10, 11, 12, 13, 0, 0, 0, 0, 30, 31, 32, 33}) {
		t.Fatalf("entries %+v", m.Entries)
	}
	path := filepath.Join(t.TempDir(), "m.imatrix.gguf")
	if err := imatrix.WriteGGUF(path, m); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range s.Linear {
		got := back.LinearFor(ls.Weight)
		if got == nil || got.Count != ls.Count || !slices.Equal(got.Sum2, ls.Sum2) {
			t.Errorf("%s: read back %+v, want %+v", ls.Weight, got, ls)
		}
	}
	if imp := back.Importance(ExpertWeight("blk.0.ffn_down_exps.weight", 1)); !slices.Equal(imp, []float32{1, 1, 1, 1}) {
		t.Errorf("unreached expert's importance %v, want llama-quantize's 1s", imp)
	}
	if imp := back.Importance(ExpertWeight("blk.0.ffn_down_exps.weight", 2)); !slices.Equal(imp, []float32{5, 31.0 / 6, 32.0 / 6, 5.5}) {
		t.Errorf("expert 2's importance %v", imp)
	}
	if un := back.UnreachedExperts(); !slices.Equal(un, []string{"blk.0.ffn_down_exps.weight#1"}) {
		t.Errorf("unreached %v", un)
	}
	// A stack whose experts' statistics are not all there is refused, naming the gap.
	s.Linear = slices.Delete(s.Linear, 2, 3)
	s.index()
	if _, err := s.Imatrix(false); err == nil {
		t.Error("a stack without expert 1's statistics converted")
	}
}
