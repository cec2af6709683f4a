package arch

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/internal/problems"
)

// MaxContext is the longest context a spec may declare: positions are int32 in llama.cpp
// (llama_pos), and the runtime sizes no state beyond the context.
const MaxContext = math.MaxInt32

// keyNames are the names a source gives the spec's fields, for errors: config.json's keys for
// HF configs (and a gqf file's config), GGUF metadata keys for GGUF files.
type keyNames struct {
	hidden, intermediate, layers, heads, kvHeads, headDim, vocab, context, eps, theta string
	factor, lowFreq, highFreq, origContext, extFactor, attnFactor, betaFast, betaSlow string
	scaling                                                                           string
	experts, expertsUsed, expertFF                                                    string
}

var hfKeys = &keyNames{
	hidden: "hidden_size", intermediate: "intermediate_size", layers: "num_hidden_layers",
	heads: "num_attention_heads", kvHeads: "num_key_value_heads", headDim: "head_dim",
	vocab: "vocab_size", context: "max_position_embeddings", eps: "rms_norm_eps", theta: "rope_theta",
	factor: "rope_scaling.factor", lowFreq: "rope_scaling.low_freq_factor",
	highFreq: "rope_scaling.high_freq_factor", origContext: "rope_scaling.original_max_position_embeddings",
	extFactor: "rope_scaling.extrapolation_factor", attnFactor: "rope_scaling.attention_factor",
	betaFast: "rope_scaling.beta_fast", betaSlow: "rope_scaling.beta_slow", scaling: "rope_scaling",
	experts: "num_local_experts", expertsUsed: "num_experts_per_tok", expertFF: "intermediate_size",
}

// hfKeysFor returns config.json's key names for a spec's family (Qwen3-MoE names its experts'
// count and width its own way).
func hfKeysFor(s *Spec) *keyNames {
	if s.Family != "qwen3moe" {
		return hfKeys
	}
	k := *hfKeys
	k.experts, k.expertFF = "num_experts", "moe_intermediate_size"
	return &k
}

// ggufKeys are the llama.cpp metadata keys of architecture a ("llama"). The vocabulary is the
// token list's length, as llama.cpp takes it (token_embd must have that many rows).
func ggufKeys(a string) *keyNames {
	p := a + "."
	return &keyNames{
		hidden: p + "embedding_length", intermediate: p + "feed_forward_length", layers: p + "block_count",
		heads: p + "attention.head_count", kvHeads: p + "attention.head_count_kv", headDim: p + "attention.key_length",
		vocab: "tokenizer.ggml.tokens", context: p + "context_length", eps: p + "attention.layer_norm_rms_epsilon",
		theta: p + "rope.freq_base", factor: p + "rope.scaling.factor", lowFreq: "rope_freqs.weight",
		highFreq: "rope_freqs.weight", origContext: p + "rope.scaling.original_context_length",
		extFactor: p + "rope.scaling.yarn_ext_factor", attnFactor: p + "rope.scaling.yarn_attn_factor",
		betaFast: p + "rope.scaling.yarn_beta_fast", betaSlow: p + "rope.scaling.yarn_beta_slow",
		scaling: p + "rope.scaling.type",
		experts: p + "expert_count", expertsUsed: p + "expert_used_count", expertFF: p + "feed_forward_length",
	}
}

// ggufKeysFor returns a spec's GGUF key names (qwen3moe's experts have a width of their own).
func ggufKeysFor(s *Spec) *keyNames {
	k := ggufKeys(s.GGUFArch)
	if s.GGUFArch == "qwen3moe" {
		k.expertFF = "qwen3moe.expert_feed_forward_length"
	}
	return k
}

// keysFor returns the key names of a spec read from format "hf", "gqf" (config.json's keys)
// or "gguf".
func keysFor(format string, s *Spec) *keyNames {
	if format == "gguf" {
		return ggufKeysFor(s)
	}
	return hfKeysFor(s)
}

