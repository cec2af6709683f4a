package arch

import (
	"encoding/json"
	"fmt"
	"math"
)

// cfgReader reads typed values from a decoded config.json, remembering the first problem.
type cfgReader struct {
	m   map[string]any
	err []string
}

func (r *cfgReader) num(key string) (float64, bool) {
	v, ok := r.m[key]
	if !ok || v == nil {
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			r.err = append(r.err, fmt.Sprintf("%s: not a number: %v", key, v))
			return 0, false
		}
		return f, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	r.err = append(r.err, fmt.Sprintf("%s: want a number, got %T", key, v))
	return 0, false
}

// intReq reads a required integer.
func (r *cfgReader) intReq(key string) int {
	f, ok := r.num(key)
	if !ok {
		if _, present := r.m[key]; !present {
			r.err = append(r.err, fmt.Sprintf("%s: missing", key))
		}
		return 0
	}
	if f != math.Trunc(f) || f < 0 || f > 1<<40 {
		r.err = append(r.err, fmt.Sprintf("%s: want a non-negative integer, got %v", key, f))
		return 0
	}
	return int(f)
}

// intOpt reads an optional integer (def when absent or null).
func (r *cfgReader) intOpt(key string, def int) int {
	if v, ok := r.m[key]; !ok || v == nil {
		return def
	}
	return r.intReq(key)
}

func (r *cfgReader) floatOpt(key string, def float64) float64 {
	f, ok := r.num(key)
	if !ok {
		return def
	}
	return f
}

func (r *cfgReader) boolOpt(key string, def bool) bool {
	v, ok := r.m[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		r.err = append(r.err, fmt.Sprintf("%s: want true or false, got %v", key, v))
		return def
	}
	return b
}

// floats reads an optional list of numbers.
func (r *cfgReader) floats(key string) []float64 {
	v, ok := r.m[key]
	if !ok || v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		r.err = append(r.err, fmt.Sprintf("%s: want a list of numbers, got %T", key, v))
		return nil
	}
	out := make([]float64, len(list))
	for i, e := range list {
		er := &cfgReader{m: map[string]any{"v": e}}
		f, ok := er.num("v")
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || !(f > 0) {
			r.err = append(r.err, fmt.Sprintf("%s[%d]: want a positive number, got %v", key, i, e))
			return nil
		}
		out[i] = f
	}
	return out
}

func (r *cfgReader) str(key string) string {
	s, _ := r.m[key].(string)
	return s
}

func (r *cfgReader) sub(key string) map[string]any {
	m, _ := r.m[key].(map[string]any)
	return m
}

