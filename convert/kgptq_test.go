package convert

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
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

// TestSequentialGPTQExperts: layer-sequential GPTQ (--corpus, no statistics file) on
// tiny-qwen3moe stages each layer's experts twice (every expert's gate and up, then every
// expert's down), each expert rounded with the Hessian of its tokens' rows through the
// already rounded blocks, the model then running with each expert's rounded matrix: its q4_0
// scores a lower KL on held-out text than RTN's, near the statistics file's GPTQ (measured
// by hand on 8 windows: RTN 0.001695, sequential 0.001177, statistics file 0.001150).
func TestSequentialGPTQExperts(t *testing.T) {
	spec, err := synth.Preset("tiny-qwen3moe")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	seq, err := calibrate.NewSequential(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt", Ctx: 256, Tokens: 2048, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	var experts int
	for _, st := range seq.Stages() {
		if _, _, ok := arch.SplitExpert(st[0]); ok {
			experts++
			if len(st) != spec.Experts && len(st) != 2*spec.Experts {
				t.Errorf("an expert stage of %d weights: %v", len(st), st)
			}
		}
	}
	if experts != 2*spec.Layers {
		t.Fatalf("%d expert stages, want 2 a layer", experts)
	}
	kl := map[string]float64{}
	for _, m := range []string{MethodRTN, MethodGPTQ} {
		out := filepath.Join(t.TempDir(), m+".gguf")
		o := Options{Scheme: "q4_0", Method: m, Threads: 2}
		if m == MethodGPTQ {
			o.Sequence = seq
		}
		p, err := Convert(dir, out, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, pt := range p.Tensors {
			if strings.Contains(pt.Name, "_exps.") && m == MethodGPTQ && pt.Method != MethodGPTQ {
				t.Errorf("%s: method %q", pt.Name, pt.Method)
			}
		}
		rep, err := verify.Run(verify.Options{Artifact: out, Ref: dir, Corpus: "../testdata/corpora/tinystories-eval.txt", Ctx: 256, Chunks: 8, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		kl[m] = rep.KL.Mean
	}
	t.Logf("tiny-qwen3moe q4_0 KL: rtn %.6f, layer-sequential gptq %.6f (%.2f×)", kl[MethodRTN], kl[MethodGPTQ], kl[MethodGPTQ]/kl[MethodRTN])
	if !(kl[MethodGPTQ] < 0.8*kl[MethodRTN]) {
		t.Errorf("layer-sequential GPTQ's KL %.6f is not below 0.8× RTN's %.6f", kl[MethodGPTQ], kl[MethodRTN])
	}
}

// TestAWQExpertsFoldExactly: AWQ's scalings of a mixture of experts (ffn_norm → router and
// every expert's gate and up; each expert's up → its down) change no function: an F32 GGUF of
// a small Qwen3-MoE (tiny-qwen3moe at hidden 128, 4 experts of 128) with them folded in (searched on a coarse grid of 5 α) gives the unfolded
// one's logits within float rounding (the router's columns scaled with ffn_norm's division,
// so every token keeps its experts), while its weights differ; and q4_0 with --method awq
// scores a lower KL on held-out text than without.
func TestAWQExpertsFoldExactly(t *testing.T) {
	spec, err := synth.Preset("tiny-qwen3moe")
	if err != nil {
		t.Fatal(err)
	}
	spec.Hidden, spec.Intermediate, spec.Experts = 128, 128, 4
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "m")
	if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	statsPath := filepath.Join(tmp, "stats.gguf")
	if _, err := calibrate.Calibrate(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt",
		Ctx: 256, Tokens: 1024, Hessian: true, Threads: 2, Output: statsPath}); err != nil {
		t.Fatal(err)
	}
	st, err := stats.Read(statsPath)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Open(dir, InventoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	write := func(name string, fold bool) string {
		p, err := MakePlan(inv, PlanOptions{Scheme: "f32"})
		if err != nil {
			t.Fatal(err)
		}
		if fold {
			lines, err := PrepareFolds(inv, p, FoldOptions{AWQ: true, Stats: st, Threads: 2, AWQOpt: quantize.AWQOptions{Grid: 5},
				Grid: func(int) quantize.GroupSpec { return q4_0Spec }})
			if err != nil {
				t.Fatal(err)
			}
			scaled := 0
			for _, l := range lines {
				if strings.Contains(l, "AWQ α") && !strings.Contains(l, "α 0.00") {
					scaled++
				}
			}
			if scaled < spec.Layers*spec.Experts {
				t.Fatalf("only %d of the scalings moved:\n%s", scaled, strings.Join(lines, "\n"))
			}
		}
		kvs, err := Metadata(inv, p, "")
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(tmp, name)
		if err := writeGGUF(inv, p, kvs, out, Options{Threads: 2}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	plain, folded := write("plain.gguf", false), write("folded.gguf", true)
	ids := []int{1, 306, 4186, 263, 931, 29892, 727, 471, 263, 2217, 7826, 4257, 365, 2354, 29889, 2296}
	logits := func(path string) []float32 {
		m, err := runtime.Load(path, runtime.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for i := range ids {
			ids[i] %= m.Vocab()
		}
		l, err := m.Eval(m.NewState(len(ids)), ids, true)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := logits(plain), logits(folded)
	var worst, amax float64
	for i := range a {
		amax = math.Max(amax, math.Abs(float64(a[i])))
		worst = math.Max(worst, math.Abs(float64(a[i]-b[i])))
	}
	t.Logf("folded F32: max |Δlogit| %.3g of max |logit| %.3g", worst, amax)
	if worst > 1e-4*amax || worst == 0 {
		t.Errorf("folded F32: max |Δlogit| %g (of %g): the folds change the function, or are not there", worst, amax)
	}
	kl := map[string]float64{}
	for _, m := range []string{MethodImatrix, MethodAWQ} {
		out := filepath.Join(tmp, m+".gguf")
		if _, err := Convert(dir, out, Options{Scheme: "q4_0", Method: m, Stats: statsPath, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		rep, err := verify.Run(verify.Options{Artifact: out, Ref: dir, Corpus: "../testdata/corpora/tinystories-eval.txt", Ctx: 256, Chunks: 8, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		kl[m] = rep.KL.Mean
	}
	t.Logf("q4_0 KL: imatrix %.6f, awq %.6f (%.2f×)", kl[MethodImatrix], kl[MethodAWQ], kl[MethodAWQ]/kl[MethodImatrix])
	if !(kl[MethodAWQ] < kl[MethodImatrix]) {
		t.Errorf("AWQ's KL %.6f is not below imatrix's %.6f", kl[MethodAWQ], kl[MethodImatrix])
	}
}
