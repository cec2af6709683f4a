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
			info, found := ck.Lookup(t.HFName)
			if !found {
				return rawTensor{}, false, nil
			}
			var typ gguf.Type
			switch info.DType {
			case safetensors.BF16:
				typ = gguf.BF16
			case safetensors.F16:
				typ = gguf.F16
			case safetensors.F32:
				typ = gguf.F32
			default:
				return rawTensor{}, true, fmt.Errorf("%s: %s: dtype %s is not supported (want BF16, F16 or F32)", info.File, t.HFName, info.DType)
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
