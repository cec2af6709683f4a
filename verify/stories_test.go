package verify_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/verify"
)

const (
	stories = "../testdata/models/stories260k"
	evalTxt = "../testdata/corpora/tinystories-eval.txt"
)

// runStories verifies artifact against stories260k's bf16 checkpoint over 4 windows of 128 tokens.
func runStories(t *testing.T, artifact string) *verify.Report {
	t.Helper()
	r, err := verify.Run(verify.Options{Artifact: artifact, Ref: stories, Corpus: evalTxt, Ctx: 128, Chunks: 4,
		Gen: 16, LayerSNR: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func convertStories(t *testing.T, scheme string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), scheme+".gguf")
	if _, err := convert.Convert(stories, out, convert.Options{Scheme: scheme, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStories260k(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the model")
	}
	if _, err := os.Stat(evalTxt); err != nil {
		t.Skip("no evaluation corpus:", err)
	}
	self := runStories(t, stories)
	if self.KL.Mean != 0 || self.KL.Max != 0 || self.Top1 != 1 || !self.Logits.Identical || self.Greedy.Exact != self.Greedy.Prompts {
		t.Errorf("bf16 against itself: KL %g/%g, top-1 %g, identical %v, greedy %d/%d", self.KL.Mean, self.KL.Max,
			self.Top1, self.Logits.Identical, self.Greedy.Exact, self.Greedy.Prompts)
	}
	if self.TokensScored != 4*(128-1-64) {
		t.Errorf("scored %d tokens, want %d", self.TokensScored, 4*63)
	}
	q8 := runStories(t, convertStories(t, "q8_0"))
	q4 := runStories(t, convertStories(t, "q4_0"))
	t.Logf("q8_0: SNR %v dB, PSNR %v, KL %.6f, top-1 %.4f, bpw %.3f", q8.Logits.SNR, q8.Logits.PSNR, q8.KL.Mean, q8.Top1, q8.Artifact.BPW)
	t.Logf("q4_0: SNR %v dB, PSNR %v, KL %.6f, top-1 %.4f, bpw %.3f", q4.Logits.SNR, q4.Logits.PSNR, q4.KL.Mean, q4.Top1, q4.Artifact.BPW)
	if !(float64(q8.Logits.SNR) > 30) {
		t.Errorf("q8_0 logits SNR %v dB, want > 30", q8.Logits.SNR)
	}
	if !(q4.Logits.SNR < q8.Logits.SNR) || !(q4.KL.Mean > q8.KL.Mean) {
		t.Errorf("q4_0 (SNR %v, KL %g) should be further than q8_0 (SNR %v, KL %g)", q4.Logits.SNR, q4.KL.Mean, q8.Logits.SNR, q8.KL.Mean)
	}
	for _, l := range q8.Layers {
		if math.IsNaN(float64(l.SNR)) || l.SNR < 20 {
			t.Errorf("q8_0 layer %d SNR %v", l.Index, l.SNR)
		}
	}
	if !(q4.Artifact.BPWLinear < q8.Artifact.BPWLinear) {
		t.Errorf("bpw_linear q4_0 %g, q8_0 %g", q4.Artifact.BPWLinear, q8.Artifact.BPWLinear)
	}
}

// Benchmarks over 8 windows of 256 tokens of stories260k, one thread: the bare forward passes of
// both models (the floor), verify with the live reference, and verify with a stored one.
const benchChunks, benchCtx = 8, 256

func benchOpts(b *testing.B, artifact string) verify.Options {
	if _, err := os.Stat(evalTxt); err != nil {
		b.Skip("no evaluation corpus")
	}
	return verify.Options{Artifact: artifact, Ref: stories, Corpus: evalTxt, Ctx: benchCtx, Chunks: benchChunks, Threads: 1}
}

func BenchmarkForwardOnly(b *testing.B) {
	o := benchOpts(b, stories)
	m, err := verify.OpenRuntime(stories, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	text, _ := os.ReadFile(o.Corpus)
	toks := m.Tokenizer().Encode(string(text), true)[:benchChunks*benchCtx]
	b.ResetTimer()
	for range b.N {
		for c := 0; c < benchChunks; c++ {
			m.Begin(benchCtx)
			if _, _, err := m.Eval(toks[c*benchCtx:(c+1)*benchCtx], true, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchChunks*benchCtx), "ns/token")
}

func BenchmarkVerifyLive(b *testing.B) {
	o := benchOpts(b, stories)
	for range b.N {
		if _, err := verify.Run(o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchChunks*benchCtx), "ns/token")
}

func BenchmarkVerifyStored(b *testing.B) {
	o := benchOpts(b, stories)
	o.SaveRef = filepath.Join(b.TempDir(), "ref.kld")
	if _, err := verify.Run(o); err != nil {
		b.Fatal(err)
	}
	o.RefLogits, o.SaveRef, o.Ref, o.Corpus, o.Ctx = o.SaveRef, "", "", "", 0
	b.ResetTimer()
	for range b.N {
		if _, err := verify.Run(o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchChunks*benchCtx), "ns/token")
}

// TestAgainstLlamaPerplexity compares verify on gquant's q4_0 GGUF of stories260k with what
// llama-perplexity --kl-divergence printed for the same file, text and windows (64 tokens, 4
// windows; testdata/README.md): mean KL and same top-1 within 10 %, with llama.cpp's stored bf16
// reference and with the live bf16 checkpoint. It also checks that the corpus tokenizes to the
// tokens llama.cpp stored.
func TestAgainstLlamaPerplexity(t *testing.T) {
	if _, err := os.Stat(evalTxt); err != nil {
		t.Skip("no evaluation corpus:", err)
	}
	const base = "testdata/stories260k-bf16-c64.kld"
	const llamaKL, llamaTop1 = 0.082723, 0.87903
	k, err := verify.OpenKLD(base)
	if err != nil {
		t.Fatal(err)
	}
	k.Close()
	m, err := verify.OpenRuntime(stories, 1)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(evalTxt)
	toks := m.Tokenizer().Encode(string(text), true)
	m.Close()
	for i, tk := range k.Tokens {
		if toks[i] != tk {
			t.Fatalf("token %d: %d, llama.cpp stored %d", i, toks[i], tk)
		}
	}
	q4 := convertStories(t, "q4_0")
	for _, o := range []verify.Options{
		{Artifact: q4, RefLogits: base, Threads: 1},
		{Artifact: q4, Ref: stories, Corpus: evalTxt, Ctx: 64, Chunks: 4, Threads: 1},
	} {
		r, err := verify.Run(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: KL %.6f (llama.cpp %.6f), top-1 %.5f (%.5f)", r.Protocol.KL, r.KL.Mean, llamaKL, r.Top1, llamaTop1)
		if math.Abs(r.KL.Mean/llamaKL-1) > 0.10 || math.Abs(r.Top1/llamaTop1-1) > 0.10 {
			t.Errorf("%s reference: KL %.6f, top-1 %.5f; llama-perplexity %.6f, %.5f", r.Protocol.KL, r.KL.Mean, r.Top1, llamaKL, llamaTop1)
		}
	}
}
