package convert

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/safetensors"
)

// multimodalGemma3 rewrites a tiny Gemma3ForCausalLM folder as the text part of a
// Gemma3ForConditionalGeneration checkpoint as transformers ≥ 4.52 saves it: config.json with
// text_config and vision_config, the decoder under model.language_model., and a vision tower
// and projector (prefix "model.").
func multimodalGemma3(t *testing.T, prefix string) (text, mm string) {
	t.Helper()
	spec, err := synth.Preset("tiny-gemma3")
	if err != nil {
		t.Fatal(err)
	}
	text = filepath.Join(t.TempDir(), "text")
	if err := synth.Generate(text, spec, synth.Options{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	mm = filepath.Join(t.TempDir(), "mm")
	if err := os.MkdirAll(mm, 0o755); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(text)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var nts []safetensors.NamedTensor
	for _, ti := range ck.Tensors() {
		data, err := ck.Data(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		nts = append(nts, safetensors.NamedTensor{Name: prefix + strings.TrimPrefix(ti.Name, "model."), DType: ti.DType, Shape: ti.Shape, Data: data})
	}
	vision := []string{"model.vision_tower.vision_model.embeddings.patch_embedding.weight", "model.multi_modal_projector.mm_input_projection_weight"}
	if prefix == "language_model.model." {
		vision = []string{"vision_tower.vision_model.embeddings.patch_embedding.weight", "multi_modal_projector.mm_input_projection_weight"}
	}
	for _, n := range vision {
		nts = append(nts, safetensors.NamedTensor{Name: n, DType: safetensors.BF16, Shape: []int{4, 8}, Data: make([]byte, 64)})
	}
	if err := safetensors.WriteFile(filepath.Join(mm, "model.safetensors"), nts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(text, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "architectures")
	top := map[string]any{"architectures": []string{"Gemma3ForConditionalGeneration"}, "model_type": "gemma3",
		"text_config": cfg, "vision_config": map[string]any{"model_type": "siglip_vision_model", "hidden_size": 8},
		"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"]}
	b, _ = json.MarshalIndent(top, "", "  ")
	for name, data := range map[string][]byte{"config.json": b} {
		if err := os.WriteFile(filepath.Join(mm, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		data, err := os.ReadFile(filepath.Join(text, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mm, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return text, mm
}

// TestGemma3MultimodalTextModel: the text model of a Gemma3ForConditionalGeneration checkpoint
// (both of transformers' layouts) converts to the same GGUF tensors as the Gemma3ForCausalLM
// it was made from, the vision tower and projector reported as dropped; an unknown tensor
// still fails the conversion.
func TestGemma3MultimodalTextModel(t *testing.T) {
	for _, prefix := range []string{"model.language_model.", "language_model.model."} {
		text, mm := multimodalGemma3(t, prefix)
		want := filepath.Join(t.TempDir(), "text.gguf")
		if _, err := Convert(text, want, Options{Scheme: "q8_0", Threads: 1}); err != nil {
			t.Fatal(err)
		}
		got := filepath.Join(t.TempDir(), "mm.gguf")
		p, err := Convert(mm, got, Options{Scheme: "q8_0", Threads: 1})
		if err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
		if len(p.Dropped) != 2 || !strings.Contains(p.Dropped[0].Reason, "vision tower") {
			t.Errorf("%s: dropped %v, want the vision tower and the projector", prefix, p.Dropped)
		}
		hw, hg := tensorHashes(t, want), tensorHashes(t, got)
		if len(hw) != len(hg) {
			t.Errorf("%s: %d tensors, the text model's GGUF has %d", prefix, len(hg), len(hw))
		}
		for n, h := range hw {
			if hg[n] != h {
				t.Errorf("%s: %s differs from the text model's", prefix, n)
			}
		}
		f, err := gguf.Open(got)
		if err != nil {
			t.Fatal(err)
		}
		arch, _ := f.String("general.architecture")
		f.Close()
		if arch != "gemma3" {
			t.Errorf("general.architecture %q", arch)
		}
	}
	// A tensor of no known part stays an error.
	_, mm := multimodalGemma3(t, "model.language_model.")
	ck, err := safetensors.Open(mm)
	if err != nil {
		t.Fatal(err)
	}
	var nts []safetensors.NamedTensor
	for _, ti := range ck.Tensors() {
		data, _ := ck.Data(ti.Name)
		nts = append(nts, safetensors.NamedTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: slices.Clone(data)})
	}
	ck.Close()
	nts = append(nts, safetensors.NamedTensor{Name: "model.audio_tower.weight", DType: safetensors.BF16, Shape: []int{2}, Data: make([]byte, 4)})
	if err := safetensors.WriteFile(filepath.Join(mm, "model.safetensors"), nts, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(mm, filepath.Join(t.TempDir(), "x.gguf"), Options{Scheme: "q8_0", DryRun: true}); err == nil || !strings.Contains(err.Error(), "1 unmapped tensors for Gemma3ForConditionalGeneration: model.audio_tower.weight") {
		t.Errorf("unknown tensor: %v", err)
	}
}
