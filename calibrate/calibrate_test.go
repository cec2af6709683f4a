package calibrate

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/imatrix"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
)

// Test inputs: the repository's copy of stories260k and the head of the calibration corpus
// (testdata/README.md).
const (
	model260k = "../testdata/models/stories260k"
	corpus    = "testdata/calib-head.txt"
	llamaGGUF = "testdata/stories260k.imatrix.gguf"
	llamaDat  = "testdata/stories260k.imatrix.dat"
	llamaF32  = "testdata/stories260k.imatrix-f32attn.gguf"
	// stories3m lives outside the repository; its test skips when it is absent.
	model3m    = "../testdata/models/stories3m"
	llamaF32s3 = "testdata/stories3m.imatrix-f32attn.gguf"
)

// calib runs Calibrate on stories260k with one thread.
func calib(t *testing.T, o Options) *Result {
	t.Helper()
	if o.Corpus == "" {
		o.Corpus = corpus
	}
	o.Threads = max(o.Threads, 1)
	res, err := Calibrate(model260k, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// compareSum2 returns the largest relative difference between our Σx² and those of a
// llama-imatrix file, over every weight the file holds (and over the weights the attention
// does not feed: blk.0's q, k and v), checking that the counts agree.
func compareSum2(t *testing.T, s *stats.Stats, file string) (all, preAttention float64) {
	t.Helper()
	ref, err := imatrix.Read(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ref.Entries {
		ls := s.LinearFor(e.Name)
		if ls == nil {
			t.Fatalf("%s: no statistics for %s", file, e.Name)
		}
		if ls.Count != e.Counts[0] {
			t.Errorf("%s: %s: count %d, llama.cpp %d", file, e.Name, ls.Count, e.Counts[0])
		}
		for j, v := range e.Sum2 {
			d := math.Abs(ls.Sum2[j]-float64(v)) / float64(v)
			all = math.Max(all, d)
			if strings.HasPrefix(e.Name, "blk.0.attn_") && !strings.HasPrefix(e.Name, "blk.0.attn_output") {
				preAttention = math.Max(preAttention, d)
			}
		}
	}
	return all, preAttention
}

// Σx² per input column agrees with llama-imatrix's on the same text and chunking (4 chunks of
// 128 tokens; llama.cpp ran an F32 GGUF of the same weights and sums in float32): to float
// rounding against a run with float32 attention, and within the effect of fp16 attention
// against llama.cpp's defaults. The counts and entry names are llama.cpp's, and our imatrix
// file reads back to the same importances.
func TestImatrixAgreesWithLlama(t *testing.T) {
	res := calib(t, Options{Ctx: 128, Tokens: 512})
	if res.Tokens != 512 || res.Stats.Meta.Chunks != 4 || res.Passes != 1 {
		t.Errorf("tokens %d chunks %d passes %d, want 512, 4, 1", res.Tokens, res.Stats.Meta.Chunks, res.Passes)
	}
	all, pre := compareSum2(t, res.Stats, llamaF32)
	t.Logf("Σx² against llama-imatrix (f32 attention): max relative difference %.3g", all)
	if all > 1e-5 {
		t.Errorf("Σx² against llama-imatrix (f32 attention): max relative difference %.3g > 1e-5", all)
	}
	all, pre = compareSum2(t, res.Stats, llamaGGUF)
	t.Logf("Σx² against llama-imatrix (defaults: fp16 attention): max relative difference %.3g (%.3g before attention)", all, pre)
	if all > 3e-3 || pre > 1e-5 {
		t.Errorf("Σx² against llama-imatrix (defaults): max relative difference %.3g > 3e-3 or %.3g > 1e-5 before attention", all, pre)
	}
	ref, err := imatrix.Read(llamaF32)
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "i.gguf")
	if err := res.Stats.WriteImatrix(path, false); err != nil {
		t.Fatal(err)
	}
	got, err := imatrix.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var gotNames, wantNames []string
	for _, e := range got.Entries {
		gotNames = append(gotNames, e.Name)
	}
	for _, e := range ref.Entries {
		wantNames = append(wantNames, e.Name)
	}
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("imatrix entries %v, llama.cpp's %v", gotNames, wantNames)
	}
	if got.ChunkCount != 4 || got.ChunkSize != 128 || !slices.Equal(got.Datasets, []string{"calib-head.txt"}) {
		t.Errorf("imatrix metadata %d chunks of %d, datasets %q", got.ChunkCount, got.ChunkSize, got.Datasets)
	}
	for _, n := range wantNames {
		a, b := got.Importance(n), ref.Importance(n)
		for j := range a {
			if math.Abs(float64(a[j]-b[j])) > 1e-5*float64(b[j]) {
				t.Fatalf("%s: importance[%d] %g, llama.cpp %g", n, j, a[j], b[j])
			}
		}
	}
	// --process-output adds output.weight (the tied embedding's input).
	if m, _ := res.Stats.Imatrix(true); m.Entry("output.weight") == nil || len(m.Entries) != 36 {
		t.Errorf("Imatrix(true) lacks output.weight or has %d entries", len(m.Entries))
	}
}

// The same on stories3m (4 layers, hidden 256, untied output).
func TestImatrixAgreesWithLlamaStories3m(t *testing.T) {
	if _, err := os.Stat(model3m); err != nil {
		t.Skip("stories3m is not there:", err)
	}
	res, err := Calibrate(model3m, Options{Corpus: corpus, Ctx: 128, Tokens: 512, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := compareSum2(t, res.Stats, llamaF32s3)
	t.Logf("stories3m: Σx² against llama-imatrix (f32 attention): max relative difference %.3g", all)
	if all > 1e-5 {
		t.Errorf("stories3m: max relative difference %.3g > 1e-5", all)
	}
}

// inputs captures every linear layer's input with a hook of the test's own, in float64.
func inputs(t *testing.T, ctx, tokens int) (map[string][][]float64, *arch.Spec) {
	t.Helper()
	got := map[string][][]float64{}
	h := &runtime.Hooks{LinearInput: func(w string, x []float32, n, cols int) {
		for r := 0; r < n; r++ {
			row := make([]float64, cols)
			for j := range row {
				row[j] = float64(x[r*cols+j])
			}
			got[w] = append(got[w], row)
		}
	}}
	m, err := runtime.Load(model260k, runtime.Options{Threads: 1, Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	text, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	// The chunking of llama-imatrix, spelled out: BOS + text, chunk starts overwritten by BOS.
	ids := append([]int{m.Tokenizer().BOS()}, m.Tokenizer().Encode(string(text), false)...)
	st := m.NewState(ctx)
	for s := 0; s < tokens; s += ctx {
		chunk := slices.Clone(ids[s : s+ctx])
		chunk[0] = m.Tokenizer().BOS()
		st.Reset()
		if _, err := m.Eval(st, chunk, true); err != nil {
			t.Fatal(err)
		}
	}
	return got, m.Spec()
}

// Σx², Σx, max|x|, counts and Hessians equal a naive float64 computation over inputs captured
// independently; followers (k, v, up) share their leader's sums and Hessian.
func TestSumsAndHessians(t *testing.T) {
	const ctx, tokens = 64, 128
	res := calib(t, Options{Ctx: ctx, Tokens: tokens, Hessian: true, Threads: 2})
	xs, _ := inputs(t, ctx, tokens)
	s := res.Stats
	if len(s.Linear) != 36 {
		t.Fatalf("%d linear entries, want 36", len(s.Linear))
	}
	for _, ls := range s.Linear {
		rows := xs[ls.Weight]
		if int64(len(rows)) != ls.Count || len(rows) != tokens {
			t.Fatalf("%s: count %d, captured %d rows", ls.Weight, ls.Count, len(rows))
		}
		c := ls.Cols
		h, n, err := s.Hessian(ls.Weight)
		if err != nil || h == nil || n != c {
			t.Fatalf("%s: no Hessian of %d columns (%v)", ls.Weight, c, err)
		}
		for i := 0; i < c; i++ {
			var s2, s1, am float64
			for _, r := range rows {
				s2 += r[i] * r[i]
				s1 += r[i]
				am = math.Max(am, math.Abs(r[i]))
			}
			if !close(ls.Sum2[i], s2, 1e-12) || !close(ls.Sum[i], s1, 1e-9) || float64(ls.AbsMax[i]) != am {
				t.Fatalf("%s[%d]: Σx² %g Σx %g max %g, want %g %g %g", ls.Weight, i, ls.Sum2[i], ls.Sum[i], ls.AbsMax[i], s2, s1, am)
			}
			// The Hessian is that of the inputs rounded to bf16 (kernels.AddGram), summed in
			// float32 over blocks of at most 256 tokens and in float64 across them: each block's
			// error is at most 256·2⁻²⁴·Σ|xᵢxⱼ| ≤ 1.53e-5·√(HᵢᵢHⱼⱼ) (Cauchy–Schwarz), a bound
			// that does not vanish where Hᵢⱼ cancels.
			for j := 0; j < c; j++ {
				var hij, hii, hjj float64
				for _, r := range rows {
					ri, rj := bf16(r[i]), bf16(r[j])
					hij += ri * rj
					hii += ri * ri
					hjj += rj * rj
				}
				if math.Abs(h[i*c+j]-hij) > 256*0x1p-24*math.Sqrt(hii*hjj) {
					t.Fatalf("%s: H[%d,%d] = %g, want %g", ls.Weight, i, j, h[i*c+j], hij)
				}
			}
		}
	}
	if l := s.LinearFor("blk.2.attn_v.weight"); l.SharesInputOf != "blk.2.attn_q.weight" || l.Hessian != nil {
		t.Errorf("attn_v shares %q, own Hessian %v", l.SharesInputOf, l.Hessian != nil)
	}
}

// bf16 rounds x to 8 significant bits, ties to even (0 below 2⁻⁵⁰ in magnitude): what the
// Hessian multiplies.
func bf16(x float64) float64 {
	if math.Abs(x) < 0x1p-50 {
		return 0
	}
	m, e := math.Frexp(x) // |m| in [0.5, 1)
	return math.Ldexp(math.RoundToEven(m*256), e-8)
}

// close compares with a relative tolerance (absolute near zero).
func close(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b))
}

// Streaming Hessians to the file with a tiny memory budget takes one pass per Hessian and gives
// the same bytes as an unbounded run, and the file reads back to the in-memory statistics.
func TestStreamedHessiansAndRoundTrip(t *testing.T) {
	dir := t.TempDir()
	o := Options{Ctx: 64, Tokens: 128, Hessian: true}
	mem := calib(t, o)

	o.Output, o.HessianMemory = filepath.Join(dir, "a.stats"), 1
	streamed := calib(t, o)
	if streamed.Passes != 21 { // 5 layers × (q, o, gate, down) + output
		t.Errorf("%d passes, want 21", streamed.Passes)
	}
	o.Output, o.HessianMemory = filepath.Join(dir, "b.stats"), 0
	if r := calib(t, o); r.Passes != 1 {
		t.Errorf("%d passes with room for every Hessian", r.Passes)
	}
	if err := stats.Write(filepath.Join(dir, "c.stats"), mem.Stats); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.stats"))
	for _, f := range []string{"b.stats", "c.stats"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); !bytes.Equal(a, b) {
			t.Errorf("%s differs from the streamed file", f)
		}
	}

	got, err := stats.Read(filepath.Join(dir, "a.stats"))
	if err != nil {
		t.Fatal(err)
	}
	want := mem.Stats
	if !reflect.DeepEqual(got.Meta, want.Meta) || got.Kind != "gquant" {
		t.Errorf("meta %+v, want %+v", got.Meta, want.Meta)
	}
	if got.Meta.CorpusSHA256 != "a9c1f05561f29b8edd7e7b63fbe6175d3abcd41052917e90b97209fdfe5cce12" {
		t.Errorf("corpus sha256 %s", got.Meta.CorpusSHA256)
	}
	if len(got.Linear) != len(want.Linear) || len(got.Acts) != len(want.Acts) {
		t.Fatalf("%d/%d linear, %d/%d activations", len(got.Linear), len(want.Linear), len(got.Acts), len(want.Acts))
	}
	for i, w := range want.Linear {
		g := got.Linear[i]
		if g.Weight != w.Weight || g.Count != w.Count || g.SharesInputOf != w.SharesInputOf ||
			!slices.Equal(g.Sum2, w.Sum2) || !slices.Equal(g.Sum, w.Sum) || !slices.Equal(g.AbsMax, w.AbsMax) {
			t.Errorf("%s: differs after the round trip", w.Weight)
		}
		// The file's Hessians stay in the file until asked for.
		if g.Hessian != nil {
			t.Errorf("%s: Hessian decoded at read time", w.Weight)
		}
		gh, _, err := got.Hessian(w.Weight)
		wh, _, _ := want.Hessian(w.Weight)
		if err != nil || !slices.Equal(gh, wh) || got.HasHessian(w.Weight) != (wh != nil) {
			t.Errorf("%s: Hessian differs after the round trip (%v)", w.Weight, err)
		}
		if !slices.Equal(got.Importance(w.Weight), want.Importance(w.Weight)) {
			t.Errorf("%s: importance differs", w.Weight)
		}
	}
	for i, w := range want.Acts {
		g := got.Acts[i]
		if g.Name != w.Name || g.Min != w.Min || g.Max != w.Max || g.Hist.Start != w.Hist.Start ||
			g.Hist.Width != w.Hist.Width || !slices.Equal(g.Hist.Counts, w.Hist.Counts) {
			t.Errorf("%s: differs after the round trip", w.Name)
		}
	}
	spec := mem.Spec
	if err := got.Validate(statsModel(t, spec)); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// llama.cpp's imatrix files (GGUF and .dat) read as statistics with llama-quantize's
// importances, and fit stories260k.
func TestReadLlamaImatrix(t *testing.T) {
	ref, err := imatrix.Read(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	spec := calib(t, Options{Ctx: 32, Tokens: 32}).Spec
	for _, f := range []string{llamaGGUF, llamaDat} {
		s, err := stats.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Linear) != 35 || len(s.Acts) != 0 {
			t.Errorf("%s: %d linear, %d activations", f, len(s.Linear), len(s.Acts))
		}
		for _, e := range ref.Entries {
			a, b := s.Importance(e.Name), ref.Importance(e.Name)
			for j := range b {
				if math.Abs(float64(a[j]-b[j])) > 1e-6*float64(b[j]) {
					t.Fatalf("%s: %s: importance[%d] %g, want %g", f, e.Name, j, a[j], b[j])
				}
			}
		}
		if err := s.Validate(statsModel(t, spec)); err != nil {
			t.Errorf("%s: Validate: %v", f, err)
		}
		if _, err := quantize.ActivationEncodings(s, quantize.RangeOptions{}); err == nil || !strings.Contains(err.Error(), "no activation statistics") {
			t.Errorf("%s: activation encodings from an imatrix: %v", f, err)
		}
	}
}

// Statistics of the wrong model, with a missing tensor or with a NaN are rejected with errors
// naming the file and the tensor; WriteStats refuses bad statistics and leaves nothing.
func TestValidateRejects(t *testing.T) {
	res := calib(t, Options{Ctx: 64, Tokens: 64})
	dir := t.TempDir()
	path := filepath.Join(dir, "s.stats")
	if err := stats.Write(path, res.Stats); err != nil {
		t.Fatal(err)
	}
	spec := res.Spec
	other := *spec
	other.Layers = 6
	otherWide := *spec
	otherWide.Intermediate = 256

	load := func() *stats.Stats {
		s, err := stats.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	llama := func() *stats.Stats {
		s, err := stats.Read(llamaGGUF)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name string
		s    *stats.Stats
		spec *arch.Spec
		want []string
	}{
		{"wrong model", load(), &other, []string{path + ": model: collected on stories260k", "5 layers", "6 layers"}},
		{"imatrix of another model", llama(), &other, []string{llamaGGUF + ": blk.5.attn_q.weight: missing"}},
		{"imatrix with other widths", llama(), &otherWide, []string{"blk.0.ffn_down.weight: statistics of 172 columns, the model's weight has 256"}},
		{"missing weight", func() *stats.Stats {
			s := load()
			s.Linear = slices.DeleteFunc(s.Linear, func(l *stats.LinearStats) bool { return l.Weight == "blk.2.ffn_up.weight" })
			s.Reindex()
			return s
		}(), spec, []string{path + ": blk.2.ffn_up.weight: missing"}},
		{"missing activation", func() *stats.Stats {
			s := load()
			s.Acts = slices.DeleteFunc(s.Acts, func(a *stats.ActStats) bool { return a.Name == "blk.3.ffn_act" })
			s.Reindex()
			return s
		}(), spec, []string{path + ": activation blk.3.ffn_act: missing"}},
		{"version 1 file with an unknown activation", func() *stats.Stats {
			s := load()
			s.Version = 1
			s.Act("blk.3.ffn_act").Name = "blk.3.ffn_nope"
			s.Reindex()
			return s
		}(), spec, []string{path + ": activation blk.3.ffn_nope: not an activation of this model"}},
		{"NaN", func() *stats.Stats {
			s := load()
			s.LinearFor("blk.1.attn_output.weight").Sum2[3] = math.NaN()
			return s
		}(), spec, []string{path + ": blk.1.attn_output.weight: Σx²[3] = NaN"}},
		{"NaN range", func() *stats.Stats {
			s := load()
			s.Act("blk.0.q").Max = float32(math.NaN())
			return s
		}(), spec, []string{path + ": blk.0.q: range"}},
	}
	// A version 1 file held fewer points: missing ones are fine there, and only there.
	old := load()
	old.Version = 1
	old.Acts = slices.DeleteFunc(old.Acts, func(a *stats.ActStats) bool { return strings.HasSuffix(a.Name, "_softmax") })
	old.Reindex()
	if err := old.Validate(statsModel(t, spec)); err != nil {
		t.Errorf("version 1 statistics without the softmax points: %v", err)
	}
	for _, c := range cases {
		err := c.s.Validate(statsModel(t, c.spec))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line", c.name)
		}
	}

	// A NaN is refused by the writer, and a file that holds one by the reader.
	bad := load()
	bad.LinearFor("blk.0.ffn_down.weight").Sum[7] = math.Inf(1)
	out := filepath.Join(t.TempDir(), "bad.stats")
	if err := stats.Write(out, bad); err == nil || !strings.Contains(err.Error(), "blk.0.ffn_down.weight: Σx[7] = +Inf") {
		t.Errorf("WriteStats of an Inf: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
		t.Errorf("WriteStats left %d files", len(entries))
	}
	sw, err := stats.Create(out, bad) // bypasses the check
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := stats.Read(out); err == nil || !strings.Contains(err.Error(), out+": blk.0.ffn_down.weight: Σx[7] = +Inf") {
		t.Errorf("ReadStats of an Inf: %v", err)
	}
}

// A corpus shorter than asked is an error naming both counts; a context longer than the
// model's is refused.
func TestCorpusErrors(t *testing.T) {
	_, err := Calibrate(model260k, Options{Corpus: corpus, Ctx: 128, Tokens: 1 << 20, Threads: 1})
	if err == nil || !strings.Contains(err.Error(), "fewer than the 1048576 asked for") || !strings.Contains(err.Error(), corpus+": the corpus has ") {
		t.Errorf("short corpus: %v", err)
	}
	_, err = Calibrate(model260k, Options{Corpus: corpus, Ctx: 1024, Threads: 1})
	if err == nil || !strings.Contains(err.Error(), "ctx: 1024 is longer than the model's context of 512") {
		t.Errorf("long ctx: %v", err)
	}
}

// Chunks follows llama-imatrix (BOS over each chunk's first token, remainder dropped), limits
// to Tokens (last chunk shorter), and samples whole chunks in corpus order with a seed.
func TestChunks(t *testing.T) {
	stream := make([]int, 100)
	for i := range stream {
		stream[i] = 10 + i
	}
	ch, err := Chunks(stream, Chunking{Ctx: 30}, 1, "c")
	if err != nil || len(ch) != 3 || ch[1][0] != 1 || ch[1][1] != 41 || len(ch[2]) != 30 {
		t.Fatalf("full chunks: %v %v", ch, err)
	}
	ch, err = Chunks(stream, Chunking{Ctx: 30, Tokens: 70}, -1, "c")
	if err != nil || len(ch) != 3 || len(ch[2]) != 10 || ch[2][0] != 70 {
		t.Fatalf("limited: %v %v", ch, err)
	}
	if _, err := Chunks(stream, Chunking{Ctx: 30, Tokens: 101}, 1, "c"); err == nil || err.Error() != "c: the corpus has 100 tokens, fewer than the 101 asked for" {
		t.Errorf("short: %v", err)
	}
	if _, err := Chunks(stream[:20], Chunking{Ctx: 30}, 1, "c"); err == nil || !strings.Contains(err.Error(), "20 tokens, fewer than one chunk of 30") {
		t.Errorf("shorter than a chunk: %v", err)
	}
	a, _ := Chunks(stream, Chunking{Ctx: 10, Tokens: 40, Seed: 7}, -1, "c")
	b, _ := Chunks(stream, Chunking{Ctx: 10, Tokens: 40, Seed: 7}, -1, "c")
	c, _ := Chunks(stream, Chunking{Ctx: 10, Tokens: 40, Seed: 8}, -1, "c")
	if len(a) != 4 || !slices.EqualFunc(a, b, slices.Equal) || slices.EqualFunc(a, c, slices.Equal) {
		t.Errorf("seeded samples: %v / %v / %v", a, b, c)
	}
	for i := 1; i < len(a); i++ {
		if a[i][0] <= a[i-1][0] || (a[i][0]-10)%10 != 0 {
			t.Errorf("sampled chunks not whole or not in order: %v", a)
		}
	}
}

// Same inputs, same bytes.
func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a", "b"} {
		calib(t, Options{Ctx: 64, Tokens: 128, Output: filepath.Join(dir, f), Threads: 2})
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a"))
	b, _ := os.ReadFile(filepath.Join(dir, "b"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("two runs gave different statistics files")
	}
}

// llama-quantize accepts our imatrix (opt-in: GQUANT_LLAMA_QUANTIZE=<llama-quantize>,
// GQUANT_IMATRIX_MODEL=<an F32 GGUF of stories260k>, as in formats/imatrix).
func TestLlamaQuantizeAcceptsOurImatrix(t *testing.T) {
	bin, model := os.Getenv("GQUANT_LLAMA_QUANTIZE"), os.Getenv("GQUANT_IMATRIX_MODEL")
	if bin == "" || model == "" {
		t.Skip("set GQUANT_LLAMA_QUANTIZE and GQUANT_IMATRIX_MODEL to run")
	}
	res := calib(t, Options{Ctx: 128, Tokens: 512})
	dir := t.TempDir()
	im := filepath.Join(dir, "i.gguf")
	if err := res.Stats.WriteImatrix(im, false); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--imatrix", im, model, filepath.Join(dir, "q.gguf"), "Q4_K_M").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "loaded 35 importance matrix entries") {
		t.Fatalf("llama-quantize: %v\n%s", err, out)
	}
}

// Files that are not statistics, or malformed ones, are refused with one line naming the file
// and the key or tensor.
func TestReadStatsMalformed(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, kvs []gguf.KV, tensors []gguf.TensorInfo, data [][]byte) string {
		p := filepath.Join(dir, name)
		h := &gguf.Header{KVs: kvs, Tensors: tensors}
		if err := gguf.WriteFile(p, h, func(i int) ([]byte, error) { return data[i], nil }); err != nil {
			t.Fatal(err)
		}
		return p
	}
	model := write("model.gguf", []gguf.KV{{Key: "general.type", Value: "model"}}, nil, nil)
	noKeys := write("nokeys.stats", []gguf.KV{{Key: "general.type", Value: stats.Type}, {Key: "calibration.version", Value: uint32(1)}}, nil, nil)
	// The metadata of a real statistics file with bad tensors.
	good := filepath.Join(dir, "good.stats")
	calib(t, Options{Ctx: 32, Tokens: 32, Output: good})
	gf, err := gguf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	kvs := gf.KVs
	gf.Close()
	badTensors := write("tensors.stats", kvs,
		[]gguf.TensorInfo{{Name: "blk.0.attn_q.weight.in_sum2", Type: gguf.F32, Shape: []uint64{2}}, {Name: "blk.0.q.mystery", Type: gguf.F32, Shape: []uint64{1}}},
		[][]byte{make([]byte, 8), make([]byte, 4)})
	cases := map[string][]string{
		model:      {model + ": general.type: \"model\" is neither"},
		noKeys:     {noKeys + ": calibration.model.name: missing"},
		badTensors: {badTensors + ": ", "blk.0.attn_q.weight.in_sum2: F32 [2], want F64", "blk.0.q.mystery: unknown tensor"},
		corpus:     {corpus + ": "}, // neither GGUF nor a legacy imatrix
	}
	for path, wants := range cases {
		_, err := stats.Read(path)
		if err == nil {
			t.Errorf("%s: accepted", path)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %q lacks %q", path, err, w)
			}
		}
	}
}

// TestHessianReadWhenUsed checks that a statistics file's Hessians are read at use, and that
// a file that changed or vanished since ReadStats gives an error naming it; in both forms of
// the exact Hessians: float64s (two chunks in one fold group) and 128-bit pairs (two groups).
func TestHessianReadWhenUsed(t *testing.T) {
	for _, fold := range []int{0, 1} {
		path := filepath.Join(t.TempDir(), "h.stats")
		calib(t, Options{Ctx: 64, Tokens: 128, Hessian: true, Output: path, FoldChunks: fold})
		s, err := stats.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		w := s.Linear[0].Weight
		if h, n, err := s.Hessian(w); err != nil || len(h) != n*n || n == 0 {
			t.Fatalf("Hessian(%s): %d values, n %d, %v", w, len(h), n, err)
		}
		// A negative diagonal element (a Σx²) written into the exact triangle: the Hessian
		// read earlier now fails (the file changed), and reading the statistics again rejects
		// the file, naming the tensor.
		gf, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		const tensor = ".hessian_exact"
		i, ok := gf.TensorIndex(w + tensor)
		if !ok {
			t.Fatalf("%s%s not in the file", w, tensor)
		}
		cols := s.Linear[0].Cols
		diag := cols + cols - 1 // the triangle index of element (2, 2): rows 0 and 1 hold c and c−1
		neg := make([]byte, 8)
		off := int64(gf.DataOffset + gf.Tensors[i].Offset)
		if compact := gf.Tensors[i].Type == gguf.F64; compact != (fold == 0) {
			t.Fatalf("fold group %d: %s is %v", fold, w+tensor, gf.Tensors[i].Type)
		} else if compact {
			off += 8 * int64(diag)
			binary.LittleEndian.PutUint64(neg, math.Float64bits(-1))
		} else {
			off += 16*int64(diag) + 8
			binary.LittleEndian.PutUint64(neg, 1<<63) // the high word's sign bit
		}
		gf.Close()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt(neg, off)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		future := time.Now().Add(time.Hour)
		if err := os.Chtimes(path, future, future); err != nil { // a new stamp even on coarse clocks
			t.Fatal(err)
		}
		if _, _, err := s.Hessian(w); err == nil || !strings.Contains(err.Error(), "changed") || !strings.Contains(err.Error(), path) {
			t.Fatalf("Hessian after the file changed: %v, want an error naming %s", err, path)
		}
		if _, err := stats.Read(path); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s%s[%d]", w, tensor, diag)) ||
			!strings.Contains(err.Error(), "diagonal element 2 is negative") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("ReadStats with a negative diagonal in %s: %v", w+tensor, err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Hessian(w); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("Hessian after the file was removed: %v, want an error naming %s", err, path)
		}
	}
}

// statsModel describes a spec to its statistics (arch.StatsModel), failing the test on error.
func statsModel(t *testing.T, spec *arch.Spec) stats.Model {
	t.Helper()
	m, err := arch.StatsModel("", spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// LinearOnly collects the same linear-input statistics, bit for bit, with no activations.
func TestLinearOnly(t *testing.T) {
	full := calib(t, Options{Ctx: 64, Tokens: 256, Hessian: true, Threads: 2})
	lin := calib(t, Options{Ctx: 64, Tokens: 256, Hessian: true, Threads: 2, LinearOnly: true})
	if len(lin.Stats.Acts) != 0 || len(full.Stats.Acts) == 0 {
		t.Fatalf("activations: %d with LinearOnly, %d without", len(lin.Stats.Acts), len(full.Stats.Acts))
	}
	if len(lin.Stats.Linear) != len(full.Stats.Linear) {
		t.Fatalf("%d linear entries, want %d", len(lin.Stats.Linear), len(full.Stats.Linear))
	}
	for i, a := range full.Stats.Linear {
		b := lin.Stats.Linear[i]
		if a.Weight != b.Weight || a.Count != b.Count || len(a.Sum2) != len(b.Sum2) || len(a.Hessian) != len(b.Hessian) {
			t.Fatalf("%s: entries differ", a.Weight)
		}
		for j := range a.Sum2 {
			if a.Sum2[j] != b.Sum2[j] || a.Sum[j] != b.Sum[j] || a.AbsMax[j] != b.AbsMax[j] {
				t.Fatalf("%s[%d]: sums differ", a.Weight, j)
			}
		}
		for j := range a.Hessian {
			if a.Hessian[j] != b.Hessian[j] {
				t.Fatalf("%s: H[%d] differs", a.Weight, j)
			}
		}
	}
}

// TestImatrixExpertsAgreeWithLlama: on the synthetic Mixtral and Qwen3-MoE checkpoints of
// testdata/llamacpp (seed 7), 16 chunks of 256 tokens, gquant's per-expert statistics are
// llama-imatrix's (run on gquant's F16 GGUF, fp16 attention): the same entries (one per stack
// of experts, of one matrix per expert), the same tokens routed to every expert but for the
// few llama.cpp routes otherwise where two experts' logits nearly tie (at most 2 per expert),
// and Σx² within 2e-3 (relative L1 per matrix) plus what those few tokens contribute.
func TestImatrixExpertsAgreeWithLlama(t *testing.T) {
	for _, name := range []string{"tiny-mixtral", "tiny-qwen3moe"} {
		t.Run(name, func(t *testing.T) {
			spec, err := synth.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), name)
			if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
				t.Fatal(err)
			}
			res, err := Calibrate(dir, Options{Corpus: "../testdata/corpora/tinystories-calib.txt", Ctx: 256, Tokens: 4096, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			got, err := res.Stats.Imatrix(false)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := imatrix.Read(filepath.Join("..", "testdata", "llamacpp", name+".llama-imatrix.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Entries) != len(ref.Entries) || got.ChunkCount != ref.ChunkCount {
				t.Fatalf("%d entries of %d chunks, llama-imatrix %d of %d", len(got.Entries), got.ChunkCount, len(ref.Entries), ref.ChunkCount)
			}
			var moved, worst float64
			for _, r := range ref.Entries {
				g := got.Entry(r.Name)
				if g == nil || g.Matrices() != r.Matrices() || g.RowLen() != r.RowLen() {
					t.Fatalf("%s: gquant %+v", r.Name, g)
				}
				n := r.RowLen()
				for x, c := range r.Counts {
					dc := math.Abs(float64(g.Counts[x] - c))
					if dc > 2 {
						t.Errorf("%s: expert %d: %d tokens, llama-imatrix %d", r.Name, x, g.Counts[x], c)
					}
					if strings.Contains(r.Name, "ffn_gate_exps") { // a token moved: one expert less, one more
						moved += dc / 2
					}
					var d, s float64
					for j := x * n; j < (x+1)*n; j++ {
						d += math.Abs(float64(g.Sum2[j] - r.Sum2[j]))
						s += float64(r.Sum2[j])
					}
					worst = math.Max(worst, d/s)
					if d/s > 2e-3+2*dc/float64(c) {
						t.Errorf("%s: matrix %d: Σx² differs by %.3g (relative L1), %d vs %d tokens", r.Name, x, d/s, g.Counts[x], c)
					}
				}
			}
			t.Logf("%s: %g tokens routed otherwise (all layers), Σx² within %.3g", name, moved, worst)
		})
	}
}
