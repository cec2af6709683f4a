package hf_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/safetensors"
)

const repoRoot = "../.."

// TestOpenStories260k reads the real model; expected values are those of its README and
// config.json, written out here.
func TestOpenStories260k(t *testing.T) {
	dir := filepath.Join(repoRoot, "testdata/models/stories260k")
	m, err := hf.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !slices.Equal(m.Config.Architectures, []string{"LlamaForCausalLM"}) {
		t.Errorf("architectures %v", m.Config.Architectures)
	}
	ints := map[string]int{"hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 5, "num_attention_heads": 8,
		"num_key_value_heads": 4, "head_dim": 8, "vocab_size": 512, "bos_token_id": 1, "max_position_embeddings": 512}
	for k, want := range ints {
		if got, ok := m.Config.Int(k); !ok || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", k, got, ok, want)
		}
	}
	if eps, ok := m.Config.Float("rms_norm_eps"); !ok || eps != 1e-5 {
		t.Errorf("rms_norm_eps = %g", eps)
	}
	if theta, ok := m.Config.Int("rope_theta"); !ok || theta != 10000 { // 10000.0 is integral
		t.Errorf("rope_theta as int = %d %v", theta, ok)
	}
	if tied, ok := m.Config.Bool("tie_word_embeddings"); !ok || !tied {
		t.Error("tie_word_embeddings")
	}
	if mt, _ := m.Config.String("model_type"); mt != "llama" {
		t.Errorf("model_type %q", mt)
	}
	if _, ok := m.Config.Sub("rope_scaling"); ok {
		t.Error("rope_scaling is null but Sub succeeded")
	}
	if m.Config.Has("rope_scaling") || !m.Config.Has("vocab_size") {
		t.Error("Has")
	}
	if _, ok := m.Config.Int("rms_norm_eps"); ok {
		t.Error("Int accepted 1e-05")
	}
	if m.GenerationConfig["max_length"] == nil {
		t.Errorf("generation config %v", m.GenerationConfig)
	}
	if filepath.Base(m.TokenizerPath) != "tokenizer.json" || filepath.Base(m.TokenizerConfigPath) != "tokenizer_config.json" {
		t.Errorf("tokenizer paths %q %q", m.TokenizerPath, m.TokenizerConfigPath)
	}
	// 5 layers × 9 tensors + embedding + norm + lm_head (stored although tied)
	if n := len(m.Checkpoint.Tensors()); n != 48 {
		t.Errorf("%d tensors, want 48", n)
	}
	down, ok := m.Checkpoint.Lookup("model.layers.0.mlp.down_proj.weight")
	if !ok || !slices.Equal(down.Shape, []int{64, 172}) || down.DType != safetensors.BF16 {
		t.Errorf("down_proj %+v", down)
	}
	err = m.Config.Err("head_dim", "must be %d", 16)
	if err.Error() != filepath.Join(dir, "config.json")+": head_dim: must be 16" {
		t.Errorf("Err = %q", err)
	}
}

// TestOpenStories3m opens the bundled stories3m (testdata/models/stories3m).
func TestOpenStories3m(t *testing.T) {
	dir := filepath.Join(repoRoot, "testdata/models/stories3m")
	m, err := hf.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Checkpoint.Tensors()) == 0 {
		t.Error("no tensors")
	}
}

// TestMalformedCatalogue opens every malformed folder of the synth catalogue.
func TestMalformedCatalogue(t *testing.T) {
	dir := t.TempDir()
	cases, err := synth.WriteMalformed(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 14 {
		t.Errorf("only %d cases", len(cases))
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := hf.Open(filepath.Join(dir, name))
			if err == nil {
				m.Close()
				t.Fatalf("opened without error, want %q", want)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, want) || strings.ContainsAny(msg, "\n\r") {
				t.Errorf("error %q\n  want one line containing %q", msg, want)
			}
		})
	}
}

// TestOpenCollectsProblems checks that independent problems are reported together.
func TestOpenCollectsProblems(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": "Llama"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), nil, 0o644)
	_, err := hf.Open(dir)
	for _, want := range []string{"config.json: architectures: is a string, want a list of class names",
		"; " + filepath.Join(dir, "tokenizer.json") + ": missing",
		"; " + dir + ": no *.safetensors files (found pytorch_model.bin"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if _, err := hf.Open(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope: no such file or directory") {
		t.Errorf("error %v", err)
	}
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte("{,}"), 0o644)
	if _, err := hf.Open(dir); err == nil || !strings.Contains(err.Error(), "generation_config.json: not valid JSON") {
		t.Errorf("error %v", err)
	}
}
