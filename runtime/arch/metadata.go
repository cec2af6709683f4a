package arch

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
)

// GGUFMetadata returns the model hyperparameters as llama.cpp reads them, with the exact value
// types its loader demands (counts UINT32, epsilon and frequency base FLOAT32). The converter
// adds general.name, general.file_type, general.quantization_version and the tokenizer.
func GGUFMetadata(s *Spec) []gguf.KV {
	a := s.GGUFArch + "."
	kv := []gguf.KV{
		{Key: "general.architecture", Value: s.GGUFArch},
		{Key: a + "context_length", Value: uint32(s.Context)},
		{Key: a + "embedding_length", Value: uint32(s.Hidden)},
		{Key: a + "block_count", Value: uint32(s.Layers)},
		{Key: a + "feed_forward_length", Value: uint32(s.Intermediate)},
		{Key: a + "attention.head_count", Value: uint32(s.Heads)},
		{Key: a + "attention.head_count_kv", Value: uint32(s.KVHeads)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: float32(s.RMSEps)},
		{Key: a + "rope.freq_base", Value: float32(s.RopeTheta)},
		{Key: a + "rope.dimension_count", Value: uint32(s.RotDims())},
		{Key: a + "vocab_size", Value: uint32(s.Vocab)},
	}
	if s.ExplicitHeadDim {
		kv = append(kv,
			gguf.KV{Key: a + "attention.key_length", Value: uint32(s.HeadDim)},
			gguf.KV{Key: a + "attention.value_length", Value: uint32(s.HeadDim)})
	}
	if sc := s.RopeScaling; sc != nil {
		switch sc.Type {
		case "linear":
			kv = append(kv,
				gguf.KV{Key: a + "rope.scaling.type", Value: "linear"},
				gguf.KV{Key: a + "rope.scaling.factor", Value: float32(sc.Factor)})
		case "yarn":
			kv = append(kv,
				gguf.KV{Key: a + "rope.scaling.type", Value: "yarn"},
				gguf.KV{Key: a + "rope.scaling.factor", Value: float32(sc.Factor)},
				gguf.KV{Key: a + "rope.scaling.original_context_length", Value: uint32(sc.OriginalContext)})
			if sc.HasYarnExt {
				kv = append(kv, gguf.KV{Key: a + "rope.scaling.yarn_ext_factor", Value: float32(sc.YarnExtFactor)})
			}
			if sc.HasYarnA {
				kv = append(kv, gguf.KV{Key: a + "rope.scaling.yarn_attn_factor", Value: float32(sc.YarnAttnFactor)})
			}
		case "llama3":
			// carried by the rope_freqs tensor
		}
	}
	if s.Experts > 0 { // TextModel.set_gguf_parameters; Qwen2MoeModel's expert width
		kv = append(kv,
			gguf.KV{Key: a + "expert_count", Value: uint32(s.Experts)},
			gguf.KV{Key: a + "expert_used_count", Value: uint32(s.ExpertsUsed)})
		if s.GGUFArch == "qwen3moe" {
			kv = append(kv, gguf.KV{Key: a + "expert_feed_forward_length", Value: uint32(s.ExpertFF)})
		}
	}
	switch s.GGUFArch {
	case "gemma2":
		kv = append(kv,
			gguf.KV{Key: a + "attn_logit_softcapping", Value: float32(s.AttnSoftcap)},
			gguf.KV{Key: a + "final_logit_softcapping", Value: float32(s.FinalSoftcap)},
			gguf.KV{Key: a + "attention.sliding_window", Value: uint32(s.SlidingWindow)})
		if s.SlidingPattern != 2 {
			kv = append(kv, gguf.KV{Key: a + "attention.sliding_window_pattern", Value: uint32(s.SlidingPattern)})
		}
	case "phi3": // Phi3MiniModel.set_gguf_parameters, generate_extra_tensors
		kv = append(kv,
			gguf.KV{Key: a + "rope.scaling.original_context_length", Value: uint32(s.OriginalContext)},
			gguf.KV{Key: a + "attention.sliding_window", Value: uint32(0)})
		if sc := s.RopeScaling; sc != nil && sc.Type == "longrope" {
			kv = append(kv, gguf.KV{Key: a + "rope.scaling.attn_factor", Value: float32(sc.LongAttnFactor)})
		}
	case "gemma3":
		if s.RopeLocalTheta > 0 {
			kv = append(kv, gguf.KV{Key: a + "rope.freq_base_swa", Value: float32(s.RopeLocalTheta)})
		}
		if s.FinalSoftcap > 0 {
			kv = append(kv, gguf.KV{Key: a + "final_logit_softcapping", Value: float32(s.FinalSoftcap)})
		}
		if s.SlidingWindow > 0 && s.SlidingPattern != 1 { // convert_hf_to_gguf.py's condition
			kv = append(kv, gguf.KV{Key: a + "attention.sliding_window", Value: uint32(s.SlidingWindow)})
			if s.SlidingPattern != 6 {
				kv = append(kv, gguf.KV{Key: a + "attention.sliding_window_pattern", Value: uint32(s.SlidingPattern)})
			}
		}
	}
	return kv
}

// CheckGGUF refuses a spec that llama.cpp would run otherwise than gquant does from its GGUF
// metadata: what the keys cannot say (Gemma's query_pre_attn_scalar, which llama.cpp derives
// from the layer count; unnormalized expert weights, which llama.cpp's llama and qwen3moe
// always renormalize).
func CheckGGUF(s *Spec) error {
	if s.Experts > 0 && !s.NormTopK {
		return fmt.Errorf("norm_topk_prob: false, but llama.cpp's %s always renormalizes the routed experts' weights (GGUF has no key for it)", s.GGUFArch)
	}
	if s.QueryScalar > 0 && (s.GGUFArch == "gemma2" || s.GGUFArch == "gemma3") {
		if want := llamaCppQueryScalar(s); s.QueryScalar != want {
			return fmt.Errorf("query_pre_attn_scalar: %g, but llama.cpp's %s scales the scores by %g^-1/2 for a model of %d layers (GGUF has no key for it)",
				s.QueryScalar, s.GGUFArch, want, s.Layers)
		}
	}
	return nil
}
