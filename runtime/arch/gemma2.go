package arch

import (
	"fmt"
	"math"
)

// gemma2Family covers Gemma2ForCausalLM (GGUF arch "gemma2"; gemma3.go has Gemma 3, which
// shares this file's helpers), as transformers' modeling_gemma2.py and modeling_gemma3.py
// compute them:
//
//	h = embed(ids)·√hidden
//	per layer: a = attn(norm(h)), h += post_attention_norm(a)
//	           f = down(gelu_tanh(gate(x))·up(x)) with x = ffn_norm(h), h += post_ffw_norm(f)
//	logits = softcap(lm_head(norm(h)))
//
// Every RMSNorm multiplies by 1 + w (its weight stored as w in HF; llama.cpp and the graph
// read 1 + w: Tensor.Offset). Attention scores are scaled by query_pre_attn_scalar^−½, Gemma 2
// soft-caps them (c·tanh(x/c)) and the logits; Gemma 3 normalises q and k per head (as
// Qwen3) and gives its sliding layers a RoPE base of their own, without the rope scaling of
// the global ones. Sliding-window attention alternates with global attention (Gemma 2: every
// other layer; Gemma 3: five in six). RoPE is rotate-half in HF and GGUF alike.
type gemma2Family struct{}

func (gemma2Family) Name() string              { return "gemma2" }
func (gemma2Family) HFArchitectures() []string { return []string{"Gemma2ForCausalLM"} }
func (gemma2Family) GGUFArch() string          { return "gemma2" }

// gemma2Defaults are the values transformers' Gemma2Config takes for keys a config.json
// leaves out.
var gemma2Defaults = map[string]any{
	"vocab_size": 256000.0, "hidden_size": 2304.0, "intermediate_size": 9216.0, "num_hidden_layers": 26.0,
	"num_attention_heads": 8.0, "num_key_value_heads": 4.0, "head_dim": 256.0, "max_position_embeddings": 8192.0,
	"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "query_pre_attn_scalar": 256.0, "sliding_window": 4096.0,
	"final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "tie_word_embeddings": true,
	"hidden_activation": "gelu_pytorch_tanh",
}