// commonSpec reads the fields every Llama-like config has.
func commonSpec(cfg map[string]any, family, ggufArch string, defaultTied bool) (*Spec, *cfgReader) {
	r := &cfgReader{m: cfg}
	s := &Spec{Family: family, GGUFArch: ggufArch}
	if a, ok := cfg["architectures"].([]any); ok && len(a) > 0 {
		s.HFArch, _ = a[0].(string)
	}
	s.Hidden = r.intReq("hidden_size")
	s.Intermediate = r.intReq("intermediate_size")
	s.Layers = r.intReq("num_hidden_layers")
	s.Heads = r.intReq("num_attention_heads")
	s.KVHeads = r.intOpt("num_key_value_heads", s.Heads)
	s.Vocab = r.intReq("vocab_size")
	s.Context = r.intOpt("max_position_embeddings", 2048)
	s.RMSEps = r.floatOpt("rms_norm_eps", 1e-6)
	if v, ok := cfg["head_dim"]; ok && v != nil {
		s.HeadDim = r.intReq("head_dim")
		s.ExplicitHeadDim = true
	} else if s.Heads > 0 {
		s.HeadDim = s.Hidden / s.Heads
		if s.HeadDim == 0 && s.Hidden > 0 {
			r.err = append(r.err, fmt.Sprintf("num_attention_heads: %d exceeds hidden_size %d, and head_dim is not set (it would be 0)", s.Heads, s.Hidden))
		}
	}
	s.Tied = r.boolOpt("tie_word_embeddings", defaultTied)
	// The Llama-shaped families gate their FFN with SiLU; another activation would convert and
	// run as SiLU, silently wrong.
	if act, ok := cfg["hidden_act"]; ok && act != nil && act != "silu" {
		r.err = append(r.err, fmt.Sprintf("hidden_act: %v is not supported (the %s family runs silu)", act, family))
	}
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		if v, ok := cfg[key]; ok && v != nil {
			if _, isObj := v.(map[string]any); !isObj {
				r.err = append(r.err, fmt.Sprintf("%s: want an object, got %v", key, v))
			}
		}
	}

	// rope: transformers ≥ 4.5x may nest everything in rope_parameters.
	rope := r.sub("rope_parameters")
	if rope == nil {
		rope = r.sub("rope_scaling")
	}
	// rope_theta: present (even 0, which validate refuses) wins; then the nested one.
	s.RopeTheta = 10000
	if v, ok := r.num("rope_theta"); ok {
		s.RopeTheta = v
	} else if rope != nil {
		rr := &cfgReader{m: rope}
		if v, ok := rr.num("rope_theta"); ok {
			s.RopeTheta = v
		}
		r.err = append(r.err, rr.err...)
	}
	if rope != nil {
		rr := &cfgReader{m: rope}
		typ := rr.str("rope_type")
		if typ == "" {
			typ = rr.str("type")
		}
		_, hasFactor := rr.num("factor")
		switch typ {
		case "":
			if hasFactor { // transformers refuses scaling without a type too
				r.err = append(r.err, "rope_scaling: a factor without rope_type (or type)")
			}
		case "default":
		case "longrope", "su": // Phi-3: read by phi3Family
			if family != "phi3" {
				r.err = append(r.err, fmt.Sprintf("rope_scaling: rope type %q is supported for Phi-3 only", typ))
			}
		case "linear", "llama3", "yarn":
			factor, hasFactor := rr.num("factor")
			sc := &RopeScaling{Type: typ, Factor: factor}
			switch typ {
			case "llama3":
				if !hasFactor {
					sc.Factor = 8
				}
				sc.LowFreqFactor = rr.floatOpt("low_freq_factor", 1)
				sc.HighFreqFactor = rr.floatOpt("high_freq_factor", 4)
				sc.OriginalContext = rr.intOpt("original_max_position_embeddings", 8192)
			case "yarn":
				sc.OriginalContext = rr.intOpt("original_max_position_embeddings", 0)
				if sc.OriginalContext == 0 {
					r.err = append(r.err, "rope_scaling.original_max_position_embeddings: missing for yarn")
				}
				if v, ok := rr.num("extrapolation_factor"); ok {
					sc.YarnExtFactor, sc.HasYarnExt = v, true
				}
				if v, ok := rr.num("attention_factor"); ok {
					sc.YarnAttnFactor, sc.HasYarnA = v, true
				} else if v, ok := rr.num("attn_factor"); ok {
					sc.YarnAttnFactor, sc.HasYarnA = v, true
				}
				sc.YarnBetaFast = rr.floatOpt("beta_fast", 32)
				sc.YarnBetaSlow = rr.floatOpt("beta_slow", 1)
			}
			if typ != "llama3" && !hasFactor {
				r.err = append(r.err, "rope_scaling.factor: missing")
			}
			r.err = append(r.err, rr.err...)
			if !(typ == "linear" && sc.Factor == 1) {
				s.RopeScaling = sc // validate checks its values
			}
		default:
			r.err = append(r.err, fmt.Sprintf("rope_scaling: unsupported rope type %q (supported: linear, llama3, yarn; longrope for Phi-3)", typ))
		}
	}
	return s, r
}

