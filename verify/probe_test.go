package verify

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/quantize"
)

// TestProbe: the probe's KL is 0 for a weight put back as it is, positive for a perturbed one,
// the same whatever order the weights come in (the kept residual streams), and what Run
// measures on a GGUF file whose only quantized tensor is that weight (the runtime there
// multiplies Q4_0 blocks by int8 activations, as llama.cpp does, where the probe multiplies
// the decoded float32 weights: they agree within 10 %).
func TestProbe(t *testing.T) {
	dir := "../testdata/models/stories260k"
	corpus := "../testdata/corpora/tinystories-calib.txt"
	const ctx, chunks = 128, 4
	p, err := NewProbe(dir, ProbeOptions{Corpus: corpus, Ctx: ctx, Chunks: chunks, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if c, sha, n, k := p.Windows(); c != "tinystories-calib.txt" || len(sha) != 64 || n != ctx || k != chunks {
		t.Errorf("Windows() = %s %s %d %d", c, sha, n, k)
	}
	m, err := hf.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	weight := func(name string) []float32 {
		w, err := m.Checkpoint.ToFloat32(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// The weights as a GGUF file of F32 with blk.1.ffn_up alone in Q4_0 holds them.
	tmp := t.TempDir()
	out := filepath.Join(tmp, "one.gguf")
	ov, err := convert.ParseOverride(`blk\.1\.ffn_up=q4_0`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := convert.Convert(dir, out, convert.Options{Scheme: "f32", Overrides: []convert.Override{ov}, Threads: 2}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	upQ := make([]float32, 172*64)
	for i, ti := range f.Tensors {
		if ti.Name == "blk.1.ffn_up.weight" {
			codec, _ := quantize.For(gguf.Q4_0)
			codec.Dequantize(upQ, f.TensorData(i))
		}
	}
	up := weight("model.layers.1.mlp.up_proj.weight")
	q := weight("model.layers.0.self_attn.q_proj.weight")
	qP := append([]float32(nil), q...)
	for i := range qP {
		qP[i] *= 1.02
	}
	kl := func(name string, w, orig []float32) float64 {
		v, err := p.KL(name, w, orig)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	same := kl("blk.1.ffn_up.weight", up, up)
	first := kl("blk.1.ffn_up.weight", upQ, up)
	qk := kl("blk.0.attn_q.weight", qP, q)
	again := kl("blk.1.ffn_up.weight", upQ, up)
	t.Logf("KL: unchanged %.3g, ffn_up as Q4_0 %.6g (again %.6g), attn_q × 1.02 %.3g", same, first, again, qk)
	if !(same < 1e-9) || !(first > 1e-4) || !(qk > 0) {
		t.Errorf("KL unchanged %g, Q4_0 %g, scaled %g", same, first, qk)
	}
	if first != again {
		t.Errorf("the same weight gave %g, then %g after another block's", first, again)
	}
	rep, err := Run(Options{Artifact: out, Ref: dir, Corpus: corpus, Ctx: ctx, Chunks: chunks, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Run on the GGUF file: KL %.6g", rep.KL.Mean)
	if math.Abs(rep.KL.Mean/first-1) > 0.1 {
		t.Errorf("the probe measures %g, Run %g on the file", first, rep.KL.Mean)
	}
	if _, err := p.KL("token_embd.weight", up, up); err == nil {
		t.Error("the embedding was probed as a linear weight")
	}
}

// TestProbeEmbeddingAndOutput: on stories3m (untied), the probe's KL of the token embedding
// alone and of the output alone in Q4_K agrees with Run's on GGUF files holding that tensor
// alone in Q4_K (Run multiplies the output's Q4_K blocks by int8 activations; the embedding is
// a lookup either way), and is 0 for the tensor put back as it is.
func TestProbeEmbeddingAndOutput(t *testing.T) {
	dir := "../testdata/models/stories3m"
	corpus := "../testdata/corpora/tinystories-calib.txt"
	const ctx, chunks = 128, 4
	p, err := NewProbe(dir, ProbeOptions{Corpus: corpus, Ctx: ctx, Chunks: chunks, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, err := hf.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, c := range []struct{ gguf, hf, re string }{
		{"token_embd.weight", "model.embed_tokens.weight", `^token_embd=q4_k`},
		{"output.weight", "lm_head.weight", `^output\.weight=q4_k`},
	} {
		orig, err := m.Checkpoint.ToFloat32(c.hf, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "one.gguf")
		ov, err := convert.ParseOverride(c.re)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := convert.Convert(dir, out, convert.Options{Scheme: "f32", Overrides: []convert.Override{ov}, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		q := make([]float32, len(orig))
		for i, ti := range f.Tensors {
			if ti.Name == c.gguf {
				codec, _ := quantize.For(gguf.Q4_K)
				codec.Dequantize(q, f.TensorData(i))
			}
		}
		f.Close()
		same, err := p.KL(c.gguf, orig, orig)
		if err != nil {
			t.Fatal(err)
		}
		kl, err := p.KL(c.gguf, q, orig)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(Options{Artifact: out, Ref: dir, Corpus: corpus, Ctx: ctx, Chunks: chunks, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s in Q4_K: probe %.6g, Run %.6g (unchanged %.3g)", c.gguf, kl, rep.KL.Mean, same)
		if same != 0 || !(kl > 0) || math.Abs(rep.KL.Mean/kl-1) > 0.1 {
			t.Errorf("%s: the probe measures %g (unchanged %g), Run %g on the file", c.gguf, kl, same, rep.KL.Mean)
		}
	}
}
