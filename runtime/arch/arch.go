// Package arch is the one source of truth for each supported model family: how a config (from
// HuggingFace config.json or GGUF metadata) becomes a Spec, what each tensor is called in HF, GGUF
// and gqf, which transforms move a tensor between layouts, and which GGUF metadata llama.cpp needs.
package arch

import (
	"fmt"
	"sort"
	"strings"
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
	Type                 string  // "linear", "llama3", "yarn"
	Factor               float64 // all types
	LowFreqFactor        float64 // llama3
	HighFreqFactor       float64 // llama3
	OriginalContext      int     // llama3, yarn
	YarnExtFactor        float64 // yarn (0 when absent)
	YarnAttnFactor       float64 // yarn (0 when absent)
	YarnBetaFast         float64
	YarnBetaSlow         float64
	HasYarnExt, HasYarnA bool
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
	QKNorm       bool // Qwen3
	// ExplicitHeadDim records whether the config set head_dim (then GGUF gets key/value_length).
	ExplicitHeadDim bool
}

// Validate checks the internal consistency of a spec and the range of its values (see
// validate); field names refer to HF config keys.
func (s *Spec) Validate() error { return s.validate(hfKeys) }

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
)

// IsLinear reports whether a role is the weight matrix of a linear layer inside a block.
func (r Role) IsLinear() bool {
	switch r {
	case AttnQ, AttnK, AttnV, AttnOut, FFNGate, FFNUp, FFNDown:
		return true
	}
	return false
}

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

var families = []Family{llamaFamily{}, qwen2Family{}, qwen3Family{}}

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

// ForGGUF finds the family of a GGUF general.architecture value.
func ForGGUF(name string) (Family, error) {
	for _, f := range families {
		if f.GGUFArch() == name {
			return f, nil
		}
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GGUFArch())
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
