package convert

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/quantize"
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
	// The i-quants and ternary types (llama_ftype_get_default_type: IQ2_S's base is IQ2_XS,
	// IQ2_M's IQ2_S, IQ3_XS's and IQ3_M's IQ3_S; the mix rules do the rest).
	{"iq3_xxs", gguf.IQ3_XXS, 23},
	{"iq3_xs", gguf.IQ3_S, 22},
	{"iq3_s", gguf.IQ3_S, 26},
	{"iq3_m", gguf.IQ3_S, 27},
	{"iq2_xxs", gguf.IQ2_XXS, 19},
	{"iq2_xs", gguf.IQ2_XS, 20},
	{"iq2_s", gguf.IQ2_XS, 28},
	{"iq2_m", gguf.IQ2_S, 29},
	{"iq1_s", gguf.IQ1_S, 24},
	{"iq1_m", gguf.IQ1_M, 31},
	{"tq1_0", gguf.TQ1_0, 36},
	{"tq2_0", gguf.TQ2_0, 37},
	// llama-quantize's aliases (tools/quantize/quantize.cpp QUANT_OPTIONS): the same ftype, so
	// the same file.
	{"q3_k", gguf.Q3_K, 12},
	{"q4_k", gguf.Q4_K, 15},
	{"q5_k", gguf.Q5_K, 17},
}

// llama.cpp's enum llama_ftype (include/llama.h) for the mixes the policy distinguishes.
const (
	ftQ4_0    = 2
	ftQ5_0    = 8
	ftQ2_K    = 10
	ftQ3_K_S  = 11
	ftQ3_K_M  = 12
	ftQ3_K_L  = 13
	ftQ4_K_S  = 14
	ftQ4_K_M  = 15
	ftQ5_K_M  = 17
	ftQ2_K_S  = 21
	ftIQ2_XXS = 19
	ftIQ2_XS  = 20
	ftIQ3_XS  = 22
	ftIQ3_XXS = 23
	ftIQ1_S   = 24
	ftIQ4_NL  = 25
	ftIQ3_S   = 26
	ftIQ3_M   = 27
	ftIQ2_S   = 28
	ftIQ2_M   = 29
	ftIQ4_XS  = 30
	ftIQ1_M   = 31
	ftTQ1_0   = 36
	ftTQ2_0   = 37
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
	t, err := ParseTensorType(s[i+1:])
	if err != nil {
		return Override{}, fmt.Errorf("--tensor-type: %q: %v", s, err)
	}
	return Override{Pattern: re, Type: t, Text: s}, nil
}

// ParseTensorType reads a type for --tensor-type, --output-tensor-type or
// --token-embedding-type: one of ggml's names that gquant can write.
func ParseTensorType(s string) (gguf.Type, error) {
	t, err := gguf.ParseType(s)
	if err != nil {
		return 0, err
	}
	if _, err := quantize.For(t); err != nil {
		return 0, fmt.Errorf("%q: gquant does not write %s tensors", s, t)
	}
	return t, nil
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
	// iFFNDown, iFFNGate and iFFNUp count the tensors of each kind the mix has ruled on
	// (llama-quantize's i_ffn_*: the layer index for dense models).
	iFFNDown, iFFNGate, iFFNUp int
	// llama-quantize's --pure, --leave-output-tensor, --output-tensor-type and
	// --token-embedding-type.
	pure                      bool
	leaveOutput               bool
	outputType, tokenEmbdType *gguf.Type
	// source gives a tensor's type in the source (for --leave-output-tensor).
	source func(arch.TensorRef) (gguf.Type, bool)
}

func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// quantizable mirrors tensor_allows_quantization for the tensors our families have: matrices
// and stacks of expert matrices named *weight, but no norm and no expert router
// (ffn_gate_inp, which convert_hf_to_gguf.py writes as F32 and llama-quantize keeps).
func quantizable(name string, ndims int) bool {
	if ndims < 2 || !strings.HasSuffix(name, "weight") {
		return false
	}
	return !strings.Contains(name, "_norm.weight") && !strings.Contains(name, "ffn_gate_inp.weight")
}

