package arch

import (
	"fmt"
	"regexp"
)

// llamaFamily covers LlamaForCausalLM and MistralForCausalLM (GGUF arch "llama"). llama.cpp
// applies RoPE to interleaved pairs for this arch, so the HF q/k rows are permuted on the way.
type llamaFamily struct{}

func (llamaFamily) Name() string { return "llama" }
func (llamaFamily) HFArchitectures() []string {
	return []string{"LlamaForCausalLM", "MistralForCausalLM"}
}
func (llamaFamily) GGUFArch() string { return "llama" }

func (llamaFamily) SpecFromHF(cfg map[string]any) (*Spec, error) {
	s, r := commonSpec(cfg, "llama", "llama", false)
	if r.boolOpt("attention_bias", false) {
		r.err = append(r.err, "attention_bias: true is not supported for llama")
	}
	if r.boolOpt("mlp_bias", false) {
		r.err = append(r.err, "mlp_bias: true is not supported for llama")
	}
	return finish(s, r)
}

// SpecFromGGUF reads a llama file: a Mixtral spec (family "mixtral") when llama.expert_count
// is above 1, as llama.cpp's llama model then has experts.
func (llamaFamily) SpecFromGGUF(get func(string) (any, bool)) (*Spec, error) {
	s, g := commonSpecGGUF(get, "llama", "llama")
	if n, ok := g.count("llama.expert_count"); ok && n > 1 {
		s.Family = "mixtral"
		moeSpecGGUF(s, g)
	}
	return finishGGUF(s, g)
}

func (llamaFamily) Tensors(s *Spec) []Tensor { return llamaLikeTensors(s, true) }

func (llamaFamily) IgnoredHF(name string) (string, bool) { return ignoredCommon(name) }

func (llamaFamily) RopeLayout(format string) RopeLayout {
	if format == "gguf" {
		return RopeInterleaved
	}
	return RopeNeoX
}

var rotaryBuffer = regexp.MustCompile(`^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$`)

func ignoredCommon(name string) (string, bool) {
	if rotaryBuffer.MatchString(name) {
		return "rotary buffer, recomputed from rope_theta", true
	}
	return "", false
}

// llamaLikeTensors lists the tensors of the Llama layout, with optional Qwen extras taken from
// the spec (QKVBias, QKNorm) and the experts of Mixtral and Qwen3-MoE (Experts). permute says
// whether q/k rows change RoPE layout.
func llamaLikeTensors(s *Spec, permute bool) []Tensor {
	var out []Tensor
	g := func(role Role, hf string, shape ...int) {
		out = append(out, Tensor{Ref: TensorRef{Role: role, Layer: -1}, HFName: hf, Shape: shape})
	}
	g(TokenEmbd, "model.embed_tokens.weight", s.Vocab, s.Hidden)
	if s.RopeScaling != nil && s.RopeScaling.Type == "llama3" {
		out = append(out, Tensor{Ref: TensorRef{Role: RopeFreqs, Layer: -1}, Shape: []int{s.HeadDim / 2}, Generated: true})
	}
	q, k, v := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.KVHeads*s.HeadDim
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add := func(role Role, hf string, tr Transform, shape ...int) {
			out = append(out, Tensor{Ref: TensorRef{Role: role, Layer: l}, HFName: p + hf, Shape: shape, Transform: tr})
		}
		pq, pk := NoTransform, NoTransform
		if permute {
			pq, pk = PermuteQ, PermuteK
		}
		add(AttnNorm, "input_layernorm.weight", NoTransform, s.Hidden)
		add(AttnQ, "self_attn.q_proj.weight", pq, q, s.Hidden)
		add(AttnK, "self_attn.k_proj.weight", pk, k, s.Hidden)
		add(AttnV, "self_attn.v_proj.weight", NoTransform, v, s.Hidden)
		if s.QKVBias {
			add(AttnQBias, "self_attn.q_proj.bias", pq, q)
			add(AttnKBias, "self_attn.k_proj.bias", pk, k)
			add(AttnVBias, "self_attn.v_proj.bias", NoTransform, v)
		}
		if s.QKNorm {
			add(AttnQNorm, "self_attn.q_norm.weight", NoTransform, s.HeadDim)
			add(AttnKNorm, "self_attn.k_norm.weight", NoTransform, s.HeadDim)
		}
		add(AttnOut, "self_attn.o_proj.weight", NoTransform, s.Hidden, q)
		add(FFNNorm, "post_attention_layernorm.weight", NoTransform, s.Hidden)
		if s.Experts > 0 {
			out = append(out, moeTensors(s, l, p)...)
			continue
		}
		add(FFNGate, "mlp.gate_proj.weight", NoTransform, s.Intermediate, s.Hidden)
		add(FFNUp, "mlp.up_proj.weight", NoTransform, s.Intermediate, s.Hidden)
		add(FFNDown, "mlp.down_proj.weight", NoTransform, s.Hidden, s.Intermediate)
	}
	g(OutputNorm, "model.norm.weight", s.Hidden)
	if !s.Tied {
		g(Output, "lm_head.weight", s.Vocab, s.Hidden)
	}
	return out
}
