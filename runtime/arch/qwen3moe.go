package arch

import "fmt"

// qwen3MoeFamily covers Qwen3MoeForCausalLM (GGUF arch "qwen3moe"), as transformers'
// modeling_qwen3_moe.py computes it: Qwen3's attention (q_norm, k_norm, head_dim,
// rotate-half RoPE) with a routed mixture of num_experts SwiGLU experts of
// moe_intermediate_size rows in every layer, num_experts_per_tok of them per token (see
// moe.go), their weights renormalized when norm_topk_prob is set. llama.cpp's qwen3moe has
// no dense layers, always renormalizes and has no sliding window: configs with
// mlp_only_layers, decoder_sparse_step other than 1 or use_sliding_window are refused, and
// convert refuses norm_topk_prob false for GGUF (CheckGGUF), which the runtime computes.
type qwen3MoeFamily struct{}

func (qwen3MoeFamily) Name() string              { return "qwen3moe" }
func (qwen3MoeFamily) HFArchitectures() []string { return []string{"Qwen3MoeForCausalLM"} }
func (qwen3MoeFamily) GGUFArch() string          { return "qwen3moe" }

func (qwen3MoeFamily) SpecFromHF(cfg map[string]any) (*Spec, error) {
	s, r := commonSpec(cfg, "qwen3moe", "qwen3moe", false)
	s.QKNorm = true
	s.QKVBias = r.boolOpt("attention_bias", false)
	s.Experts = r.intReq("num_experts")
	s.ExpertsUsed = r.intReq("num_experts_per_tok")
	s.ExpertFF = r.intReq("moe_intermediate_size")
	s.NormTopK = r.boolOpt("norm_topk_prob", false)
	if step := r.intOpt("decoder_sparse_step", 1); step != 1 {
		r.err = append(r.err, fmt.Sprintf("decoder_sparse_step: %d: only every layer a mixture of experts (1) is supported, as in llama.cpp's qwen3moe", step))
	}
	switch v := cfg["mlp_only_layers"].(type) {
	case nil:
	case []any:
		if len(v) > 0 {
			r.err = append(r.err, fmt.Sprintf("mlp_only_layers: %v: dense layers are not supported (llama.cpp's qwen3moe has none)", v))
		}
	default:
		r.err = append(r.err, fmt.Sprintf("mlp_only_layers: want a list of layer indexes, got %v", v))
	}
	if r.boolOpt("use_sliding_window", false) {
		r.err = append(r.err, "use_sliding_window: true is not supported (llama.cpp's qwen3moe has no sliding window)")
	}
	return finish(s, r)
}

func (qwen3MoeFamily) SpecFromGGUF(get func(string) (any, bool)) (*Spec, error) {
	s, g := commonSpecGGUF(get, "qwen3moe", "qwen3moe")
	s.QKNorm = true
	moeSpecGGUF(s, g)
	return finishGGUF(s, g)
}

func (qwen3MoeFamily) Tensors(s *Spec) []Tensor             { return llamaLikeTensors(s, false) }
func (qwen3MoeFamily) IgnoredHF(name string) (string, bool) { return ignoredCommon(name) }
func (qwen3MoeFamily) RopeLayout(string) RopeLayout         { return RopeNeoX }
