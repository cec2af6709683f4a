package synth

import "fmt"

// initKind says how a tensor's values are drawn.
type initKind int

const (
	weightInit initKind = iota // ~N(0, 0.02), as transformers' initializer_range
	normInit                   // ~1 + N(0, 0.02): RMSNorm gains near one
	// routerInit is ~N(0, 0.16), for the routers of mixtures of experts: logits a few units
	// apart, as trained routers give (at 0.02 a token's experts would be chosen among nearly
	// equal logits, where any rounding flips the choice).
	routerInit
)

// tensorSpec is one tensor of the model, in model order.
type tensorSpec struct {
	name  string
	shape []int
	init  initKind
}

// elements returns the number of values.
func (t tensorSpec) elements() int64 {
	n := int64(1)
	for _, d := range t.shape {
		n *= int64(d)
	}
	return n
}

// tensorList lists the tensors of the model, named and shaped as HuggingFace transformers
// saves them ([out, in] for linear weights), embedding first and lm_head last.
func tensorList(s Spec, vocab int) []tensorSpec {
	hd := s.headDim()
	q, kv := s.Heads*hd, s.KVHeads*hd
	ts := []tensorSpec{{"model.embed_tokens.weight", []int{vocab, s.Hidden}, weightInit}}
	if s.Arch == Gemma2 || s.Arch == Gemma3 || s.Arch == Phi3 {
		return append(ts, otherTensors(s, vocab)...)
	}
	for i := range s.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add := func(name string, init initKind, shape ...int) {
			ts = append(ts, tensorSpec{p + name, shape, init})
		}
		add("input_layernorm.weight", normInit, s.Hidden)
		add("self_attn.q_proj.weight", weightInit, q, s.Hidden)
		add("self_attn.k_proj.weight", weightInit, kv, s.Hidden)
		add("self_attn.v_proj.weight", weightInit, kv, s.Hidden)
		if s.Arch == Qwen2 {
			add("self_attn.q_proj.bias", weightInit, q)
			add("self_attn.k_proj.bias", weightInit, kv)
			add("self_attn.v_proj.bias", weightInit, kv)
		}
		if s.Arch == Qwen3 || s.Arch == Qwen3MoE {
			add("self_attn.q_norm.weight", normInit, hd)
			add("self_attn.k_norm.weight", normInit, hd)
		}
		add("self_attn.o_proj.weight", weightInit, s.Hidden, q)
		add("post_attention_layernorm.weight", normInit, s.Hidden)
		switch s.Arch {
		case Mixtral: // block_sparse_moe: the router, then each expert's w1 (gate), w2 (down), w3 (up)
			add("block_sparse_moe.gate.weight", routerInit, s.Experts, s.Hidden)
			for e := range s.Experts {
				x := fmt.Sprintf("block_sparse_moe.experts.%d.", e)
				add(x+"w1.weight", weightInit, s.Intermediate, s.Hidden)
				add(x+"w2.weight", weightInit, s.Hidden, s.Intermediate)
				add(x+"w3.weight", weightInit, s.Intermediate, s.Hidden)
			}
			continue
		case Qwen3MoE:
			add("mlp.gate.weight", routerInit, s.Experts, s.Hidden)
			for e := range s.Experts {
				x := fmt.Sprintf("mlp.experts.%d.", e)
				add(x+"gate_proj.weight", weightInit, s.Intermediate, s.Hidden)
				add(x+"up_proj.weight", weightInit, s.Intermediate, s.Hidden)
				add(x+"down_proj.weight", weightInit, s.Hidden, s.Intermediate)
			}
			continue
		}
		add("mlp.gate_proj.weight", weightInit, s.Intermediate, s.Hidden)
		add("mlp.up_proj.weight", weightInit, s.Intermediate, s.Hidden)
		add("mlp.down_proj.weight", weightInit, s.Hidden, s.Intermediate)
	}
	ts = append(ts, tensorSpec{"model.norm.weight", []int{s.Hidden}, normInit})
	if !s.Tied {
		ts = append(ts, tensorSpec{"lm_head.weight", []int{vocab, s.Hidden}, weightInit})
	}
	return ts
}

// otherTensors lists the tensors after the embedding of Gemma 2 and 3 (four norms a layer,
// stored as w for 1 + w: drawn near 0, as trained Gemma checkpoints hold them; Gemma 3's q
// and k norms) and Phi-3 (fused qkv_proj and gate_up_proj), as transformers names them.
func otherTensors(s Spec, vocab int) []tensorSpec {
	hd := s.headDim()
	q, kv := s.Heads*hd, s.KVHeads*hd
	var ts []tensorSpec
	norm := normInit
	if s.Arch != Phi3 {
		norm = weightInit
	}
	for i := range s.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add := func(name string, init initKind, shape ...int) {
			ts = append(ts, tensorSpec{p + name, shape, init})
		}
		add("input_layernorm.weight", norm, s.Hidden)
		if s.Arch == Phi3 {
			add("self_attn.qkv_proj.weight", weightInit, q+2*kv, s.Hidden)
			add("self_attn.o_proj.weight", weightInit, s.Hidden, q)
			add("post_attention_layernorm.weight", norm, s.Hidden)
			add("mlp.gate_up_proj.weight", weightInit, 2*s.Intermediate, s.Hidden)
			add("mlp.down_proj.weight", weightInit, s.Hidden, s.Intermediate)
			continue
		}
		add("self_attn.q_proj.weight", weightInit, q, s.Hidden)
		add("self_attn.k_proj.weight", weightInit, kv, s.Hidden)
		add("self_attn.v_proj.weight", weightInit, kv, s.Hidden)
		if s.Arch == Gemma3 {
			add("self_attn.q_norm.weight", norm, hd)
			add("self_attn.k_norm.weight", norm, hd)
		}
		add("self_attn.o_proj.weight", weightInit, s.Hidden, q)
		add("post_attention_layernorm.weight", norm, s.Hidden)
		add("pre_feedforward_layernorm.weight", norm, s.Hidden)
		add("mlp.gate_proj.weight", weightInit, s.Intermediate, s.Hidden)
		add("mlp.up_proj.weight", weightInit, s.Intermediate, s.Hidden)
		add("mlp.down_proj.weight", weightInit, s.Hidden, s.Intermediate)
		add("post_feedforward_layernorm.weight", norm, s.Hidden)
	}
	ts = append(ts, tensorSpec{"model.norm.weight", []int{s.Hidden}, norm})
	if !s.Tied {
		ts = append(ts, tensorSpec{"lm_head.weight", []int{vocab, s.Hidden}, weightInit})
	}
	return ts
}