func finish(s *Spec, r *cfgReader) (*Spec, error) {
	if len(r.err) > 0 {
		return nil, fmt.Errorf("%s", joinProblems(r.err))
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func joinProblems(p []string) string {
	out := ""
	for i, s := range p {
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}

// ggufReader reads GGUF metadata: counts and sizes of any integer type (llama.cpp wants
// UINT32; a float, a negative or an oversized value is refused, never truncated), floats of any
// numeric type.
type ggufReader struct {
	get  func(string) (any, bool)
	arch string
	err  []string
}

func (g *ggufReader) bad(key, format string, args ...any) {
	g.err = append(g.err, key+": "+fmt.Sprintf(format, args...))
}

// num reads a numeric value as a float64.
func (g *ggufReader) num(key string) (float64, bool) {
	v, ok := g.get(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case uint8:
		return float64(x), true
	case int8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case int16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case int64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	g.bad(key, "want a number, got %T", v)
	return 0, false
}

// count reads a non-negative integer of any GGUF integer type; ok is false when the key is
// absent or its value is refused (the problem is recorded).
func (g *ggufReader) count(key string) (int, bool) {
	v, ok := g.get(key)
	if !ok {
		return 0, false
	}
	var n int64
	switch x := v.(type) {
	case uint8:
		n = int64(x)
	case int8:
		n = int64(x)
	case uint16:
		n = int64(x)
	case int16:
		n = int64(x)
	case uint32:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxUint32 {
			g.bad(key, "%d is too large", x)
			return 0, false
		}
		n = int64(x)
	default:
		g.bad(key, "has type %T, want an unsigned integer (UINT32)", v)
		return 0, false
	}
	if n < 0 {
		g.bad(key, "must not be negative, got %d", n)
		return 0, false
	}
	if n > math.MaxUint32 {
		g.bad(key, "%d is too large", n)
		return 0, false
	}
	return int(n), true
}

func (g *ggufReader) intReq(suffix string) int {
	key := g.arch + "." + suffix
	if _, present := g.get(key); !present {
		g.bad(key, "missing")
		return 0
	}
	v, _ := g.count(key)
	return v
}

func (g *ggufReader) intOpt(suffix string, def int) int {
	if v, ok := g.count(g.arch + "." + suffix); ok {
		return v
	}
	return def
}

func (g *ggufReader) floatOpt(suffix string, def float64) float64 {
	if v, ok := g.num(g.arch + "." + suffix); ok {
		return v
	}
	return def
}

// commonSpecGGUF reads the llama.cpp hyperparameters every family shares, refusing values
// the runtime would silently misread: a rope dimension count other than the head dimension
// (the runtime rotates whole heads), a value length other than the key length, a vocab_size
// other than the token list's length (llama.cpp's vocabulary, token_embd's row count).
func commonSpecGGUF(get func(string) (any, bool), family, ggufArch string) (*Spec, *ggufReader) {
	g := &ggufReader{get: get, arch: ggufArch}
	a := ggufArch + "."
	s := &Spec{Family: family, GGUFArch: ggufArch}
	s.Hidden = g.intReq("embedding_length")
	s.Intermediate = g.intReq("feed_forward_length")
	s.Layers = g.intReq("block_count")
	s.Heads = g.intReq("attention.head_count")
	s.KVHeads = g.intOpt("attention.head_count_kv", s.Heads)
	s.Context = g.intReq("context_length")
	if v, ok := g.num(a + "attention.layer_norm_rms_epsilon"); ok {
		s.RMSEps = v
	} else if _, present := get(a + "attention.layer_norm_rms_epsilon"); !present {
		g.bad(a+"attention.layer_norm_rms_epsilon", "missing")
	}
	s.RopeTheta = g.floatOpt("rope.freq_base", 10000)
	if s.Heads > 0 {
		s.HeadDim = g.intOpt("attention.key_length", s.Hidden/s.Heads)
		s.ExplicitHeadDim = s.HeadDim != s.Hidden/s.Heads
		if _, set := get(a + "attention.key_length"); !set && s.HeadDim == 0 && s.Hidden > 0 {
			g.bad(a+"attention.head_count", "%d exceeds %sembedding_length %d, and %sattention.key_length is not set (it would be 0)", s.Heads, a, s.Hidden, a)
		}
	}
	if v, ok := g.count(a + "attention.value_length"); ok && s.HeadDim > 0 && v != s.HeadDim {
		g.bad(a+"attention.value_length", "%d, but the key length is %d (the runtime needs them equal)", v, s.HeadDim)
	}
	if v, ok := g.count(a + "rope.dimension_count"); ok && s.HeadDim > 0 && v != s.HeadDim {
		if v == 0 || v > s.HeadDim || v%2 != 0 {
			g.bad(a+"rope.dimension_count", "%d, but the head dimension is %d (want an even count of rotated dimensions up to it)", v, s.HeadDim)
		} else {
			s.RopeDims = v // partial rotary
		}
	}
	tokens := -1
	if v, ok := get("tokenizer.ggml.tokens"); ok {
		if toks, ok := v.([]string); ok {
			tokens = len(toks)
		}
	}
	vocab, hasVocab := g.count(a + "vocab_size")
	switch {
	case tokens >= 0:
		s.Vocab = tokens
		if hasVocab && vocab != tokens {
			g.bad(a+"vocab_size", "%d, but tokenizer.ggml.tokens has %d tokens", vocab, tokens)
		}
	case hasVocab:
		s.Vocab = vocab
	default:
		g.bad("tokenizer.ggml.tokens", "missing")
	}
	if t, ok := get(a + "rope.scaling.type"); ok {
		ts, isStr := t.(string)
		switch {
		case !isStr:
			g.bad(a+"rope.scaling.type", "has type %T, want a string", t)
		case ts == "" || ts == "none":
		case ts == "linear" || ts == "yarn":
			// llama.cpp reads a factor of 0 as no scaling (rope_freq_scale_train 1).
			sc := &RopeScaling{Type: ts, Factor: g.floatOpt("rope.scaling.factor", 1)}
			if sc.Factor == 0 {
				sc.Factor = 1
			}
			if ts == "yarn" {
				sc.OriginalContext = g.intOpt("rope.scaling.original_context_length", 0)
				if v, ok := g.num(a + "rope.scaling.yarn_ext_factor"); ok {
					sc.YarnExtFactor, sc.HasYarnExt = v, true
				}
				if v, ok := g.num(a + "rope.scaling.yarn_attn_factor"); ok {
					sc.YarnAttnFactor, sc.HasYarnA = v, true
				}
				sc.YarnBetaFast = g.floatOpt("rope.scaling.yarn_beta_fast", 32)
				sc.YarnBetaSlow = g.floatOpt("rope.scaling.yarn_beta_slow", 1)
			}
			s.RopeScaling = sc
		default:
			g.bad(a+"rope.scaling.type", "unsupported rope scaling type %q (supported: none, linear, yarn)", ts)
		}
	}
	return s, g
}

func finishGGUF(s *Spec, g *ggufReader) (*Spec, error) {
	if len(g.err) > 0 {
		return nil, fmt.Errorf("%s", joinProblems(g.err))
	}
	if err := s.validate(ggufKeysFor(s)); err != nil {
		return nil, err
	}
	return s, nil
}
