package convert

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/runtime/arch"
)

// quantizationVersion is ggml's GGML_QNT_VERSION, written as general.quantization_version.
const quantizationVersion = 2

// Metadata assembles every GGUF key of the output: the model's hyperparameters, general.*
// (type, name, basename, size_label and, from the model card, license, as convert_hf_to_gguf.py
// writes them; file_type, quantization_version) and the tokenizer (padded by package tokenizer to the model's vocabulary size, as
// convert_hf_to_gguf.py does); for a GGUF source, its own keys (ggufMetadata).
func Metadata(inv *Inventory, p *Plan, name string) ([]gguf.KV, error) {
	if inv.gg != nil {
		return ggufMetadata(inv, p, name), nil
	}
	base := filepath.Base(filepath.Clean(inv.Dir))
	if name == "" {
		name = base
	}
	kvs := arch.GGUFMetadata(inv.Spec)
	kvs = append(kvs,
		gguf.KV{Key: "general.type", Value: "model"},
		gguf.KV{Key: "general.name", Value: name},
		gguf.KV{Key: "general.basename", Value: base}, // the folder's, as convert_hf_to_gguf.py's model id; --name sets general.name only
		gguf.KV{Key: "general.size_label", Value: p.sizeLabel()},
	)
	if lic := hf.ModelCardLicense(inv.Dir); lic != "" {
		kvs = append(kvs, gguf.KV{Key: "general.license", Value: lic})
	}
	kvs = append(kvs,
		gguf.KV{Key: "general.file_type", Value: p.FileType},
		gguf.KV{Key: "general.quantization_version", Value: uint32(quantizationVersion)},
	)
	kvs = append(kvs, inv.TokenizerKVs...)
	return kvs, nil
}

// SizeLabel is convert_hf_to_gguf.py's general.size_label of a dense model of n parameters
// (gguf-py's model_weight_count_rounded_notation with two digits): 3.4M, 15M, 596M, 8.0B.
func SizeLabel(n uint64) string {
	x, suffix := float64(n)*1e-3, "K"
	switch {
	case n > 1e12:
		x, suffix = float64(n)*1e-12, "T"
	case n > 1e9:
		x, suffix = float64(n)*1e-9, "B"
	case n > 1e6:
		x, suffix = float64(n)*1e-6, "M"
	}
	digits := len(strings.TrimLeft(strconv.FormatFloat(math.RoundToEven(x), 'f', 0, 64), "0"))
	return strconv.FormatFloat(x, 'f', max(2-digits, 0), 64) + suffix
}

// sizeLabel is the plan's general.size_label: SizeLabel of its parameters, or for a mixture of
// experts gguf-py's "EXPERTSxSIZE" (get_total_parameter_count, size_label): the parameters of
// every tensor but the stacks of experts, plus one expert's of each stack.
func (p *Plan) sizeLabel() string {
	var shared, expert, expertSum, stacks uint64
	for _, t := range p.Tensors {
		if !t.weight {
			continue
		}
		n := gguf.ElementCount(t.Shape)
		if len(t.Shape) >= 3 && strings.Contains(t.Name, "_exps.") {
			e := t.Shape[len(t.Shape)-1] // numpy's shape[-3]: the experts
			expert += n / e
			expertSum += e
			stacks++
			continue
		}
		shared += n
	}
	if stacks == 0 {
		return SizeLabel(p.Params)
	}
	return strconv.FormatUint(expertSum/stacks, 10) + "x" + SizeLabel(shared+expert)
}

// Header builds the GGUF header of a plan.
func Header(p *Plan, kvs []gguf.KV) *gguf.Header {
	h := &gguf.Header{KVs: kvs}
	for _, t := range p.Tensors {
		h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: t.Name, Type: t.typ, Shape: t.Shape})
	}
	return h
}
