package synth

import (
	"fmt"
	"slices"
	"strings"
)

// The architectures the generator writes (HF class names, config.json "architectures").
const (
	Llama   = "LlamaForCausalLM"
	Mistral = "MistralForCausalLM"
	Qwen2   = "Qwen2ForCausalLM"
	Qwen3   = "Qwen3ForCausalLM"
	Gemma2  = "Gemma2ForCausalLM"
	Gemma3  = "Gemma3ForCausalLM"
	Phi3    = "Phi3ForCausalLM"
	Mixtral = "MixtralForCausalLM"
	// Qwen3MoE is Qwen3-MoE's class.
	Qwen3MoE = "Qwen3MoeForCausalLM"
)

// modelType maps each architecture to config.json's model_type.
var modelType = map[string]string{Llama: "llama", Mistral: "mistral", Qwen2: "qwen2", Qwen3: "qwen3",
	Gemma2: "gemma2", Gemma3: "gemma3_text", Phi3: "phi3", Mixtral: "mixtral", Qwen3MoE: "qwen3_moe"}

// archNames lists the architectures, for errors.
var archNames = []string{Llama, Mistral, Qwen2, Qwen3, Gemma2, Gemma3, Phi3, Mixtral, Qwen3MoE}

// isMoE reports whether an architecture's FFNs are mixtures of experts.
func isMoE(arch string) bool { return arch == Mixtral || arch == Qwen3MoE }

// Spec is the shape of a synthetic model.
type Spec struct {
	Arch   string // one of Llama, Mistral, Qwen2, Qwen3, Gemma2, Gemma3, Phi3, Mixtral, Qwen3MoE
	Hidden int
	// Intermediate is the FFN's width; of each expert for Mixtral and Qwen3-MoE (Qwen3-MoE's
	// moe_intermediate_size; its intermediate_size, which no layer uses, is written as
	// Intermediate × ExpertsUsed, llama.cpp's fallback for the experts' width).
	Intermediate int
	Layers       int
	Heads        int
	KVHeads      int
	HeadDim      int // 0: Hidden/Heads, and head_dim is left out of config.json (Qwen3 always writes it)
	Vocab        int // 0: the tokenizer's size (max id + 1)
	Tied         bool
	RopeTheta    float64
	RMSNormEps   float64
	MaxPositions int
	RopeScaling  *RopeScaling // nil: "rope_scaling": null

	// Gemma 2 and 3: the sliding window (and, Gemma 3, its layer pattern: layer l slides when
	// l mod P < P−1, written as sliding_window_pattern and layer_types), the soft-caps (0:
	// null), query_pre_attn_scalar (0: head_dim) and Gemma 3's local RoPE base.
	SlidingWindow, SlidingPattern int
	AttnSoftcap, FinalSoftcap     float64
	QueryPreAttnScalar            float64
	RopeLocalTheta                float64
	// Phi-3: partial_rotary_factor (0: absent) and original_max_position_embeddings.
	PartialRotary   float64
	OriginalContext int
	// Mixtral and Qwen3-MoE: the experts of every layer and those each token uses; Qwen3-MoE's
	// norm_topk_prob (Mixtral always renormalizes).
	Experts, ExpertsUsed int
	NormTopK             bool
}

// RopeScaling is config.json's rope_scaling object: Llama 3.1+'s ("llama3"), a linear one
// (Gemma 3's global layers) or Phi-3's longrope (its short and long factors).
type RopeScaling struct {
	Type                    string // "llama3", "linear", "longrope"
	Factor                  float64
	LowFreqFactor           float64
	HighFreqFactor          float64
	OriginalMaxPositions    int
	ShortFactor, LongFactor []float64
}

// Llama3Scaling is the rope_scaling of Llama 3.2 1B/3B.
func Llama3Scaling() *RopeScaling {
	return &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
}

