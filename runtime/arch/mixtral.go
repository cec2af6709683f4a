package arch

// mixtralFamily covers MixtralForCausalLM (GGUF arch "llama", with experts: llama.cpp runs
// Mixtral as a llama model whose FFNs are mixtures of experts), as transformers'
// modeling_mixtral.py computes it: the Llama layout (q/k rows permuted for llama.cpp's
// interleaved RoPE) with a routed mixture of num_local_experts SwiGLU experts of
// intermediate_size rows in every layer, num_experts_per_tok of them per token, their softmax
// weights renormalized (see moe.go). Like llama.cpp, gquant ignores sliding_window
// (transformers masks beyond it: the two differ past that many tokens) and the router's
// jitter noise (training only).
type mixtralFamily struct{}

func (mixtralFamily) Name() string              { return "mixtral" }
func (mixtralFamily) HFArchitectures() []string { return []string{"MixtralForCausalLM"} }
func (mixtralFamily) GGUFArch() string          { return "llama" }

func (mixtralFamily) SpecFromHF(cfg map[string]any) (*Spec, error) {
	s, r := commonSpec(cfg, "mixtral", "llama", false)
	s.Experts = r.intReq("num_local_experts")
	s.ExpertsUsed = r.intReq("num_experts_per_tok")
	s.ExpertFF, s.NormTopK = s.Intermediate, true
	if r.boolOpt("attention_bias", false) {
		r.err = append(r.err, "attention_bias: true is not supported for mixtral")
	}
	return finish(s, r)
}

// SpecFromGGUF reads a llama file with experts (ForGGUF gives llamaFamily for "llama", whose
// SpecFromGGUF comes here through the same keys).
func (mixtralFamily) SpecFromGGUF(get func(string) (any, bool)) (*Spec, error) {
	s, g := commonSpecGGUF(get, "mixtral", "llama")
	moeSpecGGUF(s, g)
	return finishGGUF(s, g)
}

func (mixtralFamily) Tensors(s *Spec) []Tensor             { return llamaLikeTensors(s, true) }
func (mixtralFamily) IgnoredHF(name string) (string, bool) { return ignoredCommon(name) }
func (mixtralFamily) RopeLayout(format string) RopeLayout  { return llamaFamily{}.RopeLayout(format) }
