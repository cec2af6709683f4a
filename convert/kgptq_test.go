package convert

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/verify"
)

// TestGPTQIntoQ4K: --scheme q4_k_m --method gptq on stories3m writes llama-quantize's imatrix
// mix (the same tensor types and bytes per weight as --stats alone), every tensor but the
// linear weights of the blocks (Q4_K and Q6_K) byte for byte as --stats alone writes it, and
// the weights GPTQ chose,
// which score a lower KL on held-out text than llama.cpp's imatrix Q4_K (measured with every
// window of the corpus: 0.003519 against 0.005428, docs/quality.md).
func TestGPTQIntoQ4K(t *testing.T) {
	dir := "../testdata/models/stories3m"
	tmp := t.TempDir()
	statsPath := filepath.Join(tmp, "stats.gguf")
	if _, err := calibrate.Calibrate(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt",
		Ctx: 256, Tokens: 4096, Hessian: true, Threads: 2, Output: statsPath}); err != nil {
		t.Fatal(err)
	}
	kl := map[string]float64{}
	files := map[string]*gguf.File{}
	for _, m := range []string{MethodImatrix, MethodGPTQ} {
		out := filepath.Join(tmp, m+".gguf")
		if _, err := Convert(dir, out, Options{Scheme: "q4_k_m", Method: m, Stats: statsPath, Threads: 2}); err != nil {
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
	t.Logf("q4_k_m KL: imatrix %.5f, gptq %.5f (%.2f×)", kl[MethodImatrix], kl[MethodGPTQ], kl[MethodGPTQ]/kl[MethodImatrix])
	if !(kl[MethodGPTQ] < 0.85*kl[MethodImatrix]) {
		t.Errorf("GPTQ into Q4_K: KL %.5f, not below 0.85× imatrix Q4_K's %.5f", kl[MethodGPTQ], kl[MethodImatrix])
	}
	a, b := files[MethodImatrix], files[MethodGPTQ]
	changed := 0
	for i, ti := range a.Tensors {
		tj := b.Tensors[i]
		if ti.Name != tj.Name || ti.Type != tj.Type {
			t.Fatalf("tensor %d: %s %v and %s %v", i, ti.Name, ti.Type, tj.Name, tj.Type)
		}
		same := bytes.Equal(a.TensorData(i), b.TensorData(i))
		gptq := gptqBlockType(ti.Type) && strings.HasPrefix(ti.Name, "blk.") && !strings.HasSuffix(ti.Name, "_norm.weight")
		if gptq && same || !gptq && !same {
			t.Errorf("%s (%v): GPTQ changed it: %v", ti.Name, ti.Type, !same)
		}
		if !same {
			changed++
		}
	}
	if changed == 0 {
		t.Error("no tensor changed")
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

// TestGPTQExperts: --method gptq rounds each expert of a mixture of experts with its own
// Hessian (the rows routed to it): on tiny-qwen3moe (8 experts, 2 per token) it scores a
// lower KL on held-out text than llama.cpp's imatrix quantizer in q4_0 and q4_k_m; and on a
// 16-expert variant calibrated on 256 tokens, an expert no token reached (Hessian 0) is
// written as llama-quantize writes it with the imatrix (importance 1), byte for byte, while
// the others change.
func TestGPTQExperts(t *testing.T) {
	tmp := t.TempDir()
	calib := func(spec synth.Spec, tokens int) (dir, statsPath string) {
		dir = filepath.Join(tmp, fmt.Sprintf("m%d", tokens))
		if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
			t.Fatal(err)
		}
		statsPath = filepath.Join(tmp, fmt.Sprintf("stats%d.gguf", tokens))
		if _, err := calibrate.Calibrate(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt",
			Ctx: 256, Tokens: tokens, Hessian: true, Threads: 2, Output: statsPath}); err != nil {
			t.Fatal(err)
		}
		return dir, statsPath
	}
	spec, err := synth.Preset("tiny-qwen3moe")
	if err != nil {
		t.Fatal(err)
	}
	dir, statsPath := calib(spec, 4096)
	for _, c := range []struct {
		scheme string
		bound  float64
	}{{"q4_0", 0.8}, {"q4_k_m", 0.95}} {
		kl := map[string]float64{}
		for _, m := range []string{MethodImatrix, MethodGPTQ} {
			out := filepath.Join(tmp, c.scheme+m+".gguf")
			p, err := Convert(dir, out, Options{Scheme: c.scheme, Method: m, Stats: statsPath, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, pt := range p.Tensors {
				if strings.Contains(pt.Name, "_exps.") && m == MethodGPTQ && pt.Method != MethodGPTQ {
					t.Errorf("%s: method %q", pt.Name, pt.Method)
				}
			}
			rep, err := verify.Run(verify.Options{Artifact: out, Ref: dir, Corpus: "../testdata/corpora/tinystories-eval.txt", Ctx: 256, Chunks: 12, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			kl[m] = rep.KL.Mean
		}
		t.Logf("tiny-qwen3moe %s KL: imatrix %.6f, gptq %.6f (%.2f×)", c.scheme, kl[MethodImatrix], kl[MethodGPTQ], kl[MethodGPTQ]/kl[MethodImatrix])
		if !(kl[MethodGPTQ] < c.bound*kl[MethodImatrix]) {
			t.Errorf("%s: GPTQ's KL %.6f is not below %.2f× imatrix's %.6f", c.scheme, kl[MethodGPTQ], c.bound, kl[MethodImatrix])
		}
	}

	spec.Experts, spec.ExpertsUsed = 16, 1
	dir, statsPath = calib(spec, 256)
	st, err := stats.Read(statsPath)
	if err != nil {
		t.Fatal(err)
	}
	unreached := map[string]bool{}
	for _, w := range st.UnreachedExperts() {
		unreached[w] = true
	}
	if len(unreached) == 0 {
		t.Fatal("every expert reached: the count-0 case is not exercised")
	}
	files := map[string]*gguf.File{}
	for _, m := range []string{MethodImatrix, MethodGPTQ} {
		out := filepath.Join(tmp, "e16"+m+".gguf")
		if _, err := Convert(dir, out, Options{Scheme: "q4_k_m", Method: m, Stats: statsPath, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[m] = f
	}
	a, b := files[MethodImatrix], files[MethodGPTQ]
	same, changed := 0, 0
	for i, ti := range a.Tensors {
		if !strings.Contains(ti.Name, "_exps.") || !gptqBlockType(ti.Type) {
			continue
		}
		per := len(a.TensorData(i)) / spec.Experts
		for x := range spec.Experts {
			eq := bytes.Equal(a.TensorData(i)[x*per:(x+1)*per], b.TensorData(i)[x*per:(x+1)*per])
			if w := arch.ExpertWeight(ti.Name, x); unreached[w] != eq {
				t.Errorf("%s: unreached %v, GPTQ's bytes equal imatrix's %v", w, unreached[w], eq)
			}
			if eq {
				same++
			} else {
				changed++
			}
		}
	}
	t.Logf("16 experts, 256 tokens: %d expert matrices unreached (as imatrix), %d rounded by GPTQ", same, changed)
}

// TestMoERefusals: what gquant does not do for a mixture of experts is refused by name before
// anything is written: AWQ (its experts share ffn_norm's input with the router) and
// layer-sequential GPTQ.
func TestMoERefusals(t *testing.T) {
	spec, err := synth.Preset("tiny-mixtral")
	if err != nil {
		t.Fatal(err)
	}
	spec.Layers = 1
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "m.gguf")
	if _, err := Convert(dir, out, Options{Scheme: "q4_0", Method: MethodAWQ, Stats: "unused.gguf"}); err == nil || !strings.Contains(err.Error(), "mixture of experts") {
		t.Errorf("awq: %v", err)
	}
	if _, err := calibrate.NewSequential(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt", Threads: 1}); err == nil ||
		!strings.Contains(err.Error(), "mixtures of experts") {
		t.Errorf("layer-sequential GPTQ: %v", err)
	}
}