// category is llama-quant.cpp's tensor_get_category: broad roles found by name, so that
// every family's tensors (fused attn_qkv, stacked experts) fall in the same rules.
type category int

const (
	catOther category = iota
	catOutput
	catTokenEmbd
	catAttnQKV
	catAttnV
	catAttnK
	catAttnQ
	catAttnOut
	catFFNUp
	catFFNGate
	catFFNDown
)

func categoryOf(name string) category {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight":
		return catTokenEmbd
	case strings.Contains(name, "attn_qkv.weight"):
		return catAttnQKV
	case strings.Contains(name, "attn_v.weight"):
		return catAttnV
	case strings.Contains(name, "attn_k.weight"):
		return catAttnK
	case strings.Contains(name, "attn_q.weight"):
		return catAttnQ
	case strings.Contains(name, "attn_output.weight"):
		return catAttnOut
	case strings.Contains(name, "ffn_up"):
		return catFFNUp
	case strings.Contains(name, "ffn_gate"):
		return catFFNGate
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

// choose picks the GGUF type of one tensor. shape is in GGUF order (ne[0] = row length).
// Tensors must be visited in file order: like llama-quantize, the policy counts the attn_v
// and FFN tensors it has ruled on, and the rules read those counts.
func (st *policyState) choose(ref arch.TensorRef, shape []uint64) Choice {
	name := ref.GGUFName()
	cat := categoryOf(name)
	if !quantizable(name, len(shape)) {
		why := "1-D or norm: kept F32"
		if ref.Role == arch.FFNGateInp {
			why = "expert router: kept F32"
		}
		return Choice{Type: gguf.F32, Wanted: gguf.F32, Reason: why}
	}
	// llama_tensor_get_type, the outer rules first.
	switch {
	case cat == catOutput && st.leaveOutput:
		t := st.sourceType(ref)
		return Choice{Type: t, Wanted: t, Reason: "--leave-output-tensor: kept " + t.String()}
	case cat == catTokenEmbd && st.tokenEmbdType != nil:
		return st.needsImatrix(cat, st.fallback(Choice{Type: *st.tokenEmbdType, Reason: "--token-embedding-type"}, shape))
	case cat == catOutput && st.outputType != nil:
		return st.needsImatrix(cat, st.fallback(Choice{Type: *st.outputType, Reason: "--output-tensor-type"}, shape))
	}
	base := st.preset.Base
	c := Choice{Type: base}
	if !isQuantized(base) {
		c.Wanted = base
		return st.override(name, c, shape)
	}
	// user overrides win over the mix rules (llama-quantize: "manual"); the mix's counters do
	// not advance for them, as in llama-quantize.
	for _, o := range st.overrides {
		if o.Pattern.MatchString(name) {
			c.Type, c.Reason = o.Type, "--tensor-type "+o.Text
			return st.needsImatrix(cat, st.fallback(c, shape))
		}
	}
	if !st.pure {
		c.Type, c.Reason = st.mix(cat, base, shape, ref.Layer)
	} else {
		c.Reason = "--pure"
	}
	return st.needsImatrix(cat, st.fallback(c, shape))
}

// mix is llama-quant.cpp's llama_tensor_get_type_impl, branch by branch, for the families
// gquant converts (its Falcon and MXFP4 rules aside), with its rules for mixtures of experts:
// n_expert == 8 (Mixtral 8x7B's count) bumps attn_v and attn_k, and some attn_output, and
// the FFN tensors' layer is the one their name says (layer_info), not a count. layer is the
// tensor's block.
func (st *policyState) mix(cat category, base gguf.Type, shape []uint64, layer int) (gguf.Type, string) {
	ft := st.preset.FileType
	nx := int(shape[0])
	gqa := 1
	if st.spec.KVHeads > 0 {
		gqa = st.spec.Heads / st.spec.KVHeads
	}
	nExpert := st.spec.Experts
	// ffnLayer is llama.cpp's layer_info: with experts the layer of the name, otherwise the
	// count of the kind's tensors ruled on so far (then advanced).
	ffnLayer := func(counter *int) int {
		i := *counter
		*counter++
		if nExpert > 1 {
			return layer
		}
		return i
	}
	iq2Class := ft == ftIQ2_XXS || ft == ftIQ2_XS || ft == ftIQ1_S || ft == ftIQ2_S || ft == ftIQ2_M || ft == ftIQ1_M
	iq2sm := ft == ftIQ2_S || ft == ftIQ2_M
	switch {
	case cat == catOutput || (st.tied && cat == catTokenEmbd):
		switch {
		case st.outputType != nil: // a tied token_embd takes --output-tensor-type
			return *st.outputType, "--output-tensor-type (tied token_embd)"
		case nx%base.BlockSize() != 0:
			return gguf.Q8_0, "output: row not a multiple of the base block, Q8_0"
		case iq2Class || ft == ftIQ3_XXS:
			return gguf.Q5_K, "output: Q5_K"
		case base != gguf.Q8_0:
			return gguf.Q6_K, "output: Q6_K"
		}
	case cat == catTokenEmbd:
		switch {
		case ft == ftIQ2_XXS || ft == ftIQ2_XS || ft == ftIQ1_S || ft == ftIQ1_M:
			return gguf.Q2_K, "token_embd: Q2_K"
		case iq2sm || ft == ftIQ3_XXS:
			return gguf.IQ3_S, "token_embd: IQ3_S"
		case ft == ftTQ1_0 || ft == ftTQ2_0:
			return gguf.Q4_K, "token_embd: Q4_K"
		}
	case iq2Class:
		switch cat {
		case catAttnV, catAttnQKV:
			st.iAttnV++
			switch {
			case gqa >= 4:
				return gguf.Q4_K, "attn_v with GQA ≥ 4: Q4_K"
			case nExpert >= 4:
				return gguf.Q4_K, "attn_v with 4 or more experts: Q4_K"
			case iq2sm:
				return gguf.IQ3_S, "attn_v: IQ3_S"
			}
			return gguf.Q2_K, "attn_v: Q2_K"
		case catAttnK:
			if nExpert == 8 {
				return gguf.Q4_K, "attn_k with 8 experts: Q4_K"
			}
		case catFFNDown:
			// llama.cpp compares its ffn_down count (not the layer) here, with or without experts.
			i := st.iFFNDown
			st.iFFNDown++
			if i < st.spec.Layers/8 {
				if iq2sm {
					return gguf.IQ3_S, "ffn_down of the first n/8 layers: IQ3_S"
				}
				return gguf.Q2_K, "ffn_down of the first n/8 layers: Q2_K"
			}
		case catAttnOut:
			switch {
			case nExpert == 8:
				return gguf.Q5_K, "attn_output with 8 experts: Q5_K"
			case ft == ftIQ1_S || ft == ftIQ1_M:
				return gguf.IQ2_XXS, "attn_output: IQ2_XXS"
			case iq2sm:
				return gguf.IQ3_S, "attn_output: IQ3_S"
			}
		}
	case cat == catAttnV || cat == catAttnQKV:
		t, why := base, ""
		switch {
		case ft == ftQ2_K && gqa >= 4:
			t, why = gguf.Q4_K, "attn_v with GQA ≥ 4: Q4_K"
		case ft == ftQ2_K:
			t, why = gguf.Q3_K, "attn_v: Q3_K"
		case ft == ftQ2_K_S && gqa >= 4:
			t, why = gguf.Q4_K, "attn_v with GQA ≥ 4: Q4_K"
		case ft == ftIQ3_XXS && gqa >= 4:
			t, why = gguf.Q4_K, "attn_v with GQA ≥ 4: Q4_K"
		case ft == ftIQ3_XXS && !st.hasImatrix:
			t, why = gguf.IQ3_S, "attn_v without imatrix: IQ3_S"
		case ft == ftIQ3_XXS:
			t, why = gguf.IQ3_XXS, "attn_v: IQ3_XXS"
		case (ft == ftIQ3_XS || ft == ftIQ3_S) && gqa >= 4:
			t, why = gguf.Q4_K, "attn_v with GQA ≥ 4: Q4_K"
		case ft == ftIQ3_M:
			t, why = gguf.Q4_K, "attn_v: Q4_K"
		case ft == ftQ3_K_M && st.iAttnV < 2:
			t, why = gguf.Q5_K, "attn_v of the first 2 layers: Q5_K"
		case ft == ftQ3_K_M:
			t, why = gguf.Q4_K, "attn_v: Q4_K"
		case ft == ftQ3_K_L:
			t, why = gguf.Q5_K, "attn_v: Q5_K"
		case (ft == ftIQ4_NL || ft == ftIQ4_XS) && gqa >= 4:
			t, why = gguf.Q5_K, "attn_v with GQA ≥ 4: Q5_K"
		case (ft == ftQ4_K_M || ft == ftQ5_K_M) && useMoreBits(st.iAttnV, st.nAttnV):
			t, why = gguf.Q6_K, "attn_v on a use_more_bits layer: Q6_K"
		case ft == ftQ4_K_S && st.iAttnV < 4:
			t, why = gguf.Q5_K, "attn_v of the first 4 layers: Q5_K"
		}
		if st.is70B() && (t == gguf.Q3_K || t == gguf.Q4_K) {
			t, why = gguf.Q5_K, "attn_v of a 70B model: Q5_K"
		}
		if nExpert == 8 {
			t, why = gguf.Q8_0, "attn_v with 8 experts: Q8_0"
		}
		st.iAttnV++
		return t, why
	case cat == catAttnK:
		switch {
		case nExpert == 8:
			return gguf.Q8_0, "attn_k with 8 experts: Q8_0"
		case ft == ftIQ3_XS:
			return gguf.IQ3_XXS, "attn_k: IQ3_XXS"
		case ft == ftIQ3_XXS:
			return gguf.IQ2_S, "attn_k: IQ2_S"
		}
	case cat == catAttnQ:
		switch ft {
		case ftIQ3_XS:
			return gguf.IQ3_XXS, "attn_q: IQ3_XXS"
		case ftIQ3_XXS:
			return gguf.IQ2_S, "attn_q: IQ2_S"
		}
	case cat == catFFNDown:
		// llama.cpp counts ffn_down tensors for dense models (layer_info): the count is the
		// layer unless --tensor-type took some of them out of the mix.
		i, n := ffnLayer(&st.iFFNDown), st.spec.Layers
		switch {
		case ft == ftQ2_K:
			return gguf.Q3_K, "ffn_down: Q3_K"
		case ft == ftQ2_K_S:
			if i < n/8 {
				return gguf.Q4_K, "ffn_down of the first n/8 layers: Q4_K"
			}
		case ft == ftIQ3_XXS && !st.hasImatrix:
			if i < n/8 {
				return gguf.Q4_K, "ffn_down of the first n/8 layers without imatrix: Q4_K"
			}
			return gguf.Q3_K, "ffn_down without imatrix: Q3_K"
		case ft == ftQ3_K_M && i < n/16:
			return gguf.Q5_K, "ffn_down of the first n/16 layers: Q5_K"
		case ft == ftQ3_K_M:
			return gguf.Q4_K, "ffn_down: Q4_K"
		case ft == ftIQ3_M && (i < n/8 || (nExpert == 8 && useMoreBits(i, n))):
			return gguf.Q4_K, "ffn_down of the first n/8 (8 experts: use_more_bits) layers: Q4_K"
		case ft == ftQ3_K_L:
			return gguf.Q5_K, "ffn_down: Q5_K"
		case ft == ftQ4_K_M:
			if useMoreBits(i, n) {
				return gguf.Q6_K, "ffn_down on a use_more_bits layer: Q6_K"
			}
		case i < n/8 && (ft == ftIQ4_NL || ft == ftIQ4_XS) && !st.hasImatrix:
			return gguf.Q5_K, "ffn_down of the first n/8 layers without imatrix: Q5_K"
		case ft == ftQ5_K_M && useMoreBits(i, n):
			return gguf.Q6_K, "ffn_down on a use_more_bits layer: Q6_K"
		case ft == ftQ4_K_S && i < n/8:
			return gguf.Q5_K, "ffn_down of the first n/8 layers: Q5_K"
		case (ft == ftQ4_0 || ft == ftQ5_0) && st.hasImatrix && i < n/8:
			t := gguf.Q4_1
			if ft == ftQ5_0 {
				t = gguf.Q5_1
			}
			return t, "ffn_down of the first n/8 layers with imatrix: " + t.String()
		}
	case cat == catAttnOut && nExpert == 8:
		switch ft {
		case ftQ2_K, ftIQ3_XS, ftIQ3_XXS, ftQ3_K_S, ftQ3_K_M, ftIQ4_NL, ftQ4_K_S, ftQ4_K_M, ftIQ3_S, ftIQ3_M, ftIQ4_XS:
			return gguf.Q5_K, "attn_output with 8 experts: Q5_K"
		}
	case cat == catAttnOut:
		switch ft {
		case ftQ2_K:
			return gguf.Q3_K, "attn_output: Q3_K"
		case ftIQ3_XXS:
			return gguf.IQ3_S, "attn_output: IQ3_S"
		case ftQ3_K_M, ftIQ3_M:
			return gguf.Q4_K, "attn_output: Q4_K"
		case ftQ3_K_L:
			return gguf.Q5_K, "attn_output: Q5_K"
		}
	case cat == catFFNGate || cat == catFFNUp:
		counter := &st.iFFNGate
		if cat == catFFNUp {
			counter = &st.iFFNUp
		}
		i, n := ffnLayer(counter), st.spec.Layers
		if ft == ftIQ3_XS && i >= n/8 && i < 7*n/8 {
			return gguf.IQ3_XXS, "ffn_gate/ffn_up of the middle layers: IQ3_XXS"
		}
	}
	return base, ""
}

// is70B is llama.cpp's LLM_TYPE_70B as its loaders set it for the families gquant converts:
// 80 layers (Llama, and Mixtral unless it has 8 experts: with grouped-query attention;
// Qwen2: any).
func (st *policyState) is70B() bool {
	s := st.spec
	switch s.Family {
	case "llama":
		return s.Layers == 80 && s.Heads != s.KVHeads
	case "mixtral":
		return s.Layers == 80 && s.Heads != s.KVHeads && s.Experts != 8
	case "qwen2":
		return s.Layers == 80
	}
	return false
}

// sourceType is the type a tensor keeps when it is not quantized (--leave-output-tensor): its
// type in a GGUF source, or the HF checkpoint's float type.
func (st *policyState) sourceType(ref arch.TensorRef) gguf.Type {
	if st.source != nil {
		if t, ok := st.source(ref); ok {
			return t
		}
	}
	return gguf.F16
}

// needsImatrix marks what llama-quant.cpp's tensor_requires_imatrix refuses to quantize
// without an importance matrix, judged on the type after the fallback: the i-quants of 3 bits
// and fewer, and Q2_K in a Q2_K_S file; token_embd and output never.
func (st *policyState) needsImatrix(cat category, c Choice) Choice {
	if cat == catTokenEmbd || cat == catOutput {
		// Exempt in llama-quantize's rule; ggml's quantizer still asserts one for these
		// types (Convert refuses them by name when the statistics lack the tensor).
		c.NeedsImatrix = quantize.RequiresImatrix(c.Type)
		return c
	}
	switch c.Type {
	case gguf.IQ3_XXS, gguf.IQ2_XXS, gguf.IQ2_XS, gguf.IQ2_S, gguf.IQ1_M, gguf.IQ1_S:
		c.NeedsImatrix = true
	case gguf.Q2_K:
		c.NeedsImatrix = st.preset.FileType == ftQ2_K_S
	}
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
	case gguf.IQ1_S, gguf.IQ1_M, gguf.IQ2_XXS, gguf.IQ2_XS, gguf.IQ2_S, gguf.IQ3_XXS, gguf.IQ3_S, gguf.IQ4_XS:
		fb = gguf.IQ4_NL
	case gguf.Q2_K, gguf.Q3_K, gguf.TQ1_0, gguf.TQ2_0:
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
