package convert

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/runtime/arch"
)

// Preset is a --scheme for GGUF output: a base type and, for the K-quant mixes, llama-quantize's
// per-tensor rules (src/llama-quant.cpp, llama_tensor_get_type_impl).
type Preset struct {
	Name     string
	Base     gguf.Type
	FileType uint32 // general.file_type (enum llama_ftype)
}

// Presets lists every --scheme gquant writes as GGUF, with llama.cpp's ftype numbers.
var Presets = []Preset{
	{"f32", gguf.F32, 0},
	{"f16", gguf.F16, 1},
	{"bf16", gguf.BF16, 32},
	{"q8_0", gguf.Q8_0, 7},
	{"q4_0", gguf.Q4_0, 2},
	{"q4_1", gguf.Q4_1, 3},
	{"q5_0", gguf.Q5_0, 8},
	{"q5_1", gguf.Q5_1, 9},
	{"q4_k_s", gguf.Q4_K, 14},
	{"q4_k_m", gguf.Q4_K, 15},
	{"q5_k_s", gguf.Q5_K, 16},
	{"q5_k_m", gguf.Q5_K, 17},
	{"q6_k", gguf.Q6_K, 18},
	{"iq4_nl", gguf.IQ4_NL, 25},
	{"q2_k", gguf.Q2_K, 10},
	{"q2_k_s", gguf.Q2_K, 21},
	{"q3_k_s", gguf.Q3_K, 11},
	{"q3_k_m", gguf.Q3_K, 12},
	{"q3_k_l", gguf.Q3_K, 13},
	{"iq4_xs", gguf.IQ4_XS, 30},
	// llama-quantize's aliases (tools/quantize/quantize.cpp QUANT_OPTIONS): the same ftype, so
	// the same file.
	{"q3_k", gguf.Q3_K, 12},
	{"q4_k", gguf.Q4_K, 15},
	{"q5_k", gguf.Q5_K, 17},
}

// llama.cpp's enum llama_ftype (include/llama.h) for the mixes the policy distinguishes.
const (
	ftQ4_0   = 2
	ftQ5_0   = 8
	ftQ2_K   = 10
	ftQ3_K_S = 11
	ftQ3_K_M = 12
	ftQ3_K_L = 13
	ftQ4_K_S = 14
	ftQ4_K_M = 15
	ftQ5_K_M = 17
	ftQ2_K_S = 21
	ftIQ4_NL = 25
	ftIQ4_XS = 30
)

