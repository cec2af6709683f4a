package synth

import "encoding/json"

// configJSON builds config.json as transformers writes it for the architecture (keys sorted,
// two-space indent, trailing newline).
func configJSON(s Spec, vocab int, tok *tokenizer) ([]byte, error) {
	c := map[string]any{
		"architectures":           []string{s.Arch},
		"model_type":              modelType[s.Arch],
		"attention_dropout":       0.0,
		"hidden_act":              "silu",
		"hidden_size":             s.Hidden,
		"initializer_range":       std,
		"intermediate_size":       s.Intermediate,
		"max_position_embeddings": s.MaxPositions,
		"num_attention_heads":     s.Heads,
		"num_hidden_layers":       s.Layers,
		"num_key_value_heads":     s.KVHeads,
		"rms_norm_eps":            s.RMSNormEps,
		"rope_scaling":            nil,
		"rope_theta":              s.RopeTheta,
		"tie_word_embeddings":     s.Tied,
		"torch_dtype":             "bfloat16",
		"use_cache":               true,
		"vocab_size":              vocab,
	}
	if s.HeadDim > 0 || s.Arch == Qwen3 || s.Arch == Qwen3MoE {
		c["head_dim"] = s.headDim()
	}
	if tok.bos != nil {
		c["bos_token_id"] = tok.bos
	}
	if tok.eos != nil {
		c["eos_token_id"] = tok.eos
	}
	if rs := s.RopeScaling; rs != nil {
		switch rs.Type {
		case "llama3":
			c["rope_scaling"] = map[string]any{
				"rope_type":                        rs.Type,
				"factor":                           rs.Factor,
				"low_freq_factor":                  rs.LowFreqFactor,
				"high_freq_factor":                 rs.HighFreqFactor,
				"original_max_position_embeddings": rs.OriginalMaxPositions,
			}
		case "longrope": // Phi-3's: "type", as its configs spell it
			c["rope_scaling"] = map[string]any{"type": rs.Type, "short_factor": rs.ShortFactor, "long_factor": rs.LongFactor}
		default:
			c["rope_scaling"] = map[string]any{"rope_type": rs.Type, "factor": rs.Factor}
		}
	}
	switch s.Arch {
	case Llama:
		c["attention_bias"] = false
		c["mlp_bias"] = false
		c["pretraining_tp"] = 1
	case Mistral:
		c["sliding_window"] = nil
	case Qwen2:
		c["sliding_window"] = s.MaxPositions
		c["use_sliding_window"] = false
		c["max_window_layers"] = s.Layers
	case Qwen3:
		c["attention_bias"] = false
		c["sliding_window"] = nil
		c["use_sliding_window"] = false
		c["max_window_layers"] = s.Layers
	case Gemma2, Gemma3:
		delete(c, "hidden_act")
		c["hidden_activation"] = "gelu_pytorch_tanh"
		c["head_dim"] = s.headDim()
		c["attention_bias"] = false
		c["sliding_window"] = s.SlidingWindow
		c["query_pre_attn_scalar"] = s.headDim()
		if s.QueryPreAttnScalar > 0 {
			c["query_pre_attn_scalar"] = s.QueryPreAttnScalar
		}
		c["attn_logit_softcapping"] = nullIfZero(s.AttnSoftcap)
		c["final_logit_softcapping"] = nullIfZero(s.FinalSoftcap)
		c["cache_implementation"] = "hybrid"
		if s.Arch == Gemma3 {
			c["rope_local_base_freq"] = s.RopeLocalTheta
			c["sliding_window_pattern"] = s.SlidingPattern
			types := make([]string, s.Layers)
			for l := range types {
				types[l] = "full_attention"
				if p := s.SlidingPattern; p == 0 || l%p < p-1 {
					types[l] = "sliding_attention"
				}
			}
			c["layer_types"] = types
		}
	case Mixtral: // MixtralConfig's keys
		c["sliding_window"] = nil
		c["num_local_experts"] = s.Experts
		c["num_experts_per_tok"] = s.ExpertsUsed
		c["router_aux_loss_coef"] = 0.02
		c["router_jitter_noise"] = 0.0
		c["output_router_logits"] = false
	case Qwen3MoE: // Qwen3MoeConfig's keys
		c["attention_bias"] = false
		c["sliding_window"] = nil
		c["use_sliding_window"] = false
		c["max_window_layers"] = s.Layers
		c["num_experts"] = s.Experts
		c["num_experts_per_tok"] = s.ExpertsUsed
		c["moe_intermediate_size"] = s.Intermediate
		c["intermediate_size"] = s.Intermediate * s.ExpertsUsed
		c["norm_topk_prob"] = s.NormTopK
		c["decoder_sparse_step"] = 1
		c["mlp_only_layers"] = []int{}
		c["router_aux_loss_coef"] = 0.001
		c["output_router_logits"] = false
	case Phi3:
		c["attention_bias"] = false
		c["sliding_window"] = nil
		c["original_max_position_embeddings"] = s.OriginalContext
		c["resid_pdrop"] = 0.0
		c["embd_pdrop"] = 0.0
		if s.PartialRotary > 0 {
			c["partial_rotary_factor"] = s.PartialRotary
		}
	}
	return marshal(c)
}

// nullIfZero is v, or JSON null for 0.
func nullIfZero(v float64) any {
	if v == 0 {
		return nil
	}
	return v
}

// marshal renders JSON as transformers does: sorted keys, two-space indent, final newline.
func marshal(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
