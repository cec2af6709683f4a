package convert

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
)

// Inventory is everything the headers of a model folder say, read once: config, tokenizer,
// tensor listing. No weight bytes are read.
type Inventory struct {
	Dir     string
	Config  map[string]any
	Family  arch.Family
	Spec    *arch.Spec
	Tensors map[string]SourceTensor
	// TokenizerKVs is the tokenizer as llama.cpp metadata (tokenizer.ggml.*).
	TokenizerKVs []gguf.KV
	Tokenizer    *tokenizer.Tokenizer

	model *hf.Model
	// gg is the source when it is a GGUF file (model is nil then): its tensors are in GGUF
	// layout already, and its metadata is the output's (ggufMetadata).
	gg    *gguf.SplitFile
	names []string
}

// GGUFSource reports whether the model is a GGUF file (a requantization).
func (inv *Inventory) GGUFSource() bool { return inv.gg != nil }

// sourceName is the name of a model tensor in the source: its HF name, or for a GGUF source
// its GGUF name.
func (inv *Inventory) sourceName(t arch.Tensor) string {
	if inv.gg != nil {
		return t.Ref.GGUFName()
	}
	return t.HFName
}

// InventoryOptions are the choices that affect reading the folder.
type InventoryOptions struct {
	Pre string // tokenizer.ggml.pre override
}

// Open builds the inventory of a HuggingFace model folder, or of a GGUF file (one file or
// the first part of a split model) of F32, F16 or BF16 weights, as llama-quantize takes.
func Open(dir string, opts InventoryOptions) (*Inventory, error) {
	if fi, err := os.Stat(dir); err == nil && fi.Mode().IsRegular() {
		return openGGUF(dir, opts)
	}
	m, err := hf.Open(dir)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{Dir: dir, model: m, Config: m.Config.Raw, Tensors: map[string]SourceTensor{}}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	cfgPath := filepath.Join(dir, "config.json")
	archs := m.Config.Architectures
	if len(archs) == 0 {
		return nil, fmt.Errorf("%s: architectures: missing", cfgPath)
	}
	fam, err := arch.ForHF(archs[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %v", cfgPath, err)
	}
	spec, err := fam.SpecFromHF(m.Config.Raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", cfgPath, err)
	}
	if err := arch.CheckHF(spec, fam, m); err != nil {
		return nil, err
	}
	inv.Family, inv.Spec = fam, spec
	for _, t := range m.Checkpoint.Tensors() {
		inv.Tensors[t.Name] = SourceTensor{Name: t.Name, DType: string(t.DType), Shape: t.Shape, File: t.File}
		inv.names = append(inv.names, t.Name)
	}
	sort.Strings(inv.names)
	tok, err := tokenizer.Load(dir, tokenizer.Options{Pre: opts.Pre, VocabSize: spec.Vocab})
	if err != nil {
		return nil, err
	}
	kvs, err := tok.GGUFMetadata()
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > spec.Vocab {
		return nil, fmt.Errorf("%s: vocab_size: %d, but the tokenizer has %d tokens", cfgPath, spec.Vocab, tok.VocabSize())
	}
	inv.Tokenizer = tok
	for _, kv := range kvs {
		inv.TokenizerKVs = append(inv.TokenizerKVs, gguf.KV{Key: kv.Key, Value: kv.Value})
	}
	ok = true
	return inv, nil
}

// Names lists the source tensors, sorted.
func (inv *Inventory) Names() []string { return inv.names }

// WeightsDigest fingerprints the model's weights for its statistics (arch.WeightsDigest: the
// token embedding's dtype, shape and first bytes, which a BF16 GGUF of the weights shares
// with their safetensors).
func (inv *Inventory) WeightsDigest() string {
	if inv.gg != nil {
		return ggufDigest(inv)
	}
	return arch.WeightsDigest(inv.Spec, inv.model)
}

// Close releases the checkpoint mapping.
func (inv *Inventory) Close() error {
	if inv.gg != nil {
		return inv.gg.Close()
	}
	return inv.model.Close()
}

func (inv *Inventory) data(name string) ([]byte, string, string, error) {
	t, ok := inv.Tensors[name]
	if !ok {
		return nil, "", "", fmt.Errorf("%s: %s: no such tensor", inv.Dir, name)
	}
	if inv.gg != nil {
		i, _ := inv.gg.TensorIndex(name)
		return inv.gg.TensorData(i), t.DType, t.File, nil
	}
	b, err := inv.model.Checkpoint.Data(name)
	return b, t.DType, t.File, err
}

func (inv *Inventory) release(name string) {
	if inv.gg == nil {
		inv.model.Checkpoint.Release(name)
	}
}

// SourceFiles lists the files whose bytes determine the output (for provenance hashes).
func (inv *Inventory) SourceFiles() []string {
	if inv.gg != nil {
		var out []string
		for _, p := range inv.gg.Parts {
			out = append(out, p.Name)
		}
		return out
	}
	return inv.model.Checkpoint.Files()
}
