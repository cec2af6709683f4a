package runtime

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/safetensors"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
)

// openHF opens a HuggingFace model folder. Weights stay in the mapped safetensors files in
// their own dtype (BF16, F16 or F32).
func openHF(dir string) (*source, error) {
	m, err := hf.Open(dir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	fam, err := arch.ForHF(m.Config.Architectures[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Config.Path(), err)
	}
	spec, err := fam.SpecFromHF(m.Config.Raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Config.Path(), err)
	}
	if err := arch.CheckHF(spec, fam, m); err != nil {
		return nil, err
	}
	ck := m.Checkpoint
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		return nil, err
	}
	src := &source{
		file: dir, format: "hf", family: fam, spec: spec, tok: tok,
		close: m.Close,
		tensor: func(t arch.Tensor) (rawTensor, bool, error) {
			if t.Parts != nil {
				return stackHF(ck, t)
			}
			info, found := ck.Lookup(t.HFName)
			if !found {
				return rawTensor{}, false, nil
			}
			typ, err := hfType(info, t.HFName)
			if err != nil {
				return rawTensor{}, true, err
			}
			data, err := ck.Data(t.HFName)
			if err != nil {
				return rawTensor{}, true, err
			}
			rt := rawTensor{name: t.Ref.GGUFName(), typ: typ, shape: info.Shape, data: data, offset: t.Offset}
			if t.SrcShape != nil { // cut from a fused tensor: its rows [SrcRow0, SrcRow0+Shape[0])
				if !sameShape(info.Shape, t.SrcShape) {
					return rawTensor{}, true, fmt.Errorf("%s: %s: shape %v, want %v", info.File, t.HFName, info.Shape, t.SrcShape)
				}
				rowBytes := len(data) / t.SrcShape[0]
				rt.shape = t.Shape
				rt.data = data[t.SrcRow0*rowBytes : (t.SrcRow0+t.Shape[0])*rowBytes]
			}
			return rt, true, nil
		},
	}
	ok = true
	return src, nil
}

// hfType is the ggml type of a checkpoint tensor's dtype (BF16, F16 or F32).
func hfType(info safetensors.TensorInfo, name string) (gguf.Type, error) {
	switch info.DType {
	case safetensors.BF16:
		return gguf.BF16, nil
	case safetensors.F16:
		return gguf.F16, nil
	case safetensors.F32:
		return gguf.F32, nil
	}
	return 0, fmt.Errorf("%s: %s: dtype %s is not supported (want BF16, F16 or F32)", info.File, name, info.DType)
}

// stackHF is a stack of expert matrices from its parts, one checkpoint tensor per expert, all
// of one dtype and of the shape of one expert's matrix; found is false when the first part
// is absent (a missing later part is an error naming it).
func stackHF(ck *safetensors.Checkpoint, t arch.Tensor) (rawTensor, bool, error) {
	rt := rawTensor{name: t.Ref.GGUFName(), shape: t.Shape, parts: make([][]byte, len(t.Parts))}
	for e, name := range t.Parts {
		info, found := ck.Lookup(name)
		if !found {
			if e == 0 {
				return rawTensor{}, false, nil
			}
			return rawTensor{}, true, fmt.Errorf("%s: missing (expert %d of %s)", name, e, rt.name)
		}
		typ, err := hfType(info, name)
		if err != nil {
			return rawTensor{}, true, err
		}
		if e == 0 {
			rt.typ = typ
		} else if typ != rt.typ {
			return rawTensor{}, true, fmt.Errorf("%s: %s: dtype %s, but expert 0 of %s is %s", info.File, name, info.DType, rt.name, rt.typ)
		}
		if !sameShape(info.Shape, t.Shape[1:]) {
			return rawTensor{}, true, fmt.Errorf("%s: %s: shape %v, want %v", info.File, name, info.Shape, t.Shape[1:])
		}
		if rt.parts[e], err = ck.Data(name); err != nil {
			return rawTensor{}, true, err
		}
	}
	return rt, true, nil
}
