// Package arch is the one source of truth for each supported model family: how a config (from
// HuggingFace config.json or GGUF metadata) becomes a Spec, what each tensor is called in HF, GGUF
// and gqf, which transforms move a tensor between layouts, and which GGUF metadata llama.cpp needs.
package arch

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gquant/gquant/formats/stats"
)

// RopeLayout says how rotary embeddings pair the dimensions of a head.
type RopeLayout int

const (
	// RopeNeoX rotates dimension j with j+head_dim/2 (HF "rotate_half"; llama.cpp NEOX).
	RopeNeoX RopeLayout = iota
	// RopeInterleaved rotates dimension 2j with 2j+1 (llama.cpp NORM, Meta's original layout).
	RopeInterleaved
)

func (l RopeLayout) String() string {
	if l == RopeInterleaved {
		return "interleaved"
	}
	return "neox"
}

// RopeScaling is the rope scaling a config asks for.
type RopeScaling struct {
	Type                 string  // "linear", "llama3", "yarn", "longrope"
	Factor               float64 // all types
	LowFreqFactor        float64 // llama3
	HighFreqFactor       float64 // llama3
	OriginalContext      int     // llama3, yarn
	YarnExtFactor        float64 // yarn (0 when absent)
	YarnAttnFactor       float64 // yarn (0 when absent)
	YarnBetaFast         float64
	YarnBetaSlow         float64
	HasYarnExt, HasYarnA bool
	// longrope (Phi-3): per-pair divisors of the frequencies for contexts up to
	// OriginalContext (short) and beyond it (long), and the factor of cos and sin.
	ShortFactor, LongFactor []float64
	LongAttnFactor          float64
}

// Spec is everything the converter and the runtime need to know about one model.
type Spec struct {
	Family       string // family name: "llama", "qwen2", "qwen3"
	HFArch       string // architectures[0] of config.json, when known
	GGUFArch     string // general.architecture
	Hidden       int
	Intermediate int
	Layers       int
	Heads        int
	KVHeads      int
	HeadDim      int
	Vocab        int
	Context      int
	RMSEps       float64
	RopeTheta    float64
	RopeScaling  *RopeScaling
	Tied         bool // output shares token_embd
	QKVBias      bool // Qwen2
	QKNorm       bool // Qwen3, Gemma 3
	// ExplicitHeadDim records whether the config set head_dim (then GGUF gets key/value_length).
	ExplicitHeadDim bool

	// Gemma 2 and 3, Phi-3 (zero values: the Llama layout).
	Act        Activation // the FFN's gate activation
	EmbedScale bool       // embeddings scaled by √hidden (Gemma)
	PostNorms  bool       // RMSNorm after attention and after the FFN, before each residual add (Gemma)
	// QueryScalar is query_pre_attn_scalar: scores scaled by its −½ power (0: head_dim's).
	QueryScalar float64
	// AttnSoftcap and FinalSoftcap soft-cap the attention scores and the logits: x ↦
	// c·tanh(x/c) (0: none).
	AttnSoftcap, FinalSoftcap float64
	// SlidingWindow is the span of sliding-window attention (0: none): a token sees itself and
	// the SlidingWindow−1 positions before it, on the layers SlidingPattern selects: layer l
	// slides when l mod P < P−1 (llama.cpp's swa pattern; 0: every layer).
	SlidingWindow, SlidingPattern int
	// RopeLocalTheta is the RoPE base of the sliding layers, which take no rope scaling
	// (Gemma 3's rope_local_base_freq); 0: every layer has the global RoPE.
	RopeLocalTheta float64
	// RopeDims is the number of rotated dimensions of each head (partial rotary: the first
	// RopeDims, the rest passed through); 0 means HeadDim.
	RopeDims int
	// FusedGateUp: the FFN's gate and up projections are one matrix (ffn_up, gate rows first,
	// 2×Intermediate rows), as Phi-3 stores them and llama.cpp's phi3 reads them.
	FusedGateUp bool
	// FusedQKV: a Phi-3 GGUF holds q, k and v as one attn_qkv matrix (convert_hf_to_gguf.py
	// writes it so; gquant writes attn_q/k/v), read as their row ranges.
	FusedQKV bool
	// OriginalContext is Phi-3's original_max_position_embeddings (llama.cpp's
	// rope.scaling.original_context_length); RopeAttnFactor its rope.scaling.attn_factor as a
	// GGUF file states it (the loader turns both into a longrope RopeScaling).
	OriginalContext int
	RopeAttnFactor  float64
	// HFPrefix is the HF name prefix of the decoder's tensors ("" for "model."; a multimodal
	// checkpoint's text model has its own, set from the checkpoint's names by CheckHF).
	HFPrefix string

	// Mixtral and Qwen3-MoE: every layer's FFN is a routed mixture of Experts SwiGLU experts of
	// ExpertFF rows each (0 Experts: a dense FFN); each token goes through the ExpertsUsed
	// experts of the highest router probabilities, their outputs weighted by those
	// probabilities, renormalized to sum to 1 when NormTopK (Mixtral always; Qwen3-MoE's
	// norm_topk_prob).
	Experts, ExpertsUsed, ExpertFF int
	NormTopK                       bool
}

