package runtime

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
)

// openGGUF opens a GGUF model: one file, or the first part of a split model.
func openGGUF(path string) (*source, error) {
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
	get := func(key string) (any, bool) {
		kv, found := f.Get(key)
		return kv.Value, found
	}
	name, err := f.String("general.architecture")
	if err != nil {
		return nil, err
	}
	fam, err := arch.ForGGUF(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	spec, err := fam.SpecFromGGUF(get)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The metadata does not say whether the output is tied: llama.cpp falls back to
	// token_embd when output.weight is absent, and so do we.
	_, hasOutput := f.TensorIndex(string(arch.Output))
	spec.Tied = !hasOutput
	if spec.Vocab == 0 {
		if i, found := f.TensorIndex(string(arch.TokenEmbd)); found && len(f.Tensors[i].Shape) == 2 {
			spec.Vocab = int(f.Tensors[i].Shape[1])
		}
	}
	tok, err := tokenizer.FromGGUF(get)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tensor := func(name string) (rawTensor, bool) {
		i, found := f.TensorIndex(name)
		if !found {
			return rawTensor{}, false
		}
		info := f.Tensors[i]
		shape := make([]int, len(info.Shape))
		for j, d := range info.Shape { // ggml's ne order is the reverse of HF's
			shape[len(shape)-1-j] = int(d)
		}
		return rawTensor{name: name, typ: info.Type, shape: shape, data: f.TensorData(i)}, true
	}
	src := &source{
		file: path, format: "gguf", family: fam, spec: spec, tok: tok, close: f.Close,
		tensor: func(t arch.Tensor) (rawTensor, bool, error) {
			rt, found := tensor(t.Ref.GGUFName())
			return rt, found, nil
		},
	}
	if rt, found := tensor(string(arch.RopeFreqs)); found {
		if len(rt.shape) != 1 || rt.shape[0] != spec.HeadDim/2 {
			return nil, fmt.Errorf("%s: %s: shape %v, want [%d]", path, arch.RopeFreqs, rt.shape, spec.HeadDim/2)
		}
		if src.ropeFactors, err = decodeVector(rt); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	ok = true
	return src, nil
}
