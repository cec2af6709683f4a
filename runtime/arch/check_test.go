package arch

import (
	"math"
	"strings"
	"testing"
	"time"
)

// storedOf lists the tensors a file of this spec holds, named as format names them.
func storedOf(f Family, s *Spec, format string) []Stored {
	var out []Stored
	for _, t := range f.Tensors(s) {
		if t.Generated {
			continue
		}
		name := t.Ref.GGUFName()
		if format == "hf" {
			name = t.HFName
		}
		out = append(out, Stored{Name: name, Shape: append([]int(nil), t.Shape...)})
	}
	return out
}

// TestCheckStored: every dimension of a spec is checked against the stored tensors' shapes,
// naming the key and the tensor, without anything sized by the spec's values (1e9 layers, a
// 2^40 vocabulary and products that overflow int64 are refused at once).
func TestCheckStored(t *testing.T) {
	fam, _ := ForHF("Qwen3ForCausalLM")
	good, err := fam.SpecFromHF(map[string]any{"hidden_size": 64.0, "intermediate_size": 96.0, "num_hidden_layers": 3.0,
		"num_attention_heads": 4.0, "num_key_value_heads": 2.0, "head_dim": 32.0, "vocab_size": 100.0})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"hf", "gguf", "gqf"} {
		if err := CheckStored(good, fam, format, "the file", storedOf(fam, good, format)); err != nil {
			t.Errorf("%s: a consistent spec refused: %v", format, err)
		}
	}
	files := storedOf(fam, good, "hf")
	for _, c := range []struct {
		edit func(s *Spec)
		want string
	}{
		{func(s *Spec) { s.Layers = 1e9 }, "num_hidden_layers: 1000000000, but model.safetensors holds 3 layers"},
		{func(s *Spec) { s.Layers = 2 }, "num_hidden_layers: 2, but model.safetensors holds 3 layers"},
		{func(s *Spec) { s.Vocab = 1 << 40 }, "vocab_size: 1099511627776, but model.embed_tokens.weight has 100 rows"},
		{func(s *Spec) { s.Hidden = 1 << 40 }, "hidden_size: 1099511627776, but model.embed_tokens.weight has 64 columns"},
		{func(s *Spec) { s.HeadDim = 1 << 40 }, "head_dim: 1099511627776, but model.layers.0.self_attn.q_norm.weight has 32 values"},
		{func(s *Spec) { s.Heads, s.HeadDim = 1<<40, 1<<40 }, "num_attention_heads × head_dim: 1099511627776 × 1099511627776, but model.layers.0.self_attn.q_proj.weight has 128 rows"},
		{func(s *Spec) { s.Heads = 1<<62 + 1 }, "num_attention_heads × head_dim: 4611686018427387905 × 32"},
		{func(s *Spec) { s.KVHeads = 1 }, "num_key_value_heads × head_dim: 1 × 32, but model.layers.0.self_attn.k_proj.weight has 64 rows"},
		{func(s *Spec) { s.Intermediate = 1e12 }, "intermediate_size: 1000000000000, but model.layers.0.mlp.gate_proj.weight has 96 rows"},
	} {
		s := *good
		c.edit(&s)
		start := time.Now()
		err := CheckStored(&s, fam, "hf", "model.safetensors", files)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %v, want one line containing %q", err, c.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%q: took %v", c.want, d)
		}
	}

	// Layers numbered other than 0 to Layers-1, and (GGUF) tensors the model does not have.
	gg := storedOf(fam, good, "gguf")
	odd := append(append([]Stored(nil), gg...), Stored{Name: "blk.9.attn_norm.weight", Shape: []int{64}})
	if err := CheckStored(good, fam, "gguf", "the file", odd); err == nil || !strings.Contains(err.Error(), "qwen3.block_count: 3, but the file holds 4 layers (numbered up to 9)") {
		t.Errorf("layer 9 of 3: %v", err)
	}
	var moved []Stored
	for _, st := range gg {
		if strings.HasPrefix(st.Name, "blk.2.") {
			st.Name = "blk.5." + strings.TrimPrefix(st.Name, "blk.2.")
		}
		moved = append(moved, st)
	}
	if err := CheckStored(good, fam, "gguf", "the file", moved); err == nil || !strings.Contains(err.Error(), "blk.5.attn_norm.weight: layer 5, but qwen3.block_count is 3 (layers 0 to 2)") {
		t.Errorf("layers 0, 1, 5: %v", err)
	}
	extra := append(append([]Stored(nil), gg...), Stored{Name: "blk.0.attn_q.bias", Shape: []int{128}}, Stored{Name: "mystery", Shape: []int{1}})
	if err := CheckStored(good, fam, "gguf", "the file", extra); err == nil || !strings.Contains(err.Error(), "2 unexpected tensors: a qwen3 model with qwen3.block_count 3 has none of blk.0.attn_q.bias, mystery") {
		t.Errorf("extra tensors: %v", err)
	}
	// HF checkpoints may carry extra tensors (buffers, a tied lm_head): they are left alone.
	hfExtra := append(append([]Stored(nil), files...), Stored{Name: "lm_head.weight", Shape: []int{100, 64}})
	if err := CheckStored(good, fam, "hf", "model.safetensors", hfExtra); err != nil {
		t.Errorf("HF extra tensor refused: %v", err)
	}
	if _, ok := layerIndex("blk.01.attn_norm.weight", "blk."); ok {
		t.Error("blk.01 read as a layer index")
	}
	if _, ok := layerIndex("blk.99999999999.attn_norm.weight", "blk."); ok {
		t.Error("blk.99999999999 read as a layer index")
	}
}

