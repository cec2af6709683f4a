package arch

import (
	"strings"
	"testing"
)

// qwen3MoeConfig is Qwen/Qwen3-30B-A3B's config.json (the keys gquant reads), shrunk to 4
// layers.
func qwen3MoeConfig() map[string]any {
	return map[string]any{
		"architectures": []any{"Qwen3MoeForCausalLM"}, "attention_bias": false, "decoder_sparse_step": 1.0,
		"head_dim": 128.0, "hidden_act": "silu", "hidden_size": 2048.0, "intermediate_size": 6144.0,
		"max_position_embeddings": 40960.0, "mlp_only_layers": []any{}, "moe_intermediate_size": 768.0,
		"norm_topk_prob": true, "num_attention_heads": 32.0, "num_experts": 128.0, "num_experts_per_tok": 8.0,
		"num_hidden_layers": 4.0, "num_key_value_heads": 4.0, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
		"sliding_window": nil, "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 151936.0,
	}
}

// mixtralConfig is mistralai/Mixtral-8x7B-v0.1's config.json, shrunk to 4 layers.
func mixtralConfig() map[string]any {
	return map[string]any{
		"architectures": []any{"MixtralForCausalLM"}, "hidden_act": "silu", "hidden_size": 4096.0,
		"intermediate_size": 14336.0, "max_position_embeddings": 32768.0, "num_attention_heads": 32.0,
		"num_experts_per_tok": 2.0, "num_hidden_layers": 4.0, "num_key_value_heads": 8.0, "num_local_experts": 8.0,
		"rms_norm_eps": 1e-5, "rope_theta": 1e6, "router_aux_loss_coef": 0.02, "sliding_window": nil,
		"tie_word_embeddings": false, "vocab_size": 32000.0,
	}
}

