package arch

// qwen3Family covers Qwen3ForCausalLM (GGUF arch "qwen3"): the Llama layout with per-head RMSNorm
// of queries and keys (q_norm, k_norm), an explicit head_dim, and rotate-half RoPE.
type qwen3Family struct{}

func (qwen3Family) Name() string              { return "qwen3" }
func (qwen3Family) HFArchitectures() []string { return []string{"Qwen3ForCausalLM"} }
func (qwen3Family) GGUFArch() string          { return "qwen3" }

func (qwen3Family) SpecFromHF(cfg map[string]any) (*Spec, error) {
	s, r := commonSpec(cfg, "qwen3", "qwen3", false)
	s.QKNorm = true
	if r.boolOpt("attention_bias", false) {
		s.QKVBias = true
	}
	return finish(s, r)
}

func (qwen3Family) SpecFromGGUF(get func(string) (any, bool)) (*Spec, error) {
	s, g := commonSpecGGUF(get, "qwen3", "qwen3")
	s.QKNorm = true
	return finishGGUF(s, g)
}

func (qwen3Family) Tensors(s *Spec) []Tensor             { return llamaLikeTensors(s, false) }
func (qwen3Family) IgnoredHF(name string) (string, bool) { return ignoredCommon(name) }
func (qwen3Family) RopeLayout(format string) RopeLayout  { return RopeNeoX }
