package arch

import (
	"fmt"
	"math"
)

// phi3Family covers Phi3ForCausalLM (GGUF arch "phi3": Phi-3 and Phi-4-mini), as
// transformers' modeling_phi3.py computes it: the Llama layout with q, k and v in one matrix
// (qkv_proj: q rows, then k, then v) and gate and up in another (gate_up_proj: gate rows
// first), partial rotary (partial_rotary_factor: the first dimensions of each head rotated,
// rotate-half) and longrope scaling (per-pair divisors of the frequencies, short ones up to
// original_max_position_embeddings and long ones beyond, cos and sin times an attention
// factor).
//
// gquant cuts qkv_proj into attn_q, attn_k and attn_v, which llama.cpp's phi3 loads as well
// as its fused attn_qkv (the runtime reads convert_hf_to_gguf.py's attn_qkv files too, as
// row ranges: Spec.FusedQKV), and keeps gate_up_proj whole as ffn_up (2×intermediate rows), the
// only form llama.cpp's phi3 reads. The longrope factors become llama.cpp's
// rope_factors_long and rope_factors_short tensors; like llama.cpp, gquant takes the long
// ones when a sequence's capacity (the context a State is made for) exceeds the original
// context. Like llama.cpp's phi3, gquant ignores sliding_window (transformers masks beyond
// it: the two differ past that many tokens).
type phi3Family struct{}

func (phi3Family) Name() string              { return "phi3" }
func (phi3Family) HFArchitectures() []string { return []string{"Phi3ForCausalLM"} }
func (phi3Family) GGUFArch() string          { return "phi3" }

func (phi3Family) SpecFromHF(cfg map[string]any) (*Spec, error) {
	s, r := commonSpec(cfg, "phi3", "phi3", false)
	s.FusedGateUp = true
	if r.boolOpt("attention_bias", false) {
		r.err = append(r.err, "attention_bias: true is not supported for phi3")
	}
	// llama.cpp's phi3 sizes q and the output projection by hidden_size.
	if s.Heads > 0 && s.HeadDim != s.Hidden/s.Heads {
		r.err = append(r.err, fmt.Sprintf("head_dim: %d, but llama.cpp's phi3 needs hidden_size/num_attention_heads = %d", s.HeadDim, s.Hidden/max(s.Heads, 1)))
	}
	s.OriginalContext = r.intOpt("original_max_position_embeddings", s.Context)
	rope := r.sub("rope_parameters")
	if rope == nil {
		rope = r.sub("rope_scaling")
	}
	rr := &cfgReader{m: rope}
	prf := r.floatOpt("partial_rotary_factor", 1)
	if v, ok := rr.num("partial_rotary_factor"); ok {
		prf = v
	}
	if s.Heads > 0 {
		hfDims := int(float64(s.HeadDim) * prf)        // Phi3RotaryEmbedding
		ggDims := int(prf*float64(s.Hidden)) / s.Heads // convert_hf_to_gguf.py
		if !(prf > 0 && prf <= 1) || hfDims%2 != 0 || hfDims == 0 || hfDims != ggDims {
			r.err = append(r.err, fmt.Sprintf("partial_rotary_factor: %v gives %d rotated dimensions of %d (llama.cpp: %d); want an even count agreed by both", prf, hfDims, s.HeadDim, ggDims))
		} else if hfDims != s.HeadDim {
			s.RopeDims = hfDims
		}
	}
	if typ := rr.str("rope_type") + rr.str("type"); rope != nil && (typ == "longrope" || typ == "su" || typ == "longropesu") {
		sc := &RopeScaling{Type: "longrope", OriginalContext: s.OriginalContext}
		if v, ok := rr.num("original_max_position_embeddings"); ok {
			sc.OriginalContext = int(v)
		}
		sc.ShortFactor, sc.LongFactor = rr.floats("short_factor"), rr.floats("long_factor")
		half := s.RotDims() / 2
		if len(sc.ShortFactor) != half || len(sc.LongFactor) != half {
			r.err = append(r.err, fmt.Sprintf("rope_scaling: short_factor and long_factor have %d and %d values, want %d (half the rotated dimensions)", len(sc.ShortFactor), len(sc.LongFactor), half))
		}
		// transformers' _compute_longrope_parameters: the factor is the context's growth.
		scale := float64(s.Context) / float64(max(sc.OriginalContext, 1))
		sc.Factor = scale
		sc.LongAttnFactor = 1
		if scale > 1 {
			sc.LongAttnFactor = math.Sqrt(1 + math.Log(scale)/math.Log(float64(sc.OriginalContext)))
		}
		if v, ok := rr.num("attention_factor"); ok && v != sc.LongAttnFactor {
			r.err = append(r.err, fmt.Sprintf("rope_scaling.attention_factor: %v, but llama.cpp computes %v from the contexts", v, sc.LongAttnFactor))
		}
		s.OriginalContext = sc.OriginalContext
		s.RopeScaling = sc
		r.err = append(r.err, rr.err...)
	}
	return finish(s, r)
}

