package synth_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/safetensors"
)

// repoRoot is the module root, relative to this package.
const repoRoot = "../../.."

func generate(t *testing.T, preset string, opts synth.Options) string {
	t.Helper()
	spec, err := synth.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), preset)
	if err := synth.Generate(dir, spec, opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// expectedTensors is the HF tensor list of a 2-layer model, written out by hand from the
// transformers modeling files (Llama/Qwen2/Qwen3), with shapes [out, in].
func expectedTensors(arch string, hidden, inter, heads, kv, hd, vocab int, tied bool) map[string][]int {
	m := map[string][]int{
		"model.embed_tokens.weight": {vocab, hidden},
		"model.norm.weight":         {hidden},
	}
	if !tied {
		m["lm_head.weight"] = []int{vocab, hidden}
	}
	for i := range 2 {
		p := fmt.Sprintf("model.layers.%d.", i)
		m[p+"input_layernorm.weight"] = []int{hidden}
		m[p+"post_attention_layernorm.weight"] = []int{hidden}
		m[p+"self_attn.q_proj.weight"] = []int{heads * hd, hidden}
		m[p+"self_attn.k_proj.weight"] = []int{kv * hd, hidden}
		m[p+"self_attn.v_proj.weight"] = []int{kv * hd, hidden}
		m[p+"self_attn.o_proj.weight"] = []int{hidden, heads * hd}
		m[p+"mlp.gate_proj.weight"] = []int{inter, hidden}
		m[p+"mlp.up_proj.weight"] = []int{inter, hidden}
		m[p+"mlp.down_proj.weight"] = []int{hidden, inter}
		if arch == synth.Qwen2 {
			m[p+"self_attn.q_proj.bias"] = []int{heads * hd}
			m[p+"self_attn.k_proj.bias"] = []int{kv * hd}
			m[p+"self_attn.v_proj.bias"] = []int{kv * hd}
		}
		if arch == synth.Qwen3 {
			m[p+"self_attn.q_norm.weight"] = []int{hd}
			m[p+"self_attn.k_norm.weight"] = []int{hd}
		}
	}
	return m
}

func TestTinyPresets(t *testing.T) {
	cases := []struct {
		preset string
		want   map[string][]int
		config map[string]any // expected config.json values (numbers as float64)
	}{
		{"tiny-llama", expectedTensors(synth.Llama, 256, 512, 4, 4, 64, 512, false),
			map[string]any{"model_type": "llama", "num_key_value_heads": 4.0, "tie_word_embeddings": false, "rope_theta": 10000.0, "head_dim": nil}},
		{"tiny-llama3", expectedTensors(synth.Llama, 256, 768, 4, 2, 64, 512, true),
			map[string]any{"model_type": "llama", "head_dim": 64.0, "rope_theta": 500000.0, "tie_word_embeddings": true}},
		{"tiny-mistral", expectedTensors(synth.Mistral, 256, 512, 4, 2, 64, 512, false),
			map[string]any{"model_type": "mistral", "architectures": []any{"MistralForCausalLM"}}},
		{"tiny-qwen2", expectedTensors(synth.Qwen2, 256, 768, 4, 2, 64, 512, false),
			map[string]any{"model_type": "qwen2", "rms_norm_eps": 1e-6}},
		{"tiny-qwen3", expectedTensors(synth.Qwen3, 256, 768, 4, 2, 128, 512, true),
			map[string]any{"model_type": "qwen3", "head_dim": 128.0, "tie_word_embeddings": true, "architectures": []any{"Qwen3ForCausalLM"}}},
	}
	for _, tc := range cases {
		t.Run(tc.preset, func(t *testing.T) {
			dir := generate(t, tc.preset, synth.Options{Seed: 7})
			m, err := hf.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			got := m.Checkpoint.Tensors()
			if len(got) != len(tc.want) {
				t.Errorf("%d tensors, want %d", len(got), len(tc.want))
			}
			for _, ti := range got {
				shape, ok := tc.want[ti.Name]
				if !ok {
					t.Errorf("unexpected tensor %s", ti.Name)
					continue
				}
				if !slices.Equal(ti.Shape, shape) || ti.DType != safetensors.BF16 {
					t.Errorf("%s: %s %v, want BF16 %v", ti.Name, ti.DType, ti.Shape, shape)
				}
				if row := ti.Shape[len(ti.Shape)-1]; len(ti.Shape) == 2 && row%256 != 0 {
					t.Errorf("%s: row length %d is not a multiple of 256", ti.Name, row)
				}
			}
			// config.json: the keys transformers writes, with the preset's values
			var cfg map[string]any
			b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
				"num_attention_heads", "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta",
				"vocab_size", "tie_word_embeddings", "torch_dtype", "bos_token_id", "eos_token_id", "rope_scaling"} {
				if _, ok := cfg[k]; !ok {
					t.Errorf("config.json lacks %s", k)
				}
			}
			for k, v := range map[string]any{"hidden_size": 256.0, "num_hidden_layers": 2.0, "num_attention_heads": 4.0,
				"vocab_size": 512.0, "torch_dtype": "bfloat16", "bos_token_id": 1.0, "eos_token_id": 2.0} {
				if cfg[k] != v {
					t.Errorf("config %s = %v, want %v", k, cfg[k], v)
				}
			}
			for k, v := range tc.config {
				if fmt.Sprint(cfg[k]) != fmt.Sprint(v) {
					t.Errorf("config %s = %v, want %v", k, cfg[k], v)
				}
			}
			if tc.preset == "tiny-llama3" {
				rs, ok := m.Config.Sub("rope_scaling")
				typ, _ := rs.String("rope_type")
				f, _ := rs.Float("factor")
				orig, _ := rs.Int("original_max_position_embeddings")
				if !ok || typ != "llama3" || f != 32 || orig != 8192 {
					t.Errorf("rope_scaling = %v", cfg["rope_scaling"])
				}
			}
		})
	}
}