// validate checks the internal consistency of a spec and the range of every value, naming
// the keys of k: dimensions positive, the context in [1, MaxContext], and every float finite
// and in range once rounded to float32 (the precision GGUF stores and the runtime computes
// in), so that 1e300 is refused rather than written as +Inf.
func (s *Spec) validate(k *keyNames) error {
	var probs []string
	bad := func(key, msg string, args ...any) {
		probs = append(probs, key+": "+fmt.Sprintf(msg, args...))
	}
	pos := func(v int, key string) {
		if v <= 0 {
			bad(key, "must be positive, got %d", v)
		}
	}
	pos(s.Hidden, k.hidden)
	pos(s.Intermediate, k.intermediate)
	pos(s.Layers, k.layers)
	pos(s.Heads, k.heads)
	pos(s.KVHeads, k.kvHeads)
	pos(s.HeadDim, k.headDim)
	pos(s.Vocab, k.vocab)
	if s.Context <= 0 || s.Context > MaxContext {
		bad(k.context, "must be in [1, %d], got %d", MaxContext, s.Context)
	}
	if s.Heads > 0 && s.KVHeads > 0 && s.Heads%s.KVHeads != 0 {
		bad(k.heads, "%d is not a multiple of %s %d", s.Heads, k.kvHeads, s.KVHeads)
	}
	if s.HeadDim%2 != 0 {
		bad(k.headDim, "%d is odd (RoPE needs pairs)", s.HeadDim)
	}
	// f32 checks that v, rounded to float32, is finite and above lo (or at least lo when
	// incl) and, when hi > lo, below hi.
	f32 := func(key string, v, lo float64, incl bool, hi float64) {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			bad(key, "must be finite, got %g", v)
		case math.Abs(v) > math.MaxFloat32:
			bad(key, "%g is out of float32's range (it would be stored as ±Inf)", v)
		case v < lo || (v == lo && !incl):
			if incl {
				bad(key, "must be at least %g, got %g", lo, v)
			} else {
				bad(key, "must be greater than %g, got %g", lo, v)
			}
		case hi > lo && v >= hi:
			bad(key, "must be below %g, got %g", hi, v)
		case v != 0 && float32(v) == 0:
			bad(key, "%g rounds to 0 in float32", v)
		}
	}
	s.validateMoE(k, bad)
	f32(k.eps, s.RMSEps, 0, false, 1)
	f32(k.theta, s.RopeTheta, 0, false, 0)
	if sc := s.RopeScaling; sc != nil {
		f32(k.factor, sc.Factor, 0, false, 0)
		switch sc.Type {
		case "llama3":
			f32(k.lowFreq, sc.LowFreqFactor, 0, false, 0)
			f32(k.highFreq, sc.HighFreqFactor, 0, false, 0)
			if sc.HighFreqFactor <= sc.LowFreqFactor {
				bad(k.highFreq, "%g must be greater than the low frequency factor %g", sc.HighFreqFactor, sc.LowFreqFactor)
			}
			if sc.OriginalContext <= 0 || sc.OriginalContext > MaxContext {
				bad(k.origContext, "must be in [1, %d], got %d", MaxContext, sc.OriginalContext)
			}
		case "yarn":
			if sc.OriginalContext <= 0 || sc.OriginalContext > MaxContext {
				bad(k.origContext, "must be in [1, %d], got %d", MaxContext, sc.OriginalContext)
			}
			if sc.HasYarnExt {
				f32(k.extFactor, sc.YarnExtFactor, 0, true, 0)
			}
			if sc.HasYarnA {
				f32(k.attnFactor, sc.YarnAttnFactor, 0, true, 0)
			}
			f32(k.betaFast, sc.YarnBetaFast, 0, false, 0)
			f32(k.betaSlow, sc.YarnBetaSlow, 0, false, 0)
			// Read and checked, then refused: the runtime does not compute YaRN, so that
			// convert, run, calibrate and verify all refuse such a model alike.
			bad(k.scaling, "yarn is not supported (supported: linear, llama3; longrope for Phi-3)")
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return nil
}

// Stored is a tensor as a file holds it: its name in that file (HF names in a safetensors
// checkpoint, GGUF names in GGUF and gqf files) and its shape in HF order ([out, in]).
type Stored struct {
	Name  string
	Shape []int
}

// CheckStored checks a spec built from a config (config.json, GGUF metadata, a gqf file's
// config) against the tensors the model's file actually holds, before anything is sized by
// the spec: tensor shapes come from the file, so they are bounded by its size, and a spec
// that agrees with them is too. It must run before Tensors, ModelGraph or any allocation
// sized by the spec's dimensions.
//
// It checks that the file holds exactly the spec's layers, numbered 0 to Layers-1, and that
// the vocabulary, hidden size, attention heads, head dimension and intermediate size agree
// with the shapes of the embedding, the output and layer 0's projections; for GGUF it also
// refuses tensors a model of the spec does not have (llama.cpp refuses them too). format is
// "hf" (HF tensor names, config.json keys), "gguf" (GGUF names and keys) or "gqf" (GGUF
// names, config.json keys); where names the tensors' file in errors ("model.safetensors",
// "the file"). The error names keys and tensors, one line, without a file prefix: the caller
// adds the file whose keys are wrong.
//
// A tensor the checks need but the file lacks is left to the caller's per-tensor check,
// which reports it as missing; nothing here or there is sized by an unchecked value.
func CheckStored(s *Spec, fam Family, format, where string, tensors []Stored) error {
	if format == "hf" { // a multimodal Gemma 3's text model: its prefix, from the names
		names := make([]string, len(tensors))
		for i, t := range tensors {
			names[i] = t.Name
		}
		resolveHF(s, names)
	}
	k := keysFor(format, s)
	name := func(t Tensor) string {
		if format == "hf" {
			return t.HFName
		}
		return t.Ref.GGUFName()
	}
	layerPrefix := "blk."
	if format == "hf" {
		layerPrefix = s.hfPrefix() + "layers."
	}
	shapes := make(map[string][]int, len(tensors))
	layers := map[int]string{} // layer index -> its first tensor, in file order
	for _, t := range tensors {
		shapes[t.Name] = t.Shape
		if l, ok := layerIndex(t.Name, layerPrefix); ok {
			if _, seen := layers[l]; !seen {
				layers[l] = t.Name
			}
		}
	}
	var probs []string
	bad := func(msg string, args ...any) { probs = append(probs, fmt.Sprintf(msg, args...)) }
	layersOK := len(layers) == s.Layers
	if !layersOK {
		top := -1
		for l := range layers {
			top = max(top, l)
		}
		numbered := ""
		if top+1 != len(layers) {
			numbered = fmt.Sprintf(" (numbered up to %d)", top)
		}
		bad("%s: %d, but %s holds %d layers%s", k.layers, s.Layers, where, len(layers), numbered)
	} else {
		var beyond []int
		for l := range layers {
			if l >= s.Layers {
				beyond = append(beyond, l)
			}
		}
		if len(beyond) > 0 {
			sort.Ints(beyond)
			layersOK = false
			bad("%s: layer %d, but %s is %d (layers 0 to %d)", layers[beyond[0]], beyond[0], k.layers, s.Layers, s.Layers-1)
		}
	}

	// The tensors of one layer and the global ones, with the shapes the spec gives them
	// (a one-layer copy: nothing here is sized by the spec's layer count).
	one := *s
	one.Layers = 1
	ref := map[Role]Tensor{}
	for _, t := range fam.Tensors(&one) {
		ref[t.Ref.Role] = t
	}
	stored := func(r Role) (string, []int, bool) {
		t, ok := ref[r]
		if !ok || (format == "hf" && (t.SrcShape != nil || t.Parts != nil)) {
			return "", nil, false // absent, or cut from a fused tensor or stacked from parts (checked by the caller)
		}
		n := name(t)
		sh, ok := shapes[n]
		return n, sh, ok
	}
	// eq reports whether a·b == want, without overflow (a, b and want positive).
	eq := func(a, b, want int) bool { return a > 0 && b > 0 && want%b == 0 && want/b == a }
	if n, sh, ok := stored(TokenEmbd); ok {
		if len(sh) != 2 {
			bad("%s: shape %v is not a matrix [%s, %s]", n, sh, k.vocab, k.hidden)
		} else {
			if sh[0] != s.Vocab {
				bad("%s: %s, but %s has %d rows", k.vocab, count(k, k.vocab, s.Vocab), n, sh[0])
			}
			if sh[1] != s.Hidden {
				bad("%s: %d, but %s has %d columns", k.hidden, s.Hidden, n, sh[1])
			}
		}
	}
	if n, sh, ok := stored(Output); ok && !s.Tied && len(sh) == 2 && sh[0] != s.Vocab {
		bad("%s: %s, but %s has %d rows", k.vocab, count(k, k.vocab, s.Vocab), n, sh[0])
	}
	if n, sh, ok := stored(AttnQNorm); ok && s.QKNorm && len(sh) == 1 && sh[0] != s.HeadDim {
		bad("%s: %d, but %s has %d values", k.headDim, s.HeadDim, n, sh[0])
	}
	if n, sh, ok := stored(AttnQ); ok && len(sh) == 2 && !eq(s.Heads, s.HeadDim, sh[0]) {
		bad("%s × %s: %d × %d, but %s has %d rows", k.heads, k.headDim, s.Heads, s.HeadDim, n, sh[0])
	}
	if n, sh, ok := stored(AttnK); ok && len(sh) == 2 && !eq(s.KVHeads, s.HeadDim, sh[0]) {
		bad("%s × %s: %d × %d, but %s has %d rows", k.kvHeads, k.headDim, s.KVHeads, s.HeadDim, n, sh[0])
	}
	if n, sh, ok := stored(FFNGate); ok && len(sh) == 2 && sh[0] != s.Intermediate {
		bad("%s: %d, but %s has %d rows", k.intermediate, s.Intermediate, n, sh[0])
	}
	if n, sh, ok := stored(FFNGateInp); ok && len(sh) == 2 && sh[0] != s.Experts {
		bad("%s: %d, but %s has %d rows", k.experts, s.Experts, n, sh[0])
	}
	if t, ok := ref[FFNGateExps]; ok { // the stack in GGUF, expert 0's matrix in HF
		n, want := name(t), t.Shape
		if format == "hf" {
			n, want = t.Parts[0], t.Shape[1:]
		}
		if sh, ok := shapes[n]; ok && len(sh) == len(want) {
			if len(sh) == 3 && sh[0] != s.Experts {
				bad("%s: %d, but %s holds %d experts", k.experts, s.Experts, n, sh[0])
			}
			if sh[len(sh)-2] != s.ExpertFF {
				bad("%s: %d, but %s has %d rows per expert", k.expertFF, s.ExpertFF, n, sh[len(sh)-2])
			}
		}
	}

	// GGUF: llama.cpp refuses a file with tensors its model does not have (its loader
	// counts them), and so does the runtime, rather than ignore them.
	if format == "gguf" && layersOK {
		want := map[string]bool{string(RopeFreqs): true}
		for _, t := range fam.Tensors(s) {
			want[name(t)] = true
			if t.GGUFSrc != "" {
				want[t.GGUFSrc] = true
			}
		}
		var extra []string
		for _, t := range tensors {
			if !want[t.Name] {
				extra = append(extra, t.Name)
			}
		}
		switch {
		case len(extra) == 1:
			bad("%s: unexpected tensor: a %s model with %s %d has no such tensor", extra[0], s.Family, k.layers, s.Layers)
		case len(extra) > 1:
			bad("%d unexpected tensors: a %s model with %s %d has none of %s", len(extra), s.Family, k.layers, s.Layers,
				strings.Join(problems.First(extra, 5), ", "))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return nil
}

// CheckHF is CheckStored for a HuggingFace folder: its checkpoint's tensors against s, the
// error naming config.json and the checkpoint file(s).
func CheckHF(s *Spec, fam Family, m *hf.Model) error {
	ck := m.Checkpoint
	stored := make([]Stored, 0, len(ck.Tensors()))
	for _, t := range ck.Tensors() {
		stored = append(stored, Stored{Name: t.Name, Shape: t.Shape})
	}
	where := fmt.Sprintf("the checkpoint's %d files", len(ck.Files()))
	if files := ck.Files(); len(files) == 1 {
		where = filepath.Base(files[0])
	}
	if err := CheckStored(s, fam, "hf", where, stored); err != nil {
		return fmt.Errorf("%s: %w", m.Config.Path(), err)
	}
	return nil
}

// count formats the value of a key; the GGUF vocabulary is a count of tokens.
func count(k *keyNames, key string, v int) string {
	if key == "tokenizer.ggml.tokens" {
		return fmt.Sprintf("%d tokens", v)
	}
	return strconv.Itoa(v)
}

// layerIndex returns N of a tensor named prefix + "N." + rest, N in canonical decimal.
func layerIndex(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, ".")
	if !ok || digits == "" || len(digits) > 9 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