// TestMoESpecs reads both families from config.json, writes their GGUF keys with llama.cpp's
// types, reads those back (a llama file with experts is Mixtral) and lists the router and
// the stacks of experts, each stacked from the checkpoint's per-expert tensors.
func TestMoESpecs(t *testing.T) {
	for _, c := range []struct {
		cfg                    map[string]any
		family, ggufArch, part string
		experts, used, ff      int
	}{
		{qwen3MoeConfig(), "qwen3moe", "qwen3moe", "model.layers.1.mlp.experts.5.up_proj.weight", 128, 8, 768},
		{mixtralConfig(), "mixtral", "llama", "model.layers.1.block_sparse_moe.experts.5.w3.weight", 8, 2, 14336},
	} {
		f, err := ForHF(c.cfg["architectures"].([]any)[0].(string))
		if err != nil {
			t.Fatal(err)
		}
		s, err := f.SpecFromHF(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.Family != c.family || s.GGUFArch != c.ggufArch || s.Experts != c.experts || s.ExpertsUsed != c.used ||
			s.ExpertFF != c.ff || !s.NormTopK {
			t.Fatalf("%s: spec %+v", c.family, s)
		}
		kv := map[string]any{}
		for _, x := range GGUFMetadata(s) {
			kv[x.Key] = x.Value
		}
		a := c.ggufArch + "."
		if kv[a+"expert_count"] != uint32(c.experts) || kv[a+"expert_used_count"] != uint32(c.used) {
			t.Errorf("%s: expert keys %v %v", c.family, kv[a+"expert_count"], kv[a+"expert_used_count"])
		}
		if v, ok := kv[a+"expert_feed_forward_length"]; (c.ggufArch == "qwen3moe") != ok || (ok && v != uint32(c.ff)) {
			t.Errorf("%s: expert_feed_forward_length %v (present %v)", c.family, v, ok)
		}
		if kv[a+"feed_forward_length"] != uint32(s.Intermediate) {
			t.Errorf("%s: feed_forward_length %v", c.family, kv[a+"feed_forward_length"])
		}
		kv["tokenizer.ggml.tokens"] = make([]string, s.Vocab)
		gf, err := ForGGUF(c.ggufArch)
		if err != nil {
			t.Fatal(err)
		}
		g, err := gf.SpecFromGGUF(func(k string) (any, bool) { v, ok := kv[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		if g.Family != c.family || g.Experts != c.experts || g.ExpertsUsed != c.used || g.ExpertFF != c.ff || !g.NormTopK {
			t.Errorf("%s: from GGUF %+v", c.family, g)
		}
		var router, stack *Tensor
		ts := f.Tensors(s)
		for i := range ts {
			switch ts[i].Ref {
			case TensorRef{Role: FFNGateInp, Layer: 1}:
				router = &ts[i]
			case TensorRef{Role: FFNUpExps, Layer: 1}:
				stack = &ts[i]
			}
			if ts[i].Ref.Role == FFNGate || ts[i].Ref.Role == FFNUp || ts[i].Ref.Role == FFNDown {
				t.Errorf("%s: dense FFN tensor %s", c.family, ts[i].Ref.GGUFName())
			}
		}
		if router == nil || stack == nil || router.Shape[0] != c.experts || len(stack.Parts) != c.experts ||
			stack.Parts[5] != c.part || stack.HFShape()[0] != c.ff || stack.Shape[0] != c.experts {
			t.Fatalf("%s: router %+v, up stack %+v", c.family, router, stack)
		}
		if err := CheckGGUF(s); err != nil {
			t.Errorf("%s: %v", c.family, err)
		}
		if err := CheckGQF(s); err == nil || !strings.Contains(err.Error(), "mixture of experts") {
			t.Errorf("%s: gqf not refused: %v", c.family, err)
		}
	}
}

// TestMoERefusals: what llama.cpp's qwen3moe and llama cannot run is refused by name.
func TestMoERefusals(t *testing.T) {
	for _, c := range []struct {
		cfg  func() map[string]any
		key  string
		val  any
		want string
	}{
		{qwen3MoeConfig, "mlp_only_layers", []any{0.0}, "mlp_only_layers"},
		{qwen3MoeConfig, "decoder_sparse_step", 2.0, "decoder_sparse_step"},
		{qwen3MoeConfig, "use_sliding_window", true, "use_sliding_window"},
		{qwen3MoeConfig, "num_experts", 0.0, "num_experts"},
		{qwen3MoeConfig, "num_experts_per_tok", 129.0, "num_experts_per_tok"},
		{qwen3MoeConfig, "moe_intermediate_size", 0.0, "moe_intermediate_size"},
		{mixtralConfig, "num_local_experts", 2000.0, "num_local_experts"},
		{mixtralConfig, "num_experts_per_tok", nil, "num_experts_per_tok"},
		{mixtralConfig, "attention_bias", true, "attention_bias"},
	} {
		cfg := c.cfg()
		if c.val == nil {
			delete(cfg, c.key)
		} else {
			cfg[c.key] = c.val
		}
		f, _ := ForHF(cfg["architectures"].([]any)[0].(string))
		_, err := f.SpecFromHF(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %v: %v, want an error naming %s", c.key, c.val, err, c.want)
		}
	}
	cfg := qwen3MoeConfig()
	cfg["norm_topk_prob"] = false
	f, _ := ForHF("Qwen3MoeForCausalLM")
	s, err := f.SpecFromHF(cfg)
	if err != nil {
		t.Fatal(err) // the runtime computes it
	}
	if err := CheckGGUF(s); err == nil || !strings.Contains(err.Error(), "norm_topk_prob") {
		t.Errorf("unnormalized experts to GGUF: %v", err)
	}
	kv := map[string]any{"qwen3moe.expert_count": uint32(8), "qwen3moe.expert_used_count": uint32(2),
		"qwen3moe.expert_group_count": uint32(2)}
	for _, x := range GGUFMetadata(s) {
		if _, ok := kv[x.Key]; !ok {
			kv[x.Key] = x.Value
		}
	}
	kv["tokenizer.ggml.tokens"] = make([]string, s.Vocab)
	if _, err := f.SpecFromGGUF(func(k string) (any, bool) { v, ok := kv[k]; return v, ok }); err == nil ||
		!strings.Contains(err.Error(), "qwen3moe.expert_group_count") {
		t.Errorf("grouped experts: %v", err)
	}
	delete(kv, "qwen3moe.expert_group_count")
	delete(kv, "qwen3moe.expert_used_count")
	if _, err := f.SpecFromGGUF(func(k string) (any, bool) { v, ok := kv[k]; return v, ok }); err == nil ||
		!strings.Contains(err.Error(), "qwen3moe.expert_used_count: missing") {
		t.Errorf("no expert_used_count: %v", err)
	}
}

// TestCheckStoredExperts: a GGUF stack of the wrong expert count or width, and an HF router of
// the wrong row count, are refused naming the key.
func TestCheckStoredExperts(t *testing.T) {
	f, _ := ForHF("Qwen3MoeForCausalLM")
	s, err := f.SpecFromHF(qwen3MoeConfig())
	if err != nil {
		t.Fatal(err)
	}
	stored := func(format string, edit func(name string, shape []int) []int) []Stored {
		var out []Stored
		for _, x := range f.Tensors(s) {
			for _, n := range map[bool][]string{true: x.HFNames(), false: {x.Ref.GGUFName()}}[format == "hf"] {
				shape := x.Shape
				if format == "hf" {
					shape = x.HFShape()
				}
				out = append(out, Stored{Name: n, Shape: edit(n, append([]int(nil), shape...))})
			}
		}
		return out
	}
	same := func(_ string, sh []int) []int { return sh }
	for _, format := range []string{"hf", "gguf"} {
		if err := CheckStored(s, f, format, "the file", stored(format, same)); err != nil {
			t.Errorf("%s: %v", format, err)
		}
	}
	for _, c := range []struct {
		format, tensor string
		shape          []int
		want           string
	}{
		{"gguf", "blk.0.ffn_gate_exps.weight", []int{64, 768, 2048}, "qwen3moe.expert_count: 128, but blk.0.ffn_gate_exps.weight holds 64 experts"},
		{"gguf", "blk.0.ffn_gate_exps.weight", []int{128, 512, 2048}, "qwen3moe.expert_feed_forward_length: 768"},
		{"hf", "model.layers.0.mlp.gate.weight", []int{64, 2048}, "num_experts: 128, but model.layers.0.mlp.gate.weight has 64 rows"},
		{"hf", "model.layers.0.mlp.experts.0.gate_proj.weight", []int{512, 2048}, "moe_intermediate_size: 768"},
	} {
		err := CheckStored(s, f, c.format, "the file", stored(c.format, func(n string, sh []int) []int {
			if n == c.tensor {
				return c.shape
			}
			return sh
		}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s %v: %v, want %q", c.format, c.tensor, c.shape, err, c.want)
		}
	}
}

func TestExpertWeight(t *testing.T) {
	n := ExpertWeight("blk.3.ffn_down_exps.weight", 17)
	if n != "blk.3.ffn_down_exps.weight#17" {
		t.Fatal(n)
	}
	if st, e, ok := SplitExpert(n); !ok || st != "blk.3.ffn_down_exps.weight" || e != 17 {
		t.Fatalf("%q %d %v", st, e, ok)
	}
	for _, bad := range []string{"blk.3.ffn_down.weight", "a#", "a#-1", "a#01", "a#x"} {
		if _, _, ok := SplitExpert(bad); ok {
			t.Errorf("SplitExpert(%q) accepted", bad)
		}
	}
}
