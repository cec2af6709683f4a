package convert

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/verify"
)

// TestGPTQIntoQ4K: --scheme q4_k_m (and q3_k_m) --method gptq on stories3m writes
// llama-quantize's imatrix mix (the same tensor types and bytes per weight as --stats alone),
// every tensor but the linear weights of the blocks (Q4_K and Q6_K; Q3_K, Q4_K and Q5_K) byte
// for byte as --stats alone writes it, and the weights GPTQ chose, which score a lower KL on
// held-out text than llama.cpp's imatrix quantizer (measured with every window of the corpus:
// q4_k_m 0.003519 against 0.005428, q3_k_m 0.010646 against 0.016920, docs/quality.md).
func TestGPTQIntoQ4K(t *testing.T) {
	dir := "../testdata/models/stories3m"
	tmp := t.TempDir()
	statsPath := filepath.Join(tmp, "stats.gguf")
	if _, err := calibrate.Calibrate(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt",
		Ctx: 256, Tokens: 4096, Hessian: true, Threads: 2, Output: statsPath}); err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"q4_k_m", "q3_k_m"} {
		kl := map[string]float64{}
		files := map[string]*gguf.File{}
		for _, m := range []string{MethodImatrix, MethodGPTQ} {
			out := filepath.Join(tmp, scheme+m+".gguf")
			if _, err := Convert(dir, out, Options{Scheme: scheme, Method: m, Stats: statsPath, Threads: 2}); err != nil {
				t.Fatal(err)
			}
			rep, err := verify.Run(verify.Options{Artifact: out, Ref: dir, Corpus: "../testdata/corpora/tinystories-eval.txt", Ctx: 256, Chunks: 12, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			kl[m] = rep.KL.Mean
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			files[m] = f
		}
		t.Logf("%s KL: imatrix %.5f, gptq %.5f (%.2f×)", scheme, kl[MethodImatrix], kl[MethodGPTQ], kl[MethodGPTQ]/kl[MethodImatrix])
		if !(kl[MethodGPTQ] < 0.85*kl[MethodImatrix]) {
			t.Errorf("%s: GPTQ: KL %.5f, not below 0.85× imatrix's %.5f", scheme, kl[MethodGPTQ], kl[MethodImatrix])
		}
		a, b := files[MethodImatrix], files[MethodGPTQ]
		changed := 0
		for i, ti := range a.Tensors {
			tj := b.Tensors[i]
			if ti.Name != tj.Name || ti.Type != tj.Type {
				t.Fatalf("%s: tensor %d: %s %v and %s %v", scheme, i, ti.Name, ti.Type, tj.Name, tj.Type)
			}
			same := bytes.Equal(a.TensorData(i), b.TensorData(i))
			gptq := gptqBlockType(ti.Type) && strings.HasPrefix(ti.Name, "blk.") && !strings.HasSuffix(ti.Name, "_norm.weight")
			if gptq && same || !gptq && !same {
				t.Errorf("%s: %s (%v): GPTQ changed it: %v", scheme, ti.Name, ti.Type, !same)
			}
			if !same {
				changed++
			}
		}
		if changed == 0 {
			t.Errorf("%s: no tensor changed", scheme)
		}
	}
}

// TestGPTQIntoLegacyBlocks: --method gptq with the blocks of 32 (q5_1 on stories260k, whose
// 172-wide ffn_down falls back to F16 and stays as --stats alone writes it) scores a lower KL
// than llama.cpp's imatrix quantizer, the other tensors byte for byte as with --stats alone.
func TestGPTQIntoLegacyBlocks(t *testing.T) {
	dir := "../testdata/models/stories260k"
	tmp := t.TempDir()
	statsPath := filepath.Join(tmp, "stats.gguf")
	if _, err := calibrate.Calibrate(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt",
		Ctx: 256, Tokens: 4096, Hessian: true, Threads: 2, Output: statsPath}); err != nil {
		t.Fatal(err)
	}
	kl := map[string]float64{}
	var files []*gguf.File
	for _, m := range []string{MethodImatrix, MethodGPTQ} {
		out := filepath.Join(tmp, m+".gguf")
		if _, err := Convert(dir, out, Options{Scheme: "q5_1", Method: m, Stats: statsPath, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		rep, err := verify.Run(verify.Options{Artifact: out, Ref: dir, Corpus: "../testdata/corpora/tinystories-eval.txt", Ctx: 256, Chunks: 12, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		kl[m] = rep.KL.Mean
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	t.Logf("stories260k q5_1 KL: imatrix %.5f, gptq %.5f (%.2f×)", kl[MethodImatrix], kl[MethodGPTQ], kl[MethodGPTQ]/kl[MethodImatrix])
	if !(kl[MethodGPTQ] < 0.85*kl[MethodImatrix]) {
		t.Errorf("GPTQ into Q5_1: KL %.5f, not below 0.85× imatrix Q5_1's %.5f", kl[MethodGPTQ], kl[MethodImatrix])
	}
	for i, ti := range files[0].Tensors {
		same := bytes.Equal(files[0].TensorData(i), files[1].TensorData(i))
		gptq := ti.Type == gguf.Q5_1 && strings.HasPrefix(ti.Name, "blk.")
		if gptq == same {
			t.Errorf("%s (%v): GPTQ changed it: %v", ti.Name, ti.Type, !same)
		}
	}
}
