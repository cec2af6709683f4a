package imatrix

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Two imatrix files written by our writer merge to the float32 sums (input after input) and
// integer counts computed here, with the union of entries, a dense count broadcast to an expert
// stack, Σx kept only where every input has it, and llama.cpp's chunk count.
func TestMergeSums(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.ExpFloat64() * 100)
		}
		return v
	}
	a := &Matrix{ChunkCount: 3, ChunkSize: 64, Datasets: []string{"a.txt"}, Entries: []Entry{
		{Name: "blk.0.attn_q.weight", Sum2: vals(32), Sum: vals(32), Counts: []int64{192}},
		{Name: "blk.0.ffn_up_exps.weight", Sum2: vals(16), Counts: []int64{100}},
		{Name: "only.in.a", Sum2: vals(8), Counts: []int64{192}},
	}}
	b := &Matrix{ChunkCount: 5, ChunkSize: 64, Datasets: []string{"b.txt", "c.txt"}, Entries: []Entry{
		{Name: "blk.0.attn_q.weight", Sum2: vals(32), Counts: []int64{320}},
		{Name: "blk.0.ffn_up_exps.weight", Sum2: vals(16), Counts: []int64{7, 9}}, // 2 experts of 8 columns
		{Name: "only.in.b", Sum2: vals(8), Sum: vals(8), Counts: []int64{320}},
	}}
	dir := t.TempDir()
	var ms []*Matrix
	var names []string
	for i, m := range []*Matrix{a, b} {
		p := filepath.Join(dir, []string{"a.gguf", "b.gguf"}[i])
		if err := WriteGGUF(p, m); err != nil {
			t.Fatal(err)
		}
		back, err := Read(p)
		if err != nil {
			t.Fatal(err)
		}
		ms, names = append(ms, back), append(names, p)
	}
	got, err := Merge(ms, names)
	if err != nil {
		t.Fatal(err)
	}
	if got.ChunkSize != 64 || got.ChunkCount != (192+320)/64 || !slices.Equal(got.Datasets, []string{"a.txt", "b.txt", "c.txt"}) || got.Legacy {
		t.Errorf("metadata: %d chunks of %d, datasets %q, legacy %v", got.ChunkCount, got.ChunkSize, got.Datasets, got.Legacy)
	}
	var gotNames []string
	for _, e := range got.Entries {
		gotNames = append(gotNames, e.Name)
	}
	if want := []string{"blk.0.attn_q.weight", "blk.0.ffn_up_exps.weight", "only.in.a", "only.in.b"}; !slices.Equal(gotNames, want) {
		t.Fatalf("entries %q, want %q", gotNames, want)
	}
	sum := func(x, y []float32) []float32 {
		out := make([]float32, len(x))
		for i := range x {
			var s float32 // llama.cpp's std::vector<float> starts at 0.0f
			s += x[i]
			s += y[i]
			out[i] = s
		}
		return out
	}
	q := got.Entry("blk.0.attn_q.weight")
	if !slices.Equal(q.Sum2, sum(a.Entries[0].Sum2, b.Entries[0].Sum2)) || !slices.Equal(q.Counts, []int64{512}) || q.Sum != nil {
		t.Errorf("attn_q: counts %v, Σx kept %v, or other sums", q.Counts, q.Sum != nil)
	}
	x := got.Entry("blk.0.ffn_up_exps.weight")
	if !slices.Equal(x.Sum2, sum(a.Entries[1].Sum2, b.Entries[1].Sum2)) || !slices.Equal(x.Counts, []int64{107, 109}) {
		t.Errorf("experts: counts %v (want the dense 100 broadcast, plus 7 and 9)", x.Counts)
	}
	if e := got.Entry("only.in.b"); !slices.Equal(e.Sum2, b.Entries[2].Sum2) || !slices.Equal(e.Sum, b.Entries[2].Sum) {
		t.Error("only.in.b: not carried over as it is")
	}

	// Refusals: chunk sizes, row lengths.
	c := *b
	c.ChunkSize = 32
	if _, err := Merge([]*Matrix{a, &c}, []string{"a.gguf", "c.gguf"}); err == nil || !strings.Contains(err.Error(), "c.gguf: imatrix.chunk_size: 32, but 64 in a.gguf") {
		t.Errorf("other chunk size: %v", err)
	}
	d := &Matrix{ChunkSize: 64, Entries: []Entry{{Name: "blk.0.attn_q.weight", Sum2: vals(16), Counts: []int64{64}}}}
	if _, err := Merge([]*Matrix{a, d}, []string{"a.gguf", "d.gguf"}); err == nil || !strings.Contains(err.Error(), "d.gguf: blk.0.attn_q.weight.in_sum2: 16 values, 32 in the inputs before it") {
		t.Errorf("other row length: %v", err)
	}
}

// Merging llama-imatrix's legacy file with its GGUF file gives, value for value, what
// llama-imatrix --in-file dat,gguf -c 128 wrote (testdata/README.md).
func TestMergeAgreesWithLlama(t *testing.T) {
	var ms []*Matrix
	names := []string{"testdata/stories260k.imatrix.dat", "testdata/stories260k.imatrix.gguf"}
	for _, p := range names {
		m, err := Read(p)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	got, err := Merge(ms, names)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Read("testdata/stories260k.merged.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if got.ChunkCount != want.ChunkCount || got.ChunkSize != want.ChunkSize || !slices.Equal(got.Datasets, want.Datasets) || len(got.Entries) != len(want.Entries) {
		t.Fatalf("%d chunks of %d, datasets %q, %d entries; llama.cpp %d of %d, %q, %d", got.ChunkCount, got.ChunkSize, got.Datasets, len(got.Entries),
			want.ChunkCount, want.ChunkSize, want.Datasets, len(want.Entries))
	}
	for i, w := range want.Entries {
		g := got.Entries[i]
		if g.Name != w.Name || !slices.Equal(g.Sum2, w.Sum2) || !slices.Equal(g.Counts, w.Counts) {
			t.Fatalf("%s: differs from llama.cpp's merge (counts %v, llama.cpp %v)", w.Name, g.Counts, w.Counts)
		}
	}
	// Legacy inputs alone stay legacy: the sums and ncall add, the importances are the means.
	only, err := Merge([]*Matrix{ms[0], ms[0]}, []string{names[0], names[0]})
	if err != nil {
		t.Fatal(err)
	}
	if !only.Legacy || only.ChunkCount != 2*ms[0].ChunkCount {
		t.Errorf("legacy merge: legacy %v, %d chunks", only.Legacy, only.ChunkCount)
	}
	for _, e := range ms[0].Entries {
		a, b := only.Importance(e.Name), ms[0].Importance(e.Name)
		if !slices.Equal(a, b) {
			t.Fatalf("%s: the importances of a file merged with itself changed", e.Name)
		}
	}
}