// gemmaConfig returns the text model's config: text_config's keys over the top level's (as
// convert_hf_to_gguf.py merges them), the family's defaults for absent keys, the activation
// read (hidden_activation, else hidden_act) and hidden_act removed (commonSpec refuses
// anything but silu).
func gemmaConfig(cfg map[string]any, defaults map[string]any, r *cfgReader) (map[string]any, Activation) {
	m := map[string]any{}
	for k, v := range cfg {
		m[k] = v
	}
	if tc, ok := cfg["text_config"].(map[string]any); ok {
		for k, v := range tc {
			m[k] = v
		}
	}
	for k, v := range defaults {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	key := "hidden_activation"
	act, _ := m[key]
	if act == nil {
		key = "hidden_act"
		act = m[key]
	}
	delete(m, "hidden_act")
	switch act {
	case "gelu_pytorch_tanh", "gelu_new":
	default:
		r.err = append(r.err, fmt.Sprintf("%s: %v is not supported (Gemma's MLP runs gelu_pytorch_tanh)", key, act))
	}
	return m, ActGELUTanh
}

// gemmaCommon reads what Gemma 2 and 3 share: the scaled embedding, the norms, the query
// scalar, the soft-capping and the sliding window with its layer pattern (layer_types when
// the config lists them, else every def-th layer is global).
func gemmaCommon(s *Spec, m map[string]any, r *cfgReader, act Activation, defPattern int) {
	s.Act, s.EmbedScale, s.PostNorms = act, true, true
	rr := &cfgReader{m: m}
	s.QueryScalar = rr.floatOpt("query_pre_attn_scalar", float64(s.HeadDim))
	if !(s.QueryScalar > 0) || math.IsInf(s.QueryScalar, 0) {
		r.err = append(r.err, fmt.Sprintf("query_pre_attn_scalar: must be positive, got %v", s.QueryScalar))
	}
	s.AttnSoftcap = rr.floatOpt("attn_logit_softcapping", 0)
	s.FinalSoftcap = rr.floatOpt("final_logit_softcapping", 0)
	s.SlidingWindow = rr.intOpt("sliding_window", 0)
	s.SlidingPattern = defPattern
	if v, ok := m["sliding_window_pattern"]; ok && v != nil {
		s.SlidingPattern = rr.intReq("sliding_window_pattern")
	}
	if lt, ok := m["layer_types"].([]any); ok && s.Layers > 0 {
		p, err := slidingPattern(lt, s.Layers)
		if err != nil {
			r.err = append(r.err, err.Error())
		}
		s.SlidingPattern = p
	}
	r.err = append(r.err, rr.err...)
}

// slidingPattern finds llama.cpp's swa pattern P (layer l slides when l mod P < P−1; 0: every
// layer) that gives config.json's layer_types, or says that none does.
func slidingPattern(types []any, layers int) (int, error) {
	if len(types) != layers {
		return 0, fmt.Errorf("layer_types: %d entries for num_hidden_layers %d", len(types), layers)
	}
	slides := make([]bool, layers)
	all := true
	for l, t := range types {
		switch t {
		case "sliding_attention":
			slides[l] = true
		case "full_attention":
			all = false
		default:
			return 0, fmt.Errorf("layer_types: entry %d is %v, want sliding_attention or full_attention", l, t)
		}
	}
	if all {
		return 0, nil
	}
	for p := 1; p <= layers+1; p++ {
		ok := true
		for l := range slides {
			if slides[l] != (l%p < p-1) {
				ok = false
				break
			}
		}
		if ok {
			return p, nil
		}
	}
	return 0, fmt.Errorf("layer_types: the sliding layers do not recur with a period (llama.cpp's sliding_window_pattern cannot express them)")
}

func (gemma2Family) SpecFromHF(cfg map[string]any) (*Spec, error) {
	r := &cfgReader{m: cfg}
	m, act := gemmaConfig(cfg, gemma2Defaults, r)
	s, r2 := commonSpec(m, "gemma2", "gemma2", true)
	r2.err = append(r.err, r2.err...)
	gemmaCommon(s, m, r2, act, 2)
	// llama.cpp's gemma2 always caps (50 and 30 when the keys are absent) and has no output
	// matrix of its own: a config without caps or with untied embeddings would run otherwise.
	if !(s.AttnSoftcap > 0) {
		r2.err = append(r2.err, "attn_logit_softcapping: must be positive (llama.cpp's gemma2 always soft-caps the scores)")
	}
	if !(s.FinalSoftcap > 0) {
		r2.err = append(r2.err, "final_logit_softcapping: must be positive (llama.cpp's gemma2 always soft-caps the logits)")
	}
	if !s.Tied {
		r2.err = append(r2.err, "tie_word_embeddings: false is not supported for gemma2 (llama.cpp's gemma2 reads the output from token_embd)")
	}
	if r2.boolOpt("attention_bias", false) {
		r2.err = append(r2.err, "attention_bias: true is not supported for gemma2")
	}
	return finish(s, r2)
}

// llamaCppQueryScalar is the query scalar llama.cpp's gemma2 and gemma3 use (GGUF has no key
// for it): hidden/heads for the 27B models (46 and 62 layers), head_dim otherwise.
func llamaCppQueryScalar(s *Spec) float64 {
	if (s.GGUFArch == "gemma2" && s.Layers == 46) || (s.GGUFArch == "gemma3" && s.Layers == 62) {
		return float64(s.Hidden / s.Heads)
	}
	return float64(s.HeadDim)
}

// gemmaSpecGGUF reads the keys convert_hf_to_gguf.py writes for Gemma 2 and 3, with
// llama.cpp's defaults for absent ones.
func gemmaSpecGGUF(get func(string) (any, bool), family string, defPattern int) (*Spec, *ggufReader) {
	s, g := commonSpecGGUF(get, family, family)
	a := family + "."
	s.Act, s.EmbedScale, s.PostNorms, s.Tied = ActGELUTanh, true, true, true
	s.QueryScalar = llamaCppQueryScalar(s)
	s.SlidingPattern = g.intOpt("attention.sliding_window_pattern", defPattern)
	if family == "gemma2" {
		s.AttnSoftcap = g.floatOpt("attn_logit_softcapping", 50)
		s.FinalSoftcap = g.floatOpt("final_logit_softcapping", 30)
		s.SlidingWindow = g.intOpt("attention.sliding_window", 4096)
		if v, ok := g.num(a + "rope.freq_base_swa"); ok && v != s.RopeTheta {
			g.bad(a+"rope.freq_base_swa", "%g differs from %srope.freq_base %g (gquant's gemma2 has one RoPE base)", v, a, s.RopeTheta)
		}
		return s, g
	}
	s.QKNorm = true
	s.FinalSoftcap = g.floatOpt("final_logit_softcapping", 0)
	s.SlidingWindow = g.intOpt("attention.sliding_window", 0)
	s.RopeLocalTheta = g.floatOpt("rope.freq_base_swa", 10000)
	return s, g
}

func (gemma2Family) SpecFromGGUF(get func(string) (any, bool)) (*Spec, error) {
	return finishGGUF(gemmaSpecGGUF(get, "gemma2", 2))
}

func (gemma2Family) Tensors(s *Spec) []Tensor { return gemmaTensors(s) }

// gemmaTensors lists a Gemma 2 or 3 model's tensors; the text model of a multimodal Gemma 3
// checkpoint is under its own prefix (Spec.HFPrefix).
func gemmaTensors(s *Spec) []Tensor {
	pre := s.hfPrefix()
	var out []Tensor
	g := func(role Role, hf string, off float32, shape ...int) {
		out = append(out, Tensor{Ref: TensorRef{Role: role, Layer: -1}, HFName: hf, Shape: shape, Offset: off})
	}
	g(TokenEmbd, pre+"embed_tokens.weight", 0, s.Vocab, s.Hidden)
	q, kv := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("%slayers.%d.", pre, l)
		add := func(role Role, hf string, off float32, shape ...int) {
			out = append(out, Tensor{Ref: TensorRef{Role: role, Layer: l}, HFName: p + hf, Shape: shape, Offset: off})
		}
		add(AttnNorm, "input_layernorm.weight", 1, s.Hidden)
		add(AttnQ, "self_attn.q_proj.weight", 0, q, s.Hidden)
		add(AttnK, "self_attn.k_proj.weight", 0, kv, s.Hidden)
		add(AttnV, "self_attn.v_proj.weight", 0, kv, s.Hidden)
		if s.QKNorm {
			add(AttnQNorm, "self_attn.q_norm.weight", 1, s.HeadDim)
			add(AttnKNorm, "self_attn.k_norm.weight", 1, s.HeadDim)
		}
		add(AttnOut, "self_attn.o_proj.weight", 0, s.Hidden, q)
		add(AttnPostNorm, "post_attention_layernorm.weight", 1, s.Hidden)
		add(FFNNorm, "pre_feedforward_layernorm.weight", 1, s.Hidden)
		add(FFNGate, "mlp.gate_proj.weight", 0, s.Intermediate, s.Hidden)
		add(FFNUp, "mlp.up_proj.weight", 0, s.Intermediate, s.Hidden)
		add(FFNDown, "mlp.down_proj.weight", 0, s.Hidden, s.Intermediate)
		add(FFNPostNorm, "post_feedforward_layernorm.weight", 1, s.Hidden)
	}
	g(OutputNorm, pre+"norm.weight", 1, s.Hidden)
	if !s.Tied {
		lm := "lm_head.weight"
		if pre == "language_model.model." {
			lm = "language_model.lm_head.weight"
		}
		g(Output, lm, 0, s.Vocab, s.Hidden)
	}
	return out
}

func (gemma2Family) IgnoredHF(name string) (string, bool) { return ignoredCommon(name) }

func (gemma2Family) RopeLayout(string) RopeLayout { return RopeNeoX }