// TestValueStatistics checks the weights' distribution, computed here in float64: mean ~0
// and standard deviation ~0.02 for weights, mean ~1 for norms.
func TestValueStatistics(t *testing.T) {
	dir := generate(t, "tiny-qwen2", synth.Options{Seed: 3})
	c, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, ti := range c.Tensors() {
		v, err := c.ToFloat32(ti.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sum, sq, maxAbs float64
		center := 0.0
		if strings.Contains(ti.Name, "norm") {
			center = 1
		}
		for _, x := range v {
			d := float64(x) - center
			sum += d
			sq += d * d
			maxAbs = math.Max(maxAbs, math.Abs(d))
		}
		n := float64(len(v))
		mean, sd := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		// tolerances: 5 standard errors of the mean, 10% (small tensors 25%) on the deviation
		tol := 0.10
		if n < 1000 {
			tol = 0.25
		}
		if math.Abs(mean) > 5*0.02/math.Sqrt(n) || math.Abs(sd-0.02) > tol*0.02 || maxAbs > 3.5*0.02 {
			t.Errorf("%s: mean %g, sd %g, max |x| %g (n %d)", ti.Name, mean+center, sd, maxAbs, len(v))
		}
	}
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestDeterministic(t *testing.T) {
	a := readAll(t, generate(t, "tiny-llama3", synth.Options{Seed: 11}))
	b := readAll(t, generate(t, "tiny-llama3", synth.Options{Seed: 11}))
	if len(a) != len(b) || len(a) != 5 {
		t.Fatalf("file sets differ: %d vs %d", len(a), len(b))
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
	c := readAll(t, generate(t, "tiny-llama3", synth.Options{Seed: 12}))
	if bytes.Equal(a["model.safetensors"], c["model.safetensors"]) {
		t.Error("seeds 11 and 12 give the same weights")
	}
	if !bytes.Equal(a["config.json"], c["config.json"]) {
		t.Error("config.json depends on the seed")
	}
}

// TestSharded checks that sharding splits the same tensors (same bytes) into files within the
// size limit, with an index transformers would write.
func TestSharded(t *testing.T) {
	const limit = 1_000_000
	one := generate(t, "tiny-qwen3", synth.Options{Seed: 5})
	sharded := generate(t, "tiny-qwen3", synth.Options{Seed: 5, ShardSize: limit})
	again := generate(t, "tiny-qwen3", synth.Options{Seed: 5, ShardSize: limit})
	sa, sb := readAll(t, sharded), readAll(t, again)
	for name, data := range sa {
		if !bytes.Equal(data, sb[name]) {
			t.Errorf("%s differs between two sharded runs", name)
		}
	}
	a, err := safetensors.Open(one)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := safetensors.Open(sharded)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Files()) < 3 {
		t.Fatalf("only %d shards", len(b.Files()))
	}
	for i, f := range b.Files() {
		want := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(b.Files()))
		if filepath.Base(f) != want {
			t.Errorf("shard %d is %s, want %s", i, filepath.Base(f), want)
		}
	}
	perFile := map[string]int64{}
	var total int64
	for _, ti := range a.Tensors() {
		x, _ := a.Data(ti.Name)
		y, err := b.Data(ti.Name)
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s: sharded bytes differ (%v)", ti.Name, err)
		}
		bi, _ := b.Lookup(ti.Name)
		perFile[bi.File] += bi.Size
		total += bi.Size
	}
	for f, n := range perFile {
		if n > limit { // every tensor of tiny-qwen3 is below the limit
			t.Errorf("%s holds %d bytes, limit %d", f, n, limit)
		}
	}
	var index struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		}
		WeightMap map[string]string `json:"weight_map"`
	}
	raw, _ := os.ReadFile(filepath.Join(sharded, safetensors.IndexName))
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	if index.Metadata.TotalSize != total || len(index.WeightMap) != len(a.Tensors()) {
		t.Errorf("index total_size %d (want %d), %d entries", index.Metadata.TotalSize, total, len(index.WeightMap))
	}
}

