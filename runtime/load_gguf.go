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
	fam, spec, err := arch.SpecFromGGUFFile(f)
	if err != nil {
		return nil, err
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
		return rawTensor{name: name, typ: info.Type, shape: arch.HFShape(info.Shape), data: f.TensorData(i)}, true
	}
	src := &source{
		file: path, format: "gguf", ggufNames: true, family: fam, spec: spec, tok: tok, close: f.Close,
		tensor: func(t arch.Tensor) (rawTensor, bool, error) {
			if t.GGUFSrc == "" {
				rt, found := tensor(t.Ref.GGUFName())
				return rt, found, nil
			}
			// Cut from a fused tensor (Phi-3's attn_qkv): its rows, whole blocks of the type.
			rt, found := tensor(t.GGUFSrc)
			if !found {
				return rt, false, nil
			}
			if !sameShape(rt.shape, t.SrcShape) {
				return rt, true, fmt.Errorf("%s: shape %v, want %v", t.GGUFSrc, rt.shape, t.SrcShape)
			}
			rb := rt.typ.RowBytes(rt.shape[1])
			rt.name, rt.shape = t.Ref.GGUFName(), t.Shape
			rt.data = rt.data[t.SrcRow0*rb : (t.SrcRow0+t.Shape[0])*rb]
			return rt, true, nil
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