// presets are the named specs. The tiny ones have every row length a multiple of 256, so
// that every block encoding applies (tiny-qwen3moe's head_dim 128 differs from hidden/heads); qwen3-0.6b has the shapes of Qwen/Qwen3-0.6B and
// llama3-8b those of meta-llama/Meta-Llama-3-8B (16 GB of bf16: for the scale benchmarks).
var presets = map[string]Spec{
	"tiny-llama": {Arch: Llama, Hidden: 256, Intermediate: 512, Layers: 2, Heads: 4, KVHeads: 4,
		RopeTheta: 10000, RMSNormEps: 1e-5, MaxPositions: 2048},
	"tiny-llama3": {Arch: Llama, Hidden: 256, Intermediate: 768, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Tied: true,
		RopeTheta: 500000, RMSNormEps: 1e-5, MaxPositions: 131072, RopeScaling: Llama3Scaling()},
	"tiny-mistral": {Arch: Mistral, Hidden: 256, Intermediate: 512, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64,
		RopeTheta: 1000000, RMSNormEps: 1e-5, MaxPositions: 32768},
	"tiny-qwen2": {Arch: Qwen2, Hidden: 256, Intermediate: 768, Layers: 2, Heads: 4, KVHeads: 2,
		RopeTheta: 1000000, RMSNormEps: 1e-6, MaxPositions: 32768},
	"tiny-qwen3": {Arch: Qwen3, Hidden: 256, Intermediate: 768, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 128, Tied: true,
		RopeTheta: 1000000, RMSNormEps: 1e-6, MaxPositions: 40960},
	"tiny-gemma2": {Arch: Gemma2, Hidden: 256, Intermediate: 512, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 128, Tied: true,
		RopeTheta: 10000, RMSNormEps: 1e-6, MaxPositions: 8192, SlidingWindow: 64, AttnSoftcap: 50, FinalSoftcap: 30},
	"tiny-gemma3": {Arch: Gemma3, Hidden: 256, Intermediate: 512, Layers: 6, Heads: 4, KVHeads: 1, HeadDim: 128, Tied: true,
		RopeTheta: 1000000, RopeLocalTheta: 10000, RMSNormEps: 1e-6, MaxPositions: 32768, SlidingWindow: 64, SlidingPattern: 6,
		RopeScaling: &RopeScaling{Type: "linear", Factor: 8}},
	"tiny-phi3": {Arch: Phi3, Hidden: 256, Intermediate: 512, Layers: 2, Heads: 4, KVHeads: 2,
		RopeTheta: 10000, RMSNormEps: 1e-5, MaxPositions: 4096, OriginalContext: 4096, PartialRotary: 0.75},
	"tiny-mixtral": {Arch: Mixtral, Hidden: 256, Intermediate: 512, Layers: 2, Heads: 4, KVHeads: 2,
		RopeTheta: 1000000, RMSNormEps: 1e-5, MaxPositions: 32768, Experts: 8, ExpertsUsed: 2},
	"tiny-qwen3moe": {Arch: Qwen3MoE, Hidden: 256, Intermediate: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 128,
		RopeTheta: 1000000, RMSNormEps: 1e-6, MaxPositions: 40960, Experts: 8, ExpertsUsed: 2, NormTopK: true},
	"qwen3-0.6b": {Arch: Qwen3, Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, Tied: true, RopeTheta: 1000000, RMSNormEps: 1e-6, MaxPositions: 40960},
	"llama3-8b": {Arch: Llama, Hidden: 4096, Intermediate: 14336, Layers: 32, Heads: 32, KVHeads: 8,
		Vocab: 128256, RopeTheta: 500000, RMSNormEps: 1e-5, MaxPositions: 8192},
}

// Presets lists the preset names, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns a named spec (see Presets).
func Preset(name string) (Spec, error) {
	s, ok := presets[name]
	if !ok {
		return Spec{}, fmt.Errorf("synth: unknown preset %q (have %s)", name, strings.Join(Presets(), ", "))
	}
	if s.RopeScaling != nil {
		rs := *s.RopeScaling
		rs.ShortFactor, rs.LongFactor = slices.Clone(rs.ShortFactor), slices.Clone(rs.LongFactor)
		s.RopeScaling = &rs // callers may edit their copy
	}
	return s, nil
}

// headDim returns the attention head size.
func (s Spec) headDim() int {
	if s.HeadDim > 0 {
		return s.HeadDim
	}
	return s.Hidden / s.Heads
}

// Validate reports every inconsistency of the spec in one line.
func (s Spec) Validate() error {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}
	if _, ok := modelType[s.Arch]; !ok {
		bad("arch", "%q is not one of %s", s.Arch, strings.Join(archNames, ", "))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"hidden", s.Hidden}, {"intermediate", s.Intermediate}, {"layers", s.Layers}, {"heads", s.Heads}, {"kv-heads", s.KVHeads}, {"max-positions", s.MaxPositions}} {
		if f.v <= 0 {
			bad(f.name, "%d, must be positive", f.v)
		}
	}
	if s.HeadDim < 0 || s.Vocab < 0 {
		bad("head-dim/vocab", "must not be negative")
	}
	if s.Heads > 0 && s.KVHeads > 0 && s.Heads%s.KVHeads != 0 {
		bad("kv-heads", "%d does not divide heads %d", s.KVHeads, s.Heads)
	}
	if s.Heads > 0 && s.HeadDim == 0 && s.Hidden%s.Heads != 0 {
		bad("heads", "%d does not divide hidden %d: set head-dim", s.Heads, s.Hidden)
	}
	if s.Heads > 0 && s.headDim()%2 != 0 {
		bad("head-dim", "%d is odd: RoPE rotates pairs", s.headDim())
	}
	if !(s.RopeTheta > 0) || !(s.RMSNormEps > 0) {
		bad("rope-theta/rms-norm-eps", "must be positive")
	}
	if rs := s.RopeScaling; rs != nil && (rs.Type == "" || (!(rs.Factor > 0) && rs.Type != "longrope")) {
		bad("rope-scaling", "needs a type and a positive factor")
	}
	if rs := s.RopeScaling; rs != nil && rs.Type == "longrope" && (len(rs.ShortFactor) == 0 || len(rs.ShortFactor) != len(rs.LongFactor)) {
		bad("rope-scaling", "longrope needs as many short as long factors")
	}
	switch {
	case isMoE(s.Arch) && (s.Experts <= 0 || s.ExpertsUsed <= 0 || s.ExpertsUsed > s.Experts):
		bad("experts", "%d experts, %d used: want at least one, used ones among them", s.Experts, s.ExpertsUsed)
	case !isMoE(s.Arch) && (s.Experts != 0 || s.ExpertsUsed != 0):
		bad("experts", "%s has no experts", s.Arch)
	}
	if len(errs) > 0 {
		return fmt.Errorf("synth: spec: %s", strings.Join(errs, "; "))
	}
	return nil
}
