// Command gquant-synth writes a synthetic HuggingFace checkpoint (config.json, tokenizer
// files, deterministic bf16 weights) for tests and benchmarks:
//
//	gquant-synth --preset tiny-qwen3 -o testdata/models/tiny-qwen3
//	gquant-synth --preset qwen3-0.6b -o /tmp/q06 --shard-size 500MB --tokenizer ~/Qwen3-0.6B
//
// Dimension flags override the preset. The same flags always give the same bytes. Flags are
// gquant's style (pflag, as cobra): --name, with -o short for --output.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/internal/size"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gquant-synth:", err)
		if _, usage := err.(usageError); usage {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks errors in the command line (exit code 2).
type usageError struct{ error }

// run parses the flags and generates the model.
func run(args []string) error {
	fs := pflag.NewFlagSet("gquant-synth", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: gquant-synth --preset NAME -o DIR [flags]\npresets: %s\n", strings.Join(synth.Presets(), ", "))
		fs.PrintDefaults()
	}
	preset := fs.String("preset", "tiny-llama", "model preset")
	out := fs.StringP("output", "o", "", "output folder (required)")
	tokDir := fs.String("tokenizer", "", "copy tokenizer.json (+ tokenizer_config.json, generation_config.json) from this folder (default: stories260k's)")
	seed := fs.Uint64("seed", 1, "random seed of the weights")
	shardSize := fs.String("shard-size", "0", "split weights into shards of at most this size (bytes, or with K/M/G (decimal) or KiB/MiB/GiB suffix); 0: one file")
	force := fs.Bool("force", false, "replace the model in an existing output folder (every file an earlier run wrote)")
	arch := fs.String("arch", "", "override: architecture class (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM)")
	hidden := fs.Int("hidden", 0, "override: hidden_size")
	inter := fs.Int("intermediate", 0, "override: intermediate_size (of each expert: Mixtral's intermediate_size, Qwen3-MoE's moe_intermediate_size)")
	layers := fs.Int("layers", 0, "override: num_hidden_layers")
	heads := fs.Int("heads", 0, "override: num_attention_heads")
	kvHeads := fs.Int("kv-heads", 0, "override: num_key_value_heads")
	headDim := fs.Int("head-dim", 0, "override: head_dim")
	vocab := fs.Int("vocab", 0, "override: vocab_size (default: the preset's, else the tokenizer's)")
	tied := fs.Bool("tied", false, "override: tie_word_embeddings")
	ropeTheta := fs.Float64("rope-theta", 0, "override: rope_theta")
	llama3Rope := fs.Bool("llama3-rope-scaling", false, "override: add (true) or remove (false) Llama 3 rope_scaling")
	experts := fs.Int("experts", 0, "override: the experts of every layer (MixtralForCausalLM, Qwen3MoeForCausalLM)")
	expertsUsed := fs.Int("experts-used", 0, "override: num_experts_per_tok, the experts each token goes through")
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return nil
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if *out == "" {
		return usageError{fmt.Errorf("-o: output folder required")}
	}
	spec, err := synth.Preset(*preset)
	if err != nil {
		return usageError{err}
	}
	shard, err := size.Parse(*shardSize)
	if err != nil {
		return usageError{fmt.Errorf("--shard-size: %v", err)}
	}

	// Apply only the overrides given on the command line.
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "arch":
			spec.Arch = *arch
		case "hidden":
			spec.Hidden = *hidden
		case "intermediate":
			spec.Intermediate = *inter
		case "layers":
			spec.Layers = *layers
		case "heads":
			spec.Heads = *heads
		case "kv-heads":
			spec.KVHeads = *kvHeads
		case "head-dim":
			spec.HeadDim = *headDim
		case "vocab":
			spec.Vocab = *vocab
		case "tied":
			spec.Tied = *tied
		case "rope-theta":
			spec.RopeTheta = *ropeTheta
		case "experts":
			spec.Experts = *experts
		case "experts-used":
			spec.ExpertsUsed = *expertsUsed
		case "llama3-rope-scaling":
			spec.RopeScaling = nil
			if *llama3Rope {
				spec.RopeScaling = synth.Llama3Scaling()
			}
		}
	})
	opts := synth.Options{Seed: *seed, TokenizerDir: *tokDir, ShardSize: shard, Force: *force}
	return synth.Generate(*out, spec, opts)
}
