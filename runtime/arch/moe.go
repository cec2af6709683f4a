package arch

import "fmt"

// What Mixtral and Qwen3-MoE share: a routed mixture of SwiGLU experts in every layer's FFN
// (the graph's moe node), as transformers' MixtralSparseMoeBlock and Qwen3MoeSparseMoeBlock
// compute it and llama.cpp's build_moe_ffn does:
//
//	p = softmax(router·x) in float32, the top ExpertsUsed experts by p, w = their p
//	(divided by their sum: Mixtral always, Qwen3-MoE with norm_topk_prob),
//	y = Σ w_k·down_k(silu(gate_k·x)·up_k·x)
//
// The checkpoint stores each expert's matrices as tensors of their own; gquant stacks them
// into llama.cpp's 3-D tensors (ffn_gate_exps, ffn_up_exps, ffn_down_exps: [experts, rows,
// cols]) and keeps the router as ffn_gate_inp.

// moeNames are the HF names of a family's router and experts' matrices under a layer's
// prefix: the router's, then the gate, up and down names of expert %d.
type moeNames struct {
	router, gate, up, down string
}

var (
	mixtralNames  = moeNames{"block_sparse_moe.gate.weight", "block_sparse_moe.experts.%d.w1.weight", "block_sparse_moe.experts.%d.w3.weight", "block_sparse_moe.experts.%d.w2.weight"}
	qwen3MoeNames = moeNames{"mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight", "mlp.experts.%d.down_proj.weight"}
)

// moeTensors lists layer l's router and expert stacks (p: the layer's HF prefix), after its
// ffn_norm.
func moeTensors(s *Spec, l int, p string) []Tensor {
	names := mixtralNames
	if s.Family == "qwen3moe" {
		names = qwen3MoeNames
	}
	ref := func(r Role) TensorRef { return TensorRef{Role: r, Layer: l} }
	stack := func(r Role, format string, rows, cols int) Tensor {
		parts := make([]string, s.Experts)
		for e := range parts {
			parts[e] = p + fmt.Sprintf(format, e)
		}
		return Tensor{Ref: ref(r), HFName: parts[0], Parts: parts, Shape: []int{s.Experts, rows, cols}}
	}
	return []Tensor{
		{Ref: ref(FFNGateInp), HFName: p + names.router, Shape: []int{s.Experts, s.Hidden}},
		stack(FFNGateExps, names.gate, s.ExpertFF, s.Hidden),
		stack(FFNUpExps, names.up, s.ExpertFF, s.Hidden),
		stack(FFNDownExps, names.down, s.Hidden, s.ExpertFF),
	}
}

// moeSpecGGUF reads the experts' keys of a llama (Mixtral) or qwen3moe file as llama.cpp's
// loader does: expert_count and expert_used_count; the experts' width is qwen3moe's
// expert_feed_forward_length (else feed_forward_length / expert_used_count, llama.cpp's
// fallback) and llama's feed_forward_length. Both always renormalize the top weights
// (build_moe_ffn's norm_w), and neither groups experts (expert_group_count is refused).
func moeSpecGGUF(s *Spec, g *ggufReader) {
	a := s.GGUFArch + "."
	s.Experts = g.intReq("expert_count")
	s.ExpertsUsed = g.intReq("expert_used_count")
	s.NormTopK = true
	s.ExpertFF = s.Intermediate
	if s.GGUFArch == "qwen3moe" {
		s.ExpertFF = g.intOpt("expert_feed_forward_length", 0)
		if s.ExpertFF == 0 && s.ExpertsUsed > 0 {
			s.ExpertFF = s.Intermediate / s.ExpertsUsed
		}
	}
	if n, ok := g.count(a + "expert_group_count"); ok && n > 1 {
		g.bad(a+"expert_group_count", "%d: grouped expert selection is not supported", n)
	}
}

// validateMoE checks a spec's experts (when it has any): at least one, at most llama.cpp's
// LLAMA_MAX_EXPERTS, each token using between one and all of them, a positive width.
func (s *Spec) validateMoE(k *keyNames, bad func(key, msg string, args ...any)) {
	if s.Experts == 0 && s.ExpertsUsed == 0 {
		return
	}
	switch {
	case s.Experts < 1 || s.Experts > maxExperts:
		bad(k.experts, "must be in [1, %d], got %d", maxExperts, s.Experts)
	case s.ExpertsUsed < 1 || s.ExpertsUsed > s.Experts:
		bad(k.expertsUsed, "must be in [1, %s %d], got %d", k.experts, s.Experts, s.ExpertsUsed)
	}
	if s.ExpertFF <= 0 {
		bad(k.expertFF, "must be positive, got %d", s.ExpertFF)
	}
}

// maxExperts is llama.cpp's LLAMA_MAX_EXPERTS.
const maxExperts = 1024