// TestTokenizerDir uses a Unigram tokenizer with an added token past the model vocabulary,
// tokens given as AddedToken objects and a list of eos ids.
func TestTokenizerDir(t *testing.T) {
	src := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tokenizer.json", `{"model":{"type":"Unigram","vocab":[["<pad>",0],["<s>",0],["a",-1],["b",-2]]},`+
		`"added_tokens":[{"id":1,"content":"<s>"},{"id":299,"content":"<eot>"}]}`)
	write("tokenizer_config.json", `{"bos_token":{"content":"<s>"},"eos_token":null}`)
	write("generation_config.json", `{"eos_token_id":[299,3]}`)
	spec, _ := synth.Preset("tiny-qwen2")
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Generate(dir, spec, synth.Options{TokenizerDir: src}); err != nil {
		t.Fatal(err)
	}
	m, err := hf.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	vocab, _ := m.Config.Int("vocab_size")
	bos, _ := m.Config.Int("bos_token_id")
	eos, _ := m.Config.Ints("eos_token_id")
	if vocab != 300 || bos != 1 || !slices.Equal(eos, []int{299, 3}) {
		t.Errorf("vocab %d bos %d eos %v, want 300 1 [299 3]", vocab, bos, eos)
	}
	emb, _ := m.Checkpoint.Lookup("model.embed_tokens.weight")
	if emb.Shape[0] != 300 {
		t.Errorf("embedding rows %d", emb.Shape[0])
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		a, _ := os.ReadFile(filepath.Join(src, f))
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s not copied", f)
		}
	}

	// -vocab below the tokenizer's size is refused; above it is kept.
	spec.Vocab = 299
	err = synth.Generate(filepath.Join(t.TempDir(), "m"), spec, synth.Options{TokenizerDir: src})
	if err == nil || !strings.Contains(err.Error(), "vocab: 299 is smaller than the tokenizer's 300 tokens") {
		t.Errorf("error %v", err)
	}
	err = synth.Generate(filepath.Join(t.TempDir(), "m"), spec, synth.Options{TokenizerDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json: no such file or directory") {
		t.Errorf("error %v", err)
	}
}

// TestDefaultTokenizer checks that the embedded default equals testdata's stories260k files.
func TestDefaultTokenizer(t *testing.T) {
	dir := generate(t, "tiny-llama", synth.Options{})
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		want, err := os.ReadFile(filepath.Join(repoRoot, "testdata/models/stories260k", f))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(filepath.Join(dir, f))
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from testdata/models/stories260k/%s", f, f)
		}
	}
}

func TestForce(t *testing.T) {
	dir := generate(t, "tiny-llama", synth.Options{ShardSize: 300_000})
	spec, _ := synth.Preset("tiny-llama")
	err := synth.Generate(dir, spec, synth.Options{})
	if err == nil || !strings.Contains(err.Error(), "already holds a model") {
		t.Fatalf("error %v", err)
	}
	if err := synth.Generate(dir, spec, synth.Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.safetensors*"))
	if len(left) != 1 || filepath.Base(left[0]) != "model.safetensors" {
		t.Errorf("after -force: %v", left)
	}
	// A tokenizer source with tokenizer.json alone: the earlier run's other tokenizer files go.
	tok := t.TempDir()
	b, err := os.ReadFile(filepath.Join(repoRoot, "testdata/models/stories260k/tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tok, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := synth.Generate(dir, spec, synth.Options{Force: true, TokenizerDir: tok}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"config.json", "model.safetensors", "tokenizer.json"}) {
		t.Errorf("after --force with another tokenizer: %v", names)
	}
}

func TestSpecErrors(t *testing.T) {
	if _, err := synth.Preset("nope"); err == nil || !strings.Contains(err.Error(), `unknown preset "nope"`) {
		t.Errorf("error %v", err)
	}
	spec, _ := synth.Preset("tiny-llama")
	spec.Arch, spec.KVHeads, spec.Hidden = "GPT2LMHeadModel", 3, 250
	err := synth.Generate(t.TempDir(), spec, synth.Options{})
	for _, want := range []string{`arch: "GPT2LMHeadModel" is not one of`, "kv-heads: 3 does not divide heads 4", "heads: 4 does not divide hidden 250"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestQwen3Preset checks the large preset's shapes without writing it.
func TestQwen3Preset(t *testing.T) {
	s, err := synth.Preset("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	if s.Arch != synth.Qwen3 || s.Hidden != 1024 || s.Intermediate != 3072 || s.Layers != 28 || s.Heads != 16 ||
		s.KVHeads != 8 || s.HeadDim != 128 || s.Vocab != 151936 || !s.Tied {
		t.Errorf("qwen3-0.6b = %+v", s)
	}
}

// TestLlama3_8BPreset: the scale preset has Meta-Llama-3-8B's config.json shapes (not
// generated here: 16 GB).
func TestLlama3_8BPreset(t *testing.T) {
	s, err := synth.Preset("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	want := synth.Spec{Arch: synth.Llama, Hidden: 4096, Intermediate: 14336, Layers: 32, Heads: 32, KVHeads: 8,
		Vocab: 128256, RopeTheta: 500000, RMSNormEps: 1e-5, MaxPositions: 8192}
	if s != want {
		t.Errorf("llama3-8b: %+v, want %+v", s, want)
	}
}
