package arch

import (
	"strings"
	"testing"
)

// gemma2Config is a small Gemma 2 config.json (decoded), keys as transformers writes them.
func gemma2Config() map[string]any {
	return map[string]any{"architectures": []any{"Gemma2ForCausalLM"}, "hidden_size": 64.0, "intermediate_size": 128.0,
		"num_hidden_layers": 4.0, "num_attention_heads": 4.0, "num_key_value_heads": 2.0, "head_dim": 32.0,
		"vocab_size": 100.0, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
		"query_pre_attn_scalar": 32.0, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
		"sliding_window": 16.0, "max_position_embeddings": 256.0}
}

// TestFamilySpecs: the Gemma and Phi-3 configs give the specs their modeling code implies
// (defaults, layer patterns, rotary dimensions, longrope), and what llama.cpp or the runtime
// would run otherwise is refused by name.
func TestFamilySpecs(t *testing.T) {
	g2, _ := ForHF("Gemma2ForCausalLM")
	s, err := g2.SpecFromHF(gemma2Config())
	if err != nil {
		t.Fatal(err)
	}
	if s.Act != ActGELUTanh || !s.EmbedScale || !s.PostNorms || !s.Tied || s.SlidingPattern != 2 || !s.IsSliding(0) || s.IsSliding(1) ||
		s.QueryScalar != 32 || s.AttnSoftcap != 50 || s.FinalSoftcap != 30 || AttentionScale(s) != float32(1/5.656854249492381) {
		t.Errorf("gemma2 spec %+v", s)
	}
	if err := CheckGGUF(s); err != nil {
		t.Errorf("CheckGGUF: %v", err)
	}
	g := ModelGraph(s)
	if n := g.Nodes[len(g.Nodes)-1]; n.Op != OpSoftcap || n.Cap != 30 {
		t.Errorf("last node %+v, want the logits' softcap", n)
	}
	s.QueryScalar = 64
	if err := CheckGGUF(s); err == nil || !strings.Contains(err.Error(), "query_pre_attn_scalar: 64, but llama.cpp's gemma2 scales the scores by 32^-1/2") {
		t.Errorf("query scalar 64: %v", err)
	}

	g3, _ := ForHF("Gemma3ForConditionalGeneration")
	s, err = g3.SpecFromHF(map[string]any{"architectures": []any{"Gemma3ForConditionalGeneration"},
		"text_config": map[string]any{"hidden_size": 64.0, "num_hidden_layers": 8.0, "rope_scaling": map[string]any{"rope_type": "linear", "factor": 8.0}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Heads != 8 || s.KVHeads != 4 || s.HeadDim != 256 || s.Vocab != 262208 || s.SlidingPattern != 6 || !s.QKNorm ||
		s.RopeLocalTheta != 10000 || s.RopeTheta != 1e6 || s.RopeScaling.Factor != 8 || !s.IsSliding(4) || s.IsSliding(5) {
		t.Errorf("gemma3 defaults: %+v", s)
	}
	if rs := ModelGraph(s).Ropes; len(rs) != 2 || rs[1].Scaling != nil || rs[1].Theta != 10000 || rs[0].Scaling == nil {
		t.Errorf("gemma3 rotary tables %+v", rs)
	}
	s, err = g3.SpecFromHF(map[string]any{"architectures": []any{"Gemma3ForCausalLM"}, "hidden_size": 64.0, "num_hidden_layers": 4.0,
		"layer_types": []any{"sliding_attention", "sliding_attention", "full_attention", "sliding_attention"},
		"rope_parameters": map[string]any{"full_attention": map[string]any{"rope_type": "default", "rope_theta": 5e5},
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 1000.0}}})
	if err != nil || s.SlidingPattern != 3 || s.RopeTheta != 5e5 || s.RopeLocalTheta != 1000 {
		t.Errorf("gemma3 layer_types and rope_parameters: %+v, %v", s, err)
	}

	p3, _ := ForHF("Phi3ForCausalLM")
	phi := func() map[string]any {
		return map[string]any{"hidden_size": 64.0, "intermediate_size": 96.0, "num_hidden_layers": 2.0, "num_attention_heads": 4.0,
			"num_key_value_heads": 2.0, "vocab_size": 100.0, "max_position_embeddings": 1024.0, "original_max_position_embeddings": 64.0,
			"partial_rotary_factor": 0.5}
	}
	cfg := phi()
	cfg["rope_scaling"] = map[string]any{"type": "longrope", "short_factor": []any{1.0, 1.0, 1.0, 1.0}, "long_factor": []any{1.0, 2.0, 3.0, 4.0}}
	s, err = p3.SpecFromHF(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f, a := LongRopeFactors(s, 65); s.RotDims() != 8 || !s.FusedGateUp || a != float32(1.2909944487358056) || len(f) != 4 || f[3] != 4 {
		t.Errorf("phi3 spec %+v: long factors %v, attention factor %v", s, f, a)
	}
	if f, _ := LongRopeFactors(s, 64); f[3] != 1 {
		t.Errorf("a capacity of the original context takes the short factors, got %v", f)
	}
	for _, c := range []struct {
		fam  Family
		edit func(m map[string]any)
		want string
	}{
		{g2, func(m map[string]any) { m["attn_logit_softcapping"] = nil }, "attn_logit_softcapping: must be positive"},
		{g2, func(m map[string]any) { m["tie_word_embeddings"] = false }, "tie_word_embeddings: false is not supported for gemma2"},
		{g2, func(m map[string]any) { m["hidden_activation"] = "gelu" }, "hidden_activation: gelu is not supported"},
		{g2, func(m map[string]any) {
			m["layer_types"] = []any{"sliding_attention", "full_attention", "full_attention", "sliding_attention"}
		}, "layer_types: the sliding layers do not recur with a period"},
		{g3, func(m map[string]any) { m["attn_logit_softcapping"] = 50.0 }, "attn_logit_softcapping: Gemma 3 has none"},
		{p3, func(m map[string]any) { m["head_dim"] = 32.0 }, "head_dim: 32, but llama.cpp's phi3 needs hidden_size/num_attention_heads = 16"},
		{p3, func(m map[string]any) { m["partial_rotary_factor"] = 0.2 }, "partial_rotary_factor: 0.2 gives 3 rotated dimensions of 16 (llama.cpp: 3); want an even count"},
		{p3, func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"type": "longrope", "short_factor": []any{1.0}, "long_factor": []any{1.0}}
		}, "short_factor and long_factor have 1 and 1 values, want 4"},
	} {
		m := gemma2Config()
		if c.fam == p3 {
			m = phi()
		}
		c.edit(m)
		if _, err := c.fam.SpecFromHF(m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.fam.Name(), err, c.want)
		}
	}
}
