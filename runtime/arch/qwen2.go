package arch

// qwen2Family covers Qwen2ForCausalLM (GGUF arch "qwen2"): the Llama layout with q/k/v biases and
// rotate-half RoPE in both HF and GGUF, so nothing is permuted.
type qwen2Family struct{}

func (qwen2Family) Name() string              { return "qwen2" }
func (qwen2Family) HFArchitectures() []string { return []string{"Qwen2ForCausalLM"} }
func (qwen2Family) GGUFArch() string          { return "qwen2" }

func (qwen2Family) SpecFromHF(cfg map[string]any) (*Spec, error) {
	s, r := commonSpec(cfg, "qwen2", "qwen2", false)
	s.QKVBias = true
	return finish(s, r)
}

func (qwen2Family) SpecFromGGUF(get func(string) (any, bool)) (*Spec, error) {
	s, g := commonSpecGGUF(get, "qwen2", "qwen2")
	s.QKVBias = true
	return finishGGUF(s, g)
}

func (qwen2Family) Tensors(s *Spec) []Tensor             { return llamaLikeTensors(s, false) }
func (qwen2Family) IgnoredHF(name string) (string, bool) { return ignoredCommon(name) }
func (qwen2Family) RopeLayout(format string) RopeLayout  { return RopeNeoX }
