// Package synth writes synthetic HuggingFace checkpoints (Llama, Mistral, Qwen2, Qwen3
// shapes) with deterministic bf16 weights, and a catalogue of malformed model folders, for
// tests. The same spec, options and seed always give the same bytes. Weights are generated
// while they are written, so even a 1.2 GB model needs little memory.
package synth

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gquant/gquant/formats/safetensors"
	"github.com/gquant/gquant/internal/atomicfile"
)

// Options control a generation run.
type Options struct {
	Seed         uint64 // weights depend on the seed and the tensor's name only
	TokenizerDir string // copy tokenizer.json (+ tokenizer_config.json, generation_config.json) from here; "" = stories260k's
	ShardSize    int64  // >0: split into model-0000N-of-0000M.safetensors of at most this many bytes (a larger tensor gets its own shard) and write the index
	Force        bool   // replace the model files of a folder that already holds a model
}

// Generate writes a synthetic model folder: config.json, the tokenizer files, and bf16
// weights in model.safetensors or in shards with model.safetensors.index.json. config.json
// is written last, so an interrupted run does not leave a folder that looks complete.
func Generate(dir string, spec Spec, opts Options) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	tok, err := loadTokenizer(opts.TokenizerDir)
	if err != nil {
		return err
	}
	vocab := spec.Vocab
	if vocab == 0 {
		vocab = tok.size
	}
	if vocab < tok.size {
		return fmt.Errorf("synth: spec: vocab: %d is smaller than the tokenizer's %d tokens", vocab, tok.size)
	}
	if err := prepareDir(dir, opts.Force); err != nil {
		return err
	}
	for name, b := range tok.files {
		if err := atomicfile.WriteFile(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	if err := writeWeights(dir, tensorList(spec, vocab), opts); err != nil {
		return err
	}
	cfg, err := configJSON(spec, vocab, tok)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "config.json"), cfg)
}

// prepareDir creates dir, refusing to write into a folder that holds a model unless force is
// set; then every file a run writes is removed (weights, index, config, tokenizer files), so
// that nothing of an earlier run survives: no stale shard, no tokenizer_config.json of another
// tokenizer.
func prepareDir(dir string, force bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", dir, unwrap(err))
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, f := range []string{"config.json", safetensors.IndexName} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			old = append(old, filepath.Join(dir, f))
		}
	}
	if len(old) == 0 {
		return nil
	}
	if !force {
		return fmt.Errorf("%s: already holds a model (%s): use Force (--force) to replace it", dir, filepath.Base(old[0]))
	}
	for _, f := range tokenizerFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			old = append(old, filepath.Join(dir, f))
		}
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("%s: %w", f, unwrap(err))
		}
	}
	return nil
}

// writeWeights writes the tensors, sharded when opts.ShardSize asks for it.
func writeWeights(dir string, tensors []tensorSpec, opts Options) error {
	shards := shard(tensors, opts.ShardSize)
	if len(shards) == 1 {
		return writeShard(filepath.Join(dir, "model.safetensors"), shards[0], opts.Seed)
	}
	weightMap := map[string]string{}
	var total int64
	for i, sh := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := writeShard(filepath.Join(dir, name), sh, opts.Seed); err != nil {
			return err
		}
		for _, t := range sh {
			weightMap[t.name] = name
			total += 2 * t.elements()
		}
	}
	index, err := marshal(map[string]any{
		"metadata":   map[string]any{"total_size": total},
		"weight_map": weightMap,
	})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, safetensors.IndexName), index)
}

// shard splits the tensors, in model order, as transformers does: a shard is closed when the
// next tensor would take it past max bytes. max <= 0 gives one shard.
func shard(tensors []tensorSpec, max int64) [][]tensorSpec {
	if max <= 0 {
		return [][]tensorSpec{tensors}
	}
	var out [][]tensorSpec
	var cur []tensorSpec
	var size int64
	for _, t := range tensors {
		b := 2 * t.elements()
		if len(cur) > 0 && size+b > max {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, t)
		size += b
	}
	return append(out, cur)
}

// writeShard streams one safetensors file of bf16 tensors.
func writeShard(path string, tensors []tensorSpec, seed uint64) error {
	nts := make([]safetensors.NamedTensor, len(tensors))
	for i, t := range tensors {
		nts[i] = safetensors.NamedTensor{Name: t.name, DType: safetensors.BF16, Shape: t.shape, Source: source(seed, t)}
	}
	return safetensors.WriteFile(path, nts, map[string]string{"format": "pt"})
}