// hfPrefix is the HF name prefix of the decoder's tensors.
func (s *Spec) hfPrefix() string {
	if s.HFPrefix == "" {
		return "model."
	}
	return s.HFPrefix
}

// Activation is the FFN's gate activation.
type Activation int

const (
	// ActSiLU gates with silu (SwiGLU).
	ActSiLU Activation = iota
	// ActGELUTanh gates with the tanh approximation of GELU (GeGLU, transformers'
	// gelu_pytorch_tanh).
	ActGELUTanh
)

func (a Activation) String() string {
	if a == ActGELUTanh {
		return "gelu_pytorch_tanh"
	}
	return "silu"
}

// IsSliding reports whether layer l attends over a sliding window.
func (s *Spec) IsSliding(l int) bool {
	if s.SlidingWindow <= 0 {
		return false
	}
	p := s.SlidingPattern
	return p == 0 || l%p < p-1
}

// RotDims is the number of rotated dimensions of each head.
func (s *Spec) RotDims() int {
	if s.RopeDims > 0 {
		return s.RopeDims
	}
	return s.HeadDim
}

// Validate checks the internal consistency of a spec and the range of its values (see
// validate); field names refer to HF config keys.
func (s *Spec) Validate() error { return s.validate(hfKeysFor(s)) }

// Role names a tensor's job. The GGUF name of a layer tensor is "blk.N." + role; of a global
// tensor, the role itself.
type Role string

// Tensor roles (GGUF spelling, suffix included).
const (
	TokenEmbd  Role = "token_embd.weight"
	OutputNorm Role = "output_norm.weight"
	Output     Role = "output.weight"
	RopeFreqs  Role = "rope_freqs.weight"
	AttnNorm   Role = "attn_norm.weight"
	AttnQ      Role = "attn_q.weight"
	AttnK      Role = "attn_k.weight"
	AttnV      Role = "attn_v.weight"
	AttnQBias  Role = "attn_q.bias"
	AttnKBias  Role = "attn_k.bias"
	AttnVBias  Role = "attn_v.bias"
	AttnQNorm  Role = "attn_q_norm.weight"
	AttnKNorm  Role = "attn_k_norm.weight"
	AttnOut    Role = "attn_output.weight"
	FFNNorm    Role = "ffn_norm.weight"
	FFNGate    Role = "ffn_gate.weight"
	FFNUp      Role = "ffn_up.weight"
	FFNDown    Role = "ffn_down.weight"
	// Gemma's norms after attention and after the FFN.
	AttnPostNorm Role = "post_attention_norm.weight"
	FFNPostNorm  Role = "post_ffw_norm.weight"
	// Phi-3's longrope frequency divisors (llama.cpp's names; generated from the config).
	RopeFactorsLong  Role = "rope_factors_long.weight"
	RopeFactorsShort Role = "rope_factors_short.weight"
	// Mixture of experts (Mixtral, Qwen3-MoE): the router, [experts, hidden], and the experts'
	// gate, up and down matrices stacked into one tensor each ([experts, rows, cols]: expert e's
	// matrix is the e-th), as llama.cpp stores them.
	FFNGateInp  Role = "ffn_gate_inp.weight"
	FFNGateExps Role = "ffn_gate_exps.weight"
	FFNUpExps   Role = "ffn_up_exps.weight"
	FFNDownExps Role = "ffn_down_exps.weight"
)