// ggufGetter serves metadata from a map.
func ggufGetter(kv map[string]any) func(string) (any, bool) {
	return func(k string) (any, bool) { v, ok := kv[k]; return v, ok }
}

// TestSpecFromGGUFRefuses: GGUF metadata of the wrong type, out of range, or disagreeing with
// itself is refused naming the GGUF key, never truncated or silently replaced.
func TestSpecFromGGUFRefuses(t *testing.T) {
	base := func() map[string]any {
		toks := make([]string, 100)
		return map[string]any{
			"llama.embedding_length": uint32(64), "llama.feed_forward_length": uint32(96), "llama.block_count": uint32(2),
			"llama.attention.head_count": uint32(4), "llama.attention.head_count_kv": uint32(2),
			"llama.context_length": uint32(256), "llama.attention.layer_norm_rms_epsilon": float32(1e-5),
			"llama.rope.freq_base": float32(10000), "llama.rope.dimension_count": uint32(16), "llama.vocab_size": uint32(100),
			"tokenizer.ggml.tokens": toks,
		}
	}
	fam, _ := ForGGUF("llama")
	s, err := fam.SpecFromGGUF(ggufGetter(base()))
	if err != nil {
		t.Fatal(err)
	}
	if s.Vocab != 100 || s.HeadDim != 16 || s.Context != 256 || s.Layers != 2 {
		t.Fatalf("spec %+v", s)
	}
	for _, c := range []struct {
		key  string
		v    any // nil: delete
		want string
	}{
		{"llama.block_count", float32(2), "llama.block_count: has type float32, want an unsigned integer"},
		{"llama.block_count", "2", "llama.block_count: has type string"},
		{"llama.block_count", int32(-1), "llama.block_count: must not be negative, got -1"},
		{"llama.block_count", uint64(1) << 63, "llama.block_count: 9223372036854775808 is too large"},
		{"llama.block_count", nil, "llama.block_count: missing"},
		{"llama.embedding_length", uint32(0), "llama.embedding_length: must be positive, got 0"},
		{"llama.context_length", uint32(0), "llama.context_length: must be in [1, 2147483647], got 0"},
		{"llama.context_length", uint32(math.MaxUint32), "llama.context_length: must be in [1, 2147483647], got 4294967295"},
		{"llama.rope.dimension_count", uint32(18), "llama.rope.dimension_count: 18, but the head dimension is 16"},
		{"llama.rope.dimension_count", uint32(7), "llama.rope.dimension_count: 7, but the head dimension is 16"},
		{"llama.attention.value_length", uint32(8), "llama.attention.value_length: 8, but the key length is 16"},
		{"llama.vocab_size", uint32(101), "llama.vocab_size: 101, but tokenizer.ggml.tokens has 100 tokens"},
		{"llama.rope.freq_base", float32(math.Inf(1)), "llama.rope.freq_base: must be finite, got +Inf"},
		{"llama.rope.freq_base", float32(-1), "llama.rope.freq_base: must be greater than 0, got -1"},
		{"llama.rope.freq_base", float64(1e300), "llama.rope.freq_base: 1e+300 is out of float32's range"},
		{"llama.attention.layer_norm_rms_epsilon", float32(math.NaN()), "llama.attention.layer_norm_rms_epsilon: must be finite, got NaN"},
		{"llama.attention.layer_norm_rms_epsilon", float32(0), "llama.attention.layer_norm_rms_epsilon: must be greater than 0, got 0"},
		{"llama.attention.layer_norm_rms_epsilon", nil, "llama.attention.layer_norm_rms_epsilon: missing"},
		{"llama.attention.head_count_kv", uint32(3), "llama.attention.head_count: 4 is not a multiple of llama.attention.head_count_kv 3"},
		{"llama.rope.scaling.type", "spiral", `llama.rope.scaling.type: unsupported rope scaling type "spiral"`},
		{"llama.rope.scaling.type", "yarn", `llama.rope.scaling.type: yarn is not supported`},
	} {
		kv := base()
		if c.v == nil {
			delete(kv, c.key)
		} else {
			kv[c.key] = c.v
		}
		_, err := fam.SpecFromGGUF(ggufGetter(kv))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %v: error %v, want %q", c.key, c.v, err, c.want)
		}
	}
	kv := base()
	kv["llama.rope.scaling.type"], kv["llama.rope.scaling.factor"] = "linear", float32(-2)
	if _, err := fam.SpecFromGGUF(ggufGetter(kv)); err == nil || !strings.Contains(err.Error(), "llama.rope.scaling.factor: must be greater than 0, got -2") {
		t.Errorf("linear factor -2: %v", err)
	}
	kv["llama.rope.scaling.factor"] = float32(0) // llama.cpp: no scaling
	if _, err := fam.SpecFromGGUF(ggufGetter(kv)); err != nil {
		t.Errorf("linear factor 0: %v", err)
	}
}

