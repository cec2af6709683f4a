package convert

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/half"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
)

// A GGUF source: requantization, as llama-quantize does it. The tensors are read in GGUF
// layout (no transform: llama's Q/K rows are already in llama.cpp's order), every metadata
// key is carried over (ggufMetadata), and only float weights are taken.

// ggufSourceTypes are the tensor types a GGUF source may hold, with the dtype names readRows
// reads.
var ggufSourceTypes = map[gguf.Type]string{gguf.F32: "F32", gguf.F16: "F16", gguf.BF16: "BF16"}

func openGGUF(path string, opts InventoryOptions) (*Inventory, error) {
	f, err := gguf.OpenSplit(path)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	fam, spec, err := arch.SpecFromGGUFFile(f)
	if err != nil {
		return nil, err
	}
	if spec.FusedQKV {
		return nil, fmt.Errorf("%s: blk.0.attn_qkv.weight: a phi3 GGUF with fused q, k and v is not requantized (gquant writes attn_q/k/v: convert the HuggingFace folder)", path)
	}
	inv := &Inventory{Dir: path, gg: f, Family: fam, Spec: spec, Tensors: map[string]SourceTensor{}}
	generated := map[string]bool{}
	for _, t := range fam.Tensors(spec) {
		if t.Generated {
			generated[t.Ref.GGUFName()] = true
		}
	}
	var quantized []string
	for _, t := range f.Tensors {
		if generated[t.Name] {
			// rope_freqs: the plan computes it from the metadata, as the HF path does.
			continue
		}
		dt, ok := ggufSourceTypes[t.Type]
		if !ok {
			quantized = append(quantized, fmt.Sprintf("%s (%s)", t.Name, t.Type))
		}
		inv.Tensors[t.Name] = SourceTensor{Name: t.Name, DType: dt, Shape: arch.HFShape(t.Shape), File: f.Parts[t.Part].Name}
		inv.names = append(inv.names, t.Name)
	}
	if len(quantized) > 0 {
		sort.Strings(quantized)
		return nil, fmt.Errorf("%s: %d tensors are not F32, F16 or BF16: %s: requantizing quantized weights loses precision twice (convert the F16/BF16 GGUF or the HF folder)",
			path, len(quantized), strings.Join(quantized[:min(5, len(quantized))], ", "))
	}
	sort.Strings(inv.names)
	get := func(key string) (any, bool) {
		kv, found := f.Get(key)
		return kv.Value, found
	}
	if inv.Tokenizer, err = tokenizer.FromGGUF(get); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if opts.Pre != "" {
		return nil, fmt.Errorf("%s: --pre: a GGUF source keeps its tokenizer.ggml.pre (%q)", path, mustString(f, "tokenizer.ggml.pre"))
	}
	ok = true
	return inv, nil
}

func mustString(f *gguf.SplitFile, key string) string {
	s, _ := f.String(key)
	return s
}

// ggufMetadata is the output's metadata for a GGUF source, as llama-quantize writes it: every
// key of the source in its order (split.* left out), general.file_type and
// general.quantization_version set in place (appended when absent), general.name replaced
// when name is given.
func ggufMetadata(inv *Inventory, p *Plan, name string) []gguf.KV {
	var kvs []gguf.KV
	set := map[string]any{"general.file_type": p.FileType, "general.quantization_version": uint32(quantizationVersion)}
	if name != "" {
		set["general.name"] = name
	}
	done := map[string]bool{}
	for _, kv := range inv.gg.KVs {
		if strings.HasPrefix(kv.Key, "split.") {
			continue
		}
		if v, ok := set[kv.Key]; ok {
			kv.Value, done[kv.Key] = v, true
		}
		kvs = append(kvs, kv)
	}
	for _, k := range []string{"general.name", "general.file_type", "general.quantization_version"} {
		if v, ok := set[k]; ok && !done[k] {
			kvs = append(kvs, gguf.KV{Key: k, Value: v})
		}
	}
	return kvs
}

// ggufDigest is arch.WeightsDigest of a GGUF source's token embedding. An F32 or F16 file
// whose leading values are all exactly bf16 (a file made from bf16 weights) is fingerprinted
// as those bf16 values, so that the statistics of the bf16 checkpoint apply to it.
func ggufDigest(inv *Inventory) string {
	name := string(arch.TokenEmbd)
	t, ok := inv.Tensors[name]
	if !ok {
		return ""
	}
	data, _, _, err := inv.data(name)
	if err != nil {
		return ""
	}
	if t.DType == "F32" || t.DType == "F16" {
		esz := 4
		if t.DType == "F16" {
			esz = 2
		}
		n := min(len(data)/esz, 32<<10) // the values of 64 KiB of bf16
		b := make([]byte, 2*n)
		exact := true
		for i := 0; i < n && exact; i++ {
			var u uint32
			if esz == 4 {
				u = binary.LittleEndian.Uint32(data[4*i:])
			} else {
				u = math.Float32bits(half.F16ToF32(binary.LittleEndian.Uint16(data[2*i:])))
			}
			exact = u&0xffff == 0
			binary.LittleEndian.PutUint16(b[2*i:], uint16(u>>16))
		}
		if exact {
			return arch.TensorDigest("BF16", t.Shape, b)
		}
	}
	return arch.TensorDigest(t.DType, t.Shape, data)
}
