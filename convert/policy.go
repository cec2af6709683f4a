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
}

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
			return st.fallback(c, shape)
		}
	}
	t := base
	ft := st.preset.Name
	nx := int(shape[0])
	switch {
	case ref.Role == arch.Output || (st.tied && ref.Role == arch.TokenEmbd):
		if nx%base.BlockSize() != 0 {
			t, c.Reason = gguf.Q8_0, "output: row not a multiple of the base block, Q8_0"
		} else if t != gguf.Q8_0 {
			t, c.Reason = gguf.Q6_K, "output: Q6_K"
		}
	case ref.Role == arch.TokenEmbd:
	case isAttnV:
		gqa := 1
		if st.spec.KVHeads > 0 {
			gqa = st.spec.Heads / st.spec.KVHeads
		}
		switch {
		case ft == "iq4_nl" && gqa >= 4:
			t, c.Reason = gguf.Q5_K, "attn_v with GQA ≥ 4: Q5_K"
		case (ft == "q4_k_m" || ft == "q5_k_m") && useMoreBits(st.iAttnV, st.nAttnV):
			t, c.Reason = gguf.Q6_K, "attn_v on a use_more_bits layer: Q6_K"
		case ft == "q4_k_s" && st.iAttnV < 4:
			t, c.Reason = gguf.Q5_K, "attn_v of the first 4 layers: Q5_K"
		}
		st.iAttnV++
	case ref.Role == arch.FFNDown:
		i, n := ref.Layer, st.spec.Layers
		switch {
		case ft == "q4_k_m" && useMoreBits(i, n):
			t, c.Reason = gguf.Q6_K, "ffn_down on a use_more_bits layer: Q6_K"
		case ft == "iq4_nl" && i < n/8 && !st.hasImatrix:
			t, c.Reason = gguf.Q5_K, "ffn_down of the first n/8 layers without imatrix: Q5_K"
		case ft == "q5_k_m" && useMoreBits(i, n):
			t, c.Reason = gguf.Q6_K, "ffn_down on a use_more_bits layer: Q6_K"
		case ft == "q4_k_s" && i < n/8:
			t, c.Reason = gguf.Q5_K, "ffn_down of the first n/8 layers: Q5_K"
		case (ft == "q4_0" || ft == "q5_0") && st.hasImatrix && i < n/8:
			if ft == "q4_0" {
				t = gguf.Q4_1
			} else {
				t = gguf.Q5_1
			}
			c.Reason = "ffn_down of the first n/8 layers with imatrix: " + t.String()
		}
	}
	c.Type = t
	return st.fallback(c, shape)
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