// IsLinear reports whether a role is the weight matrix of a linear layer inside a block (a
// stack of expert matrices counts: each of its matrices is one). The router of a mixture of
// experts is not one (llama-quantize keeps it as it is; its input is observed all the same).
func (r Role) IsLinear() bool {
	switch r {
	case AttnQ, AttnK, AttnV, AttnOut, FFNGate, FFNUp, FFNDown, FFNGateExps, FFNUpExps, FFNDownExps:
		return true
	}
	return false
}

// IsExperts reports whether a role is a stack of expert matrices.
func (r Role) IsExperts() bool { return r == FFNGateExps || r == FFNUpExps || r == FFNDownExps }

// ExpertWeight names matrix e of the stack of expert matrices stack (a GGUF name): the key of
// that expert's input statistics ("blk.0.ffn_up_exps.weight#3", stats.ExpertWeight), and the
// name the runtime's hooks give its input.
func ExpertWeight(stack string, e int) string { return stats.ExpertWeight(stack, e) }

// SplitExpert undoes ExpertWeight: the stack and the expert of an expert matrix's name; ok is
// false for any other name.
func SplitExpert(name string) (stack string, e int, ok bool) { return stats.SplitExpert(name) }

// TensorRef is one tensor of a model: a role in a layer (Layer = -1 for global tensors).
type TensorRef struct {
	Role  Role
	Layer int
}

// GGUFName is the llama.cpp name of the tensor.
func (t TensorRef) GGUFName() string {
	if t.Layer < 0 {
		return string(t.Role)
	}
	return fmt.Sprintf("blk.%d.%s", t.Layer, t.Role)
}

// Transform is a layout change applied to a source tensor on its way to GGUF.
type Transform int

const (
	// NoTransform copies the tensor.
	NoTransform Transform = iota
	// PermuteQ reorders the rows of each query head from rotate-half to interleaved order.
	PermuteQ
	// PermuteK does the same for each key head (KV head count).
	PermuteK
)

func (t Transform) String() string {
	switch t {
	case PermuteQ:
		return "permute-q"
	case PermuteK:
		return "permute-k"
	}
	return ""
}

// Tensor is one expected tensor of a model: where it comes from and its shape.
type Tensor struct {
	Ref       TensorRef
	HFName    string    // name in the HF checkpoint ("" for generated tensors)
	Shape     []int     // HF order: [out, in] for matrices, [n] for vectors
	Transform Transform // applied from HF to GGUF
	Generated bool      // computed from the config (rope_freqs), not read from the checkpoint
	// Offset is added to every stored value on the way from the HF checkpoint, in every
	// format: Gemma's RMSNorm multiplies by 1 + w, llama.cpp's (and the graph's) by its
	// weight, so convert_hf_to_gguf.py stores 1 + w (in float32) and so does gquant.
	Offset float32
	// SrcRow0 and SrcShape locate a tensor cut from a fused HF tensor (Phi-3's qkv_proj): its
	// rows start at row SrcRow0 of HFName, whose shape is SrcShape (nil: the tensor is HFName
	// whole, of shape Shape).
	SrcRow0  int
	SrcShape []int
	// GGUFSrc names the GGUF tensor it is cut from the same way, when a GGUF file holds it
	// fused (llama.cpp's phi3 attn_qkv; "": the tensor is stored under its own name).
	GGUFSrc string
	// Parts, for a stack of expert matrices that the HF checkpoint stores one tensor per
	// expert (Mixtral's block_sparse_moe.experts.E.w1, Qwen3-MoE's mlp.experts.E.gate_proj),
	// names those tensors in expert order, each of shape Shape[1:]; HFName is then the first.
	// Stacked in that order they are the GGUF tensor, as convert_hf_to_gguf.py stacks them.
	Parts []string
}