// TestSpecFromHFRanges: config.json values out of range are refused naming the key; an
// explicit rope_theta of 0 is refused, not replaced by the default.
func TestSpecFromHFRanges(t *testing.T) {
	fam, _ := ForHF("LlamaForCausalLM")
	base := func() map[string]any {
		return map[string]any{"hidden_size": 64.0, "intermediate_size": 96.0, "num_hidden_layers": 2.0,
			"num_attention_heads": 4.0, "vocab_size": 100.0}
	}
	s, err := fam.SpecFromHF(base())
	if err != nil {
		t.Fatal(err)
	}
	if s.RopeTheta != 10000 || s.Context != 2048 || s.RMSEps != 1e-6 {
		t.Fatalf("defaults: %+v", s)
	}
	for _, c := range []struct {
		key  string
		v    any
		want string
	}{
		{"rope_theta", 0.0, "rope_theta: must be greater than 0, got 0"},
		{"rope_theta", 1e300, "rope_theta: 1e+300 is out of float32's range"},
		{"rms_norm_eps", 1e300, "rms_norm_eps: 1e+300 is out of float32's range"},
		{"rms_norm_eps", 1e-50, "rms_norm_eps: 1e-50 rounds to 0 in float32"},
		{"max_position_embeddings", 0.0, "max_position_embeddings: must be in [1, 2147483647], got 0"},
		{"rope_scaling", map[string]any{"rope_type": "linear", "factor": -2.0}, "rope_scaling.factor: must be greater than 0, got -2"},
		{"rope_scaling", map[string]any{"rope_type": "linear", "factor": 0.0}, "rope_scaling.factor: must be greater than 0, got 0"},
		{"rope_scaling", map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 2.0, "high_freq_factor": 1.0},
			"rope_scaling.high_freq_factor: 1 must be greater than the low frequency factor 2"},
		{"rope_scaling", map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64.0, "beta_fast": math.Inf(1)},
			"rope_scaling.beta_fast: must be finite, got +Inf"},
		{"rope_scaling", map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64.0},
			"rope_scaling: yarn is not supported (supported: linear, llama3; longrope for Phi-3)"},
		{"rope_scaling", map[string]any{"rope_type": "longrope", "short_factor": []any{1.0}, "long_factor": []any{1.0}},
			`rope_scaling: rope type "longrope" is supported for Phi-3 only`},
		{"rope_parameters", map[string]any{"rope_theta": -1.0}, "rope_theta: must be greater than 0, got -1"},
		{"num_attention_heads", 1e9, "num_attention_heads: 1000000000 exceeds hidden_size 64, and head_dim is not set (it would be 0)"},
	} {
		cfg := base()
		cfg[c.key] = c.v
		_, err := fam.SpecFromHF(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %v: error %v, want %q", c.key, c.v, err, c.want)
		}
	}
}

// TestLowerLength: a graph longer than the model's context, or than MaxGraphLen, or shorter
// than one position, is refused before its L×L constants are allocated (gqf --max-len 1e8
// used to panic in makeslice).
func TestLowerLength(t *testing.T) {
	fam, _ := ForHF("LlamaForCausalLM")
	s, err := fam.SpecFromHF(map[string]any{"hidden_size": 64.0, "intermediate_size": 96.0, "num_hidden_layers": 1.0,
		"num_attention_heads": 4.0, "vocab_size": 100.0, "max_position_embeddings": 1e6})
	if err != nil {
		t.Fatal(err)
	}
	g := ModelGraph(s)
	if _, err := g.Lower(8); err != nil {
		t.Fatal(err)
	}
	for L, want := range map[int]string{
		0: "max_len: must be at least 1, got 0", -1: "max_len: must be at least 1, got -1",
		1e8:             "max_len: 100000000 exceeds the model's context length 1000000",
		MaxGraphLen + 1: "max_len: 8193 exceeds the longest graph gquant lowers, 8192 positions",
	} {
		if _, err := g.Lower(L); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Lower(%d): %v, want %q", L, err, want)
		}
	}
}
