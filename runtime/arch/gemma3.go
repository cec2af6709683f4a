package arch

import (
	"fmt"
	"strings"
)

// gemma3Family covers Gemma3ForCausalLM and the text model of Gemma3ForConditionalGeneration
// (GGUF arch "gemma3"): Gemma 2's layout (gemma2.go) with per-head q and k norms, no soft-cap
// of the scores, five sliding layers in six by default and, on the sliding layers, a RoPE
// base of their own (rope_local_base_freq) without the global layers' rope scaling.
type gemma3Family struct{}

func (gemma3Family) Name() string { return "gemma3" }
func (gemma3Family) HFArchitectures() []string {
	return []string{"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"}
}
func (gemma3Family) GGUFArch() string { return "gemma3" }

// gemma3Defaults are the values transformers' Gemma3TextConfig takes for keys a config.json
// leaves out (Gemma 3's multimodal configs leave out most of text_config).
var gemma3Defaults = map[string]any{
	"vocab_size": 262208.0, "hidden_size": 2304.0, "intermediate_size": 9216.0, "num_hidden_layers": 26.0,
	"num_attention_heads": 8.0, "num_key_value_heads": 4.0, "head_dim": 256.0, "max_position_embeddings": 131072.0,
	"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 256.0,
	"sliding_window": 4096.0, "sliding_window_pattern": 6.0, "tie_word_embeddings": true,
	"hidden_activation": "gelu_pytorch_tanh",
}

func (gemma3Family) SpecFromHF(cfg map[string]any) (*Spec, error) {
	r := &cfgReader{m: cfg}
	m, act := gemmaConfig(cfg, gemma3Defaults, r)
	// transformers ≥ 5 nests the RoPE of each kind of layer in rope_parameters.
	local := 0.0
	if rp, ok := m["rope_parameters"].(map[string]any); ok {
		if full, ok := rp["full_attention"].(map[string]any); ok {
			m["rope_parameters"] = full
			if th, ok := full["rope_theta"]; ok {
				m["rope_theta"] = th // over the default filled in for an absent top-level key
			}
		}
		if sl, ok := rp["sliding_attention"].(map[string]any); ok {
			rr := &cfgReader{m: sl}
			local = rr.floatOpt("rope_theta", 0)
			if t := rr.str("rope_type"); t != "" && t != "default" {
				r.err = append(r.err, fmt.Sprintf("rope_parameters.sliding_attention.rope_type: %q is not supported (llama.cpp scales only the global layers' RoPE)", t))
			}
			r.err = append(r.err, rr.err...)
		}
	}
	s, r2 := commonSpec(m, "gemma3", "gemma3", true)
	r2.err = append(r.err, r2.err...)
	gemmaCommon(s, m, r2, act, 6)
	s.QKNorm = true
	s.RopeLocalTheta = r2.floatOpt("rope_local_base_freq", 10000)
	if local > 0 {
		s.RopeLocalTheta = local
	}
	if s.AttnSoftcap != 0 {
		r2.err = append(r2.err, "attn_logit_softcapping: Gemma 3 has none (llama.cpp's gemma3 does not soft-cap the scores)")
	}
	if sc := s.RopeScaling; sc != nil && sc.Type != "linear" {
		r2.err = append(r2.err, fmt.Sprintf("rope_scaling: %s is not supported for gemma3 (llama.cpp scales its global layers linearly)", sc.Type))
	}
	if r2.boolOpt("attention_bias", false) {
		r2.err = append(r2.err, "attention_bias: true is not supported for gemma3")
	}
	return finish(s, r2)
}

func (gemma3Family) SpecFromGGUF(get func(string) (any, bool)) (*Spec, error) {
	return finishGGUF(gemmaSpecGGUF(get, "gemma3", 6))
}

func (gemma3Family) Tensors(s *Spec) []Tensor     { return gemmaTensors(s) }
func (gemma3Family) RopeLayout(string) RopeLayout { return RopeNeoX }

// IgnoredHF drops the vision tower and the projector of a Gemma3ForConditionalGeneration
// checkpoint: gquant converts and runs its text model.
func (gemma3Family) IgnoredHF(name string) (string, bool) {
	for _, p := range []string{"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."} {
		if strings.HasPrefix(name, p) {
			return "vision tower of Gemma3ForConditionalGeneration: only the text model is converted", true
		}
	}
	return ignoredCommon(name)
}

// resolveHF sets the HF name prefix of a Gemma 3 text model from the checkpoint's names:
// "model.language_model." (transformers ≥ 4.52) or "language_model.model." (earlier
// multimodal checkpoints), "model." otherwise.
func resolveHF(s *Spec, names []string) {
	if s.Family != "gemma3" {
		return
	}
	for _, n := range names {
		for _, p := range []string{"model.language_model.", "language_model.model."} {
			if strings.HasPrefix(n, p) {
				s.HFPrefix = p
				return
			}
		}
	}
}
