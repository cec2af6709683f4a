package convert

import (
	"path/filepath"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/runtime/arch"
)

// quantizationVersion is ggml's GGML_QNT_VERSION, written as general.quantization_version.
const quantizationVersion = 2

// Metadata assembles every GGUF key of the output: the model's hyperparameters, general.*
// and the tokenizer (padded by package tokenizer to the model's vocabulary size, as
// convert_hf_to_gguf.py does); for a GGUF source, its own keys (ggufMetadata).
func Metadata(inv *Inventory, p *Plan, name string) ([]gguf.KV, error) {
	if inv.gg != nil {
		return ggufMetadata(inv, p, name), nil
	}
	if name == "" {
		name = filepath.Base(filepath.Clean(inv.Dir))
	}
	kvs := arch.GGUFMetadata(inv.Spec)
	kvs = append(kvs,
		gguf.KV{Key: "general.name", Value: name},
		gguf.KV{Key: "general.file_type", Value: p.FileType},
		gguf.KV{Key: "general.quantization_version", Value: uint32(quantizationVersion)},
	)
	kvs = append(kvs, inv.TokenizerKVs...)
	return kvs, nil
}

// Header builds the GGUF header of a plan.
func Header(p *Plan, kvs []gguf.KV) *gguf.Header {
	h := &gguf.Header{KVs: kvs}
	for _, t := range p.Tensors {
		h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: t.Name, Type: t.typ, Shape: t.Shape})
	}
	return h
}