// HFShape is the shape of the HF tensor the tensor is read from (of each part, for a stack
// of parts).
func (t Tensor) HFShape() []int {
	if t.SrcShape != nil {
		return t.SrcShape
	}
	if t.Parts != nil {
		return t.Shape[1:]
	}
	return t.Shape
}

// HFNames lists the HF tensors the tensor is read from: its parts, or HFName.
func (t Tensor) HFNames() []string {
	if t.Parts != nil {
		return t.Parts
	}
	return []string{t.HFName}
}

// Family is one model family.
type Family interface {
	// Name is the family's short name ("llama").
	Name() string
	// HFArchitectures lists the config.json architectures[0] values the family handles.
	HFArchitectures() []string
	// GGUFArch is general.architecture in GGUF files of this family.
	GGUFArch() string
	// SpecFromHF builds a spec from a parsed config.json.
	SpecFromHF(cfg map[string]any) (*Spec, error)
	// SpecFromGGUF builds a spec from GGUF metadata.
	SpecFromGGUF(get func(key string) (any, bool)) (*Spec, error)
	// Tensors lists every tensor a model of this spec has, in the order GGUF files hold them.
	Tensors(s *Spec) []Tensor
	// IgnoredHF reports HF tensors that carry no weights (buffers) and are dropped on purpose,
	// with the reason.
	IgnoredHF(name string) (reason string, ok bool)
	// RopeLayout is the RoPE pairing of the weights as stored in format "hf" or "gguf".
	RopeLayout(format string) RopeLayout
}

var families = []Family{llamaFamily{}, qwen2Family{}, qwen3Family{}, gemma2Family{}, gemma3Family{}, phi3Family{},
	mixtralFamily{}, qwen3MoeFamily{}}

// Families lists every supported family.
func Families() []Family { return families }

// ForHF finds the family of an HF architecture name.
func ForHF(hfArch string) (Family, error) {
	for _, f := range families {
		for _, a := range f.HFArchitectures() {
			if a == hfArch {
				return f, nil
			}
		}
	}
	return nil, fmt.Errorf("architectures: unsupported architecture %q (supported: %s)", hfArch, strings.Join(SupportedHF(), ", "))
}

// ForSpec finds the family of a spec (by Spec.Family).
func ForSpec(s *Spec) (Family, error) {
	for _, f := range families {
		if f.Name() == s.Family {
			return f, nil
		}
	}
	return nil, fmt.Errorf("family %q is unknown", s.Family)
}

// ForGGUF finds the family of a GGUF general.architecture value: the first with that
// architecture ("llama": llamaFamily, whose SpecFromGGUF gives a Mixtral spec when the file
// has experts; ForSpec then finds its family).
func ForGGUF(name string) (Family, error) {
	for _, f := range families {
		if f.GGUFArch() == name {
			return f, nil
		}
	}
	var names []string
	for _, f := range families {
		if !slices.Contains(names, f.GGUFArch()) {
			names = append(names, f.GGUFArch())
		}
	}
	return nil, fmt.Errorf("general.architecture: unsupported architecture %q (supported: %s)", name, strings.Join(names, ", "))
}

// SupportedHF lists every supported HF architecture name, sorted.
func SupportedHF() []string {
	var out []string
	for _, f := range families {
		out = append(out, f.HFArchitectures()...)
	}
	sort.Strings(out)
	return out
}