// PresetByName finds a preset (case-insensitive).
func PresetByName(name string) (Preset, error) {
	n := strings.ToLower(name)
	var names []string
	for _, p := range Presets {
		if p.Name == n {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Preset{}, fmt.Errorf("--scheme: unknown scheme %q (known: %s)", name, strings.Join(names, ", "))
}

// Override is one --tensor-type REGEX=TYPE rule.
type Override struct {
	Pattern *regexp.Regexp
	Type    gguf.Type
	Text    string
}

// ParseOverride parses "REGEX=TYPE".
func ParseOverride(s string) (Override, error) {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 || i == len(s)-1 {
		return Override{}, fmt.Errorf("--tensor-type: %q: want REGEX=TYPE", s)
	}
	re, err := regexp.Compile(s[:i])
	if err != nil {
		return Override{}, fmt.Errorf("--tensor-type: %q: %v", s, err)
	}
	t, err := gguf.ParseType(s[i+1:])
	if err != nil {
		return Override{}, fmt.Errorf("--tensor-type: %q: %v", s, err)
	}
	return Override{Pattern: re, Type: t, Text: s}, nil
}

// Choice is the encoding chosen for one tensor and why.
type Choice struct {
	Type     gguf.Type
	Wanted   gguf.Type // what the rules asked for before any shape fallback
	Reason   string    // rule that decided (empty for the preset's base type)
	Fallback string    // non-empty when the row length forced another type
	// NeedsImatrix: llama-quantize refuses to write this tensor without an importance matrix
	// (llama-quant.cpp tensor_requires_imatrix: a Q2_K tensor of a Q2_K_S file other than
	// token_embd and output).
	NeedsImatrix bool
}

// policyState carries the counters llama-quantize keeps while it walks the tensors.
type policyState struct {
	preset     Preset
	overrides  []Override
	spec       *arch.Spec
	tied       bool
	hasImatrix bool
	nAttnV     int
	iAttnV     int
}

func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// quantizable mirrors tensor_allows_quantization for the tensors our families have.
func quantizable(name string, ndims int) bool {
	if ndims < 2 || !strings.HasSuffix(name, "weight") {
		return false
	}
	return !strings.Contains(name, "_norm.weight")
}

// choose picks the GGUF type of one tensor. shape is in GGUF order (ne[0] = row length).
// Tensors must be visited in file order (attn_v counters depend on it).
func (st *policyState) choose(ref arch.TensorRef, shape []uint64) Choice {
	name := ref.GGUFName()
	if !quantizable(name, len(shape)) {
		return Choice{Type: gguf.F32, Wanted: gguf.F32, Reason: "1-D or norm: kept F32"}
	}
	isAttnV := ref.Role == arch.AttnV
	base := st.preset.Base
	c := Choice{Type: base}
	if !isQuantized(base) {
		c.Wanted = base
		if isAttnV {
			st.iAttnV++
		}
		return st.override(name, c, shape)
	}
	// user overrides win over the mix rules (llama-quantize: "manual")
	for _, o := range st.overrides {
		if o.Pattern.MatchString(name) {
			c.Type, c.Reason = o.Type, "--tensor-type "+o.Text
			if isAttnV {
				st.iAttnV++
			}
			return st.needsImatrix(ref, st.fallback(c, shape))
		}
	}
	t := base
	ft := st.preset.FileType
	nx := int(shape[0])
	gqa := 1
	if st.spec.KVHeads > 0 {
		gqa = st.spec.Heads / st.spec.KVHeads
	}
	// llama-quant.cpp llama_tensor_get_type_impl, branch by branch (the MoE, Falcon and 70B
	// rules do not apply to the families gquant converts).
	switch {
	case ref.Role == arch.Output || (st.tied && ref.Role == arch.TokenEmbd):
		if nx%base.BlockSize() != 0 {
			t, c.Reason = gguf.Q8_0, "output: row not a multiple of the base block, Q8_0"
		} else if t != gguf.Q8_0 {
			t, c.Reason = gguf.Q6_K, "output: Q6_K"
		}
	case ref.Role == arch.TokenEmbd:
	case isAttnV:
		switch {
		case ft == ftQ2_K && gqa >= 4:
			t, c.Reason = gguf.Q4_K, "attn_v with GQA ≥ 4: Q4_K"
		case ft == ftQ2_K:
			t, c.Reason = gguf.Q3_K, "attn_v: Q3_K"
		case ft == ftQ2_K_S && gqa >= 4:
			t, c.Reason = gguf.Q4_K, "attn_v with GQA ≥ 4: Q4_K"
		case ft == ftQ3_K_M && st.iAttnV < 2:
			t, c.Reason = gguf.Q5_K, "attn_v of the first 2 layers: Q5_K"
		case ft == ftQ3_K_M:
			t, c.Reason = gguf.Q4_K, "attn_v: Q4_K"
		case ft == ftQ3_K_L:
			t, c.Reason = gguf.Q5_K, "attn_v: Q5_K"
		case (ft == ftIQ4_NL || ft == ftIQ4_XS) && gqa >= 4:
			t, c.Reason = gguf.Q5_K, "attn_v with GQA ≥ 4: Q5_K"
		case (ft == ftQ4_K_M || ft == ftQ5_K_M) && useMoreBits(st.iAttnV, st.nAttnV):
			t, c.Reason = gguf.Q6_K, "attn_v on a use_more_bits layer: Q6_K"
		case ft == ftQ4_K_S && st.iAttnV < 4:
			t, c.Reason = gguf.Q5_K, "attn_v of the first 4 layers: Q5_K"
		}
		st.iAttnV++
	case ref.Role == arch.FFNDown:
		i, n := ref.Layer, st.spec.Layers
		switch {
		case ft == ftQ2_K:
			t, c.Reason = gguf.Q3_K, "ffn_down: Q3_K"
		case ft == ftQ2_K_S:
			if i < n/8 {
				t, c.Reason = gguf.Q4_K, "ffn_down of the first n/8 layers: Q4_K"
			}
		case ft == ftQ3_K_M && i < n/16:
			t, c.Reason = gguf.Q5_K, "ffn_down of the first n/16 layers: Q5_K"
		case ft == ftQ3_K_M:
			t, c.Reason = gguf.Q4_K, "ffn_down: Q4_K"
		case ft == ftQ3_K_L:
			t, c.Reason = gguf.Q5_K, "ffn_down: Q5_K"
		case ft == ftQ4_K_M:
			if useMoreBits(i, n) {
				t, c.Reason = gguf.Q6_K, "ffn_down on a use_more_bits layer: Q6_K"
			}
		case (ft == ftIQ4_NL || ft == ftIQ4_XS) && i < n/8 && !st.hasImatrix:
			t, c.Reason = gguf.Q5_K, "ffn_down of the first n/8 layers without imatrix: Q5_K"
		case ft == ftQ5_K_M && useMoreBits(i, n):
			t, c.Reason = gguf.Q6_K, "ffn_down on a use_more_bits layer: Q6_K"
		case ft == ftQ4_K_S && i < n/8:
			t, c.Reason = gguf.Q5_K, "ffn_down of the first n/8 layers: Q5_K"
		case (ft == ftQ4_0 || ft == ftQ5_0) && st.hasImatrix && i < n/8:
			if ft == ftQ4_0 {
				t = gguf.Q4_1
			} else {
				t = gguf.Q5_1
			}
			c.Reason = "ffn_down of the first n/8 layers with imatrix: " + t.String()
		}
	case ref.Role == arch.AttnOut:
		switch ft {
		case ftQ2_K:
			t, c.Reason = gguf.Q3_K, "attn_output: Q3_K"
		case ftQ3_K_M:
			t, c.Reason = gguf.Q4_K, "attn_output: Q4_K"
		case ftQ3_K_L:
			t, c.Reason = gguf.Q5_K, "attn_output: Q5_K"
		}
	}
	c.Type = t
	return st.needsImatrix(ref, st.fallback(c, shape))
}

// needsImatrix marks what llama-quant.cpp's tensor_requires_imatrix refuses to quantize
// without an importance matrix, judged on the type after the fallback: among gquant's types,
// only Q2_K in a Q2_K_S file, token_embd and output excepted.
func (st *policyState) needsImatrix(ref arch.TensorRef, c Choice) Choice {
	c.NeedsImatrix = st.preset.FileType == ftQ2_K_S && c.Type == gguf.Q2_K &&
		ref.Role != arch.TokenEmbd && ref.Role != arch.Output
	return c
}

// override applies --tensor-type to float presets (llama-quantize ignores the mix there too).
func (st *policyState) override(name string, c Choice, shape []uint64) Choice {
	for _, o := range st.overrides {
		if o.Pattern.MatchString(name) {
			c.Type, c.Reason = o.Type, "--tensor-type "+o.Text
			return st.fallback(c, shape)
		}
	}
	return c
}

// fallback replaces a type whose block does not divide the row length, as
// llama-quant.cpp's tensor_type_fallback does; where llama-quantize aborts (Q4_0, Q8_0, …)
// gquant falls back to F16 and says so.
func (st *policyState) fallback(c Choice, shape []uint64) Choice {
	c.Wanted = c.Type
	nx := int(shape[0])
	bs := c.Type.BlockSize()
	if bs <= 1 || nx%bs == 0 {
		return c
	}
	var fb gguf.Type
	note := ""
	switch c.Type {
	case gguf.IQ4_XS:
		fb = gguf.IQ4_NL
	case gguf.Q2_K, gguf.Q3_K:
		fb = gguf.Q4_0
	case gguf.Q4_K:
		fb = gguf.Q5_0
	case gguf.Q5_K:
		fb = gguf.Q5_1
	case gguf.Q6_K:
		fb = gguf.Q8_0
	default:
		fb = gguf.F16
		note = " (llama-quantize aborts here)"
	}
	if fb != gguf.F16 && nx%fb.BlockSize() != 0 {
		fb = gguf.F16
	}
	c.Fallback = fmt.Sprintf("row length %d not a multiple of %d: %s -> %s%s", nx, bs, c.Type, fb, note)
	c.Type = fb
	return c
}

func isQuantized(t gguf.Type) bool { return t.BlockSize() > 1 }

// SchemeNames lists the preset names, sorted.
func SchemeNames() []string {
	var n []string
	for _, p := range Presets {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return n
}