func (phi3Family) SpecFromGGUF(get func(string) (any, bool)) (*Spec, error) {
	s, g := commonSpecGGUF(get, "phi3", "phi3")
	s.FusedGateUp = true
	s.OriginalContext = g.intOpt("rope.scaling.original_context_length", s.Context)
	// The longrope factors are tensors: the loader sets RopeScaling when the file has them.
	s.RopeAttnFactor = g.floatOpt("rope.scaling.attn_factor", 1)
	return finishGGUF(s, g)
}

func (phi3Family) Tensors(s *Spec) []Tensor {
	var out []Tensor
	g := func(role Role, hf string, shape ...int) {
		out = append(out, Tensor{Ref: TensorRef{Role: role, Layer: -1}, HFName: hf, Shape: shape})
	}
	g(TokenEmbd, "model.embed_tokens.weight", s.Vocab, s.Hidden)
	if sc := s.RopeScaling; sc != nil && sc.Type == "longrope" {
		for _, r := range []Role{RopeFactorsLong, RopeFactorsShort} {
			out = append(out, Tensor{Ref: TensorRef{Role: r, Layer: -1}, Shape: []int{s.RotDims() / 2}, Generated: true})
		}
	}
	q, kv := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add := func(t Tensor) {
			t.Ref.Layer = l
			t.HFName = p + t.HFName
			out = append(out, t)
		}
		qkv := []int{q + 2*kv, s.Hidden}
		fused := ""
		if s.FusedQKV {
			fused = fmt.Sprintf("blk.%d.attn_qkv.weight", l)
		}
		add(Tensor{Ref: TensorRef{Role: AttnNorm}, HFName: "input_layernorm.weight", Shape: []int{s.Hidden}})
		add(Tensor{Ref: TensorRef{Role: AttnQ}, HFName: "self_attn.qkv_proj.weight", Shape: []int{q, s.Hidden}, SrcShape: qkv, GGUFSrc: fused})
		add(Tensor{Ref: TensorRef{Role: AttnK}, HFName: "self_attn.qkv_proj.weight", Shape: []int{kv, s.Hidden}, SrcShape: qkv, SrcRow0: q, GGUFSrc: fused})
		add(Tensor{Ref: TensorRef{Role: AttnV}, HFName: "self_attn.qkv_proj.weight", Shape: []int{kv, s.Hidden}, SrcShape: qkv, SrcRow0: q + kv, GGUFSrc: fused})
		add(Tensor{Ref: TensorRef{Role: AttnOut}, HFName: "self_attn.o_proj.weight", Shape: []int{s.Hidden, q}})
		add(Tensor{Ref: TensorRef{Role: FFNNorm}, HFName: "post_attention_layernorm.weight", Shape: []int{s.Hidden}})
		add(Tensor{Ref: TensorRef{Role: FFNUp}, HFName: "mlp.gate_up_proj.weight", Shape: []int{2 * s.Intermediate, s.Hidden}})
		add(Tensor{Ref: TensorRef{Role: FFNDown}, HFName: "mlp.down_proj.weight", Shape: []int{s.Hidden, s.Intermediate}})
	}
	g(OutputNorm, "model.norm.weight", s.Hidden)
	if !s.Tied {
		g(Output, "lm_head.weight", s.Vocab, s.Hidden)
	}
	return out
}

func (phi3Family) IgnoredHF(name string) (string, bool) { return ignoredCommon(name) }
func (phi3Family) RopeLayout(string) RopeLayout         { return RopeNeoX }

// LongRopeFactors returns the frequency divisors of a longrope spec for a sequence capacity of
// ctx positions (llama.cpp's rule: the long ones beyond the original context) and the
// factor of cos and sin; nil, 1 for other specs.
func LongRopeFactors(s *Spec, ctx int) ([]float32, float32) {
	sc := s.RopeScaling
	if sc == nil || sc.Type != "longrope" {
		return nil, 1
	}
	f := sc.ShortFactor
	if ctx > sc.OriginalContext {
		f = sc.LongFactor
	}
	out := make([]float32, len(f))
	for i, v := range f {
		out[i] = float32(v)
	}
	return out, float32(sc.LongAttnFactor)
}
