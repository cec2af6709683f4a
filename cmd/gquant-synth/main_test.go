package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := run([]string{"--preset", "tiny-llama", "-o", dir, "--layers", "1", "--tied", "--vocab", "600", "--llama3-rope-scaling"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"num_hidden_layers": 1,`, `"tie_word_embeddings": true,`, `"vocab_size": 600`, `"rope_type": "llama3"`, `"hidden_size": 256,`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.json lacks %s", want)
		}
	}
	// The dimension overrides apply to the Gemma and Phi-3 presets too.
	for _, c := range []struct {
		preset string
		want   []string
	}{
		{"tiny-gemma2", []string{`"head_dim": 32,`, `"query_pre_attn_scalar": 32,`, `"num_key_value_heads": 2,`, `"hidden_activation": "gelu_pytorch_tanh"`}},
		{"tiny-gemma3", []string{`"head_dim": 32,`, `"sliding_window_pattern": 6,`, `"model_type": "gemma3_text"`, `"rope_local_base_freq": 10000`}},
		{"tiny-phi3", []string{`"partial_rotary_factor": 0.75,`, `"original_max_position_embeddings": 4096,`, `"model_type": "phi3"`}},
		// The mixtures of experts: --intermediate is each expert's width; --experts and
		// --experts-used set their count and those of a token.
		{"tiny-mixtral", []string{`"head_dim": 32,`, `"num_local_experts": 4,`, `"num_experts_per_tok": 3,`, `"model_type": "mixtral"`}},
		{"tiny-qwen3moe", []string{`"head_dim": 32,`, `"num_experts": 4,`, `"num_experts_per_tok": 3,`, `"moe_intermediate_size": 256,`,
			`"norm_topk_prob": true,`, `"model_type": "qwen3_moe"`}},
	} {
		d := filepath.Join(t.TempDir(), c.preset)
		args := []string{"--preset", c.preset, "-o", d, "--hidden", "128", "--layers", "2", "--heads", "8", "--kv-heads", "2", "--intermediate", "256"}
		if c.preset != "tiny-phi3" {
			args = append(args, "--head-dim", "32")
		}
		if strings.Contains(c.preset, "mixtral") || strings.Contains(c.preset, "moe") {
			args = append(args, "--experts", "4", "--experts-used", "3")
		}
		if c.preset == "tiny-qwen3moe" { // its intermediate_size: the experts' × the used ones
			c.want = append(c.want, `"intermediate_size": 768,`)
		}
		if err := run(args); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(d, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		want := append(c.want, `"hidden_size": 128,`, `"num_hidden_layers": 2,`, `"num_attention_heads": 8,`)
		if c.preset != "tiny-qwen3moe" {
			want = append(want, `"intermediate_size": 256,`)
		}
		for _, want := range want {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s: config.json lacks %s", c.preset, want)
			}
		}
		if err := run(args); err == nil || !strings.Contains(err.Error(), "already holds a model") {
			t.Errorf("%s again without --force: %v", c.preset, err)
		}
		if err := run(append(args, "--force")); err != nil {
			t.Errorf("%s --force: %v", c.preset, err)
		}
	}
	for args, want := range map[string]string{
		"--preset nope -o x":      `unknown preset "nope"`,
		"--preset tiny-llama":     "-o: output folder required",
		"-o x --shard-size 3 TB":  `unexpected argument "TB"`,
		"-o x --shard-size 3XB":   `--shard-size: "3XB" is not a size`,
		"-preset tiny-llama -o x": `unknown shorthand flag: 'p'`,
	} {
		err := run(strings.Fields(args))
		if _, usage := err.(usageError); !usage || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want usage error with %q", args, err, want)
		}
	}
	for args, want := range map[string]string{ // specs the generator refuses
		"--experts-used 9":                    "experts: 8 experts, 9 used",
		"--arch LlamaForCausalLM --experts 4": "experts: LlamaForCausalLM has no experts",
	} {
		d := filepath.Join(t.TempDir(), "x")
		if err := run(append([]string{"--preset", "tiny-qwen3moe", "-o", d}, strings.Fields(args)...)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", args, err, want)
		}
	}
}
