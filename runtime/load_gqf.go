package runtime

import (
	"encoding/json"
	"fmt"
	"unsafe"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
)

// loadGQF loads a gqf file. Float tensors (F32, F16, BF16) are used from the mapping;
// quantized ones (int8 per-channel, int4 LPBQ, ...) are decoded to float32 at load with the
// file's own decoding rules. When the graph's activations have encodings (w8a16, w4a16,
// w4a8), every activation the runtime names (see ActivationNames) that has one is quantized
// and dequantized in place as it is produced — the W8A16 simulation — before any hook of
// opts sees it. When the manifest quantizes linear layer inputs at run time (w4a8: int8 per
// token), the inputs of every linear layer are then quantized and dequantized per token.
func loadGQF(path string, opts Options) (*Model, error) {
	src, encs, dyn, bpw, err := openGQF(path)
	if err != nil {
		return nil, err
	}
	if len(encs) > 0 || dyn != nil {
		opts.Hooks = simulateActivations(encs, dyn, linearInputNames(src.spec), opts.Hooks)
	}
	m, err := build(src, opts)
	if err != nil {
		src.close()
		return nil, err
	}
	// The weights are decoded to float32 in memory; report what the file stores.
	m.bpwAll, m.bpwLinear = bpw[0], bpw[1]
	return m, nil
}

// storedBPW is the storage cost of a gqf file's weights (codes, scales, zero points and block
// scales; graph constants excluded), over every weight and over the linear layers only.
func storedBPW(man *gqf.Manifest) (all, linear float64) {
	var bits, n, linBits, linN float64
	size := func(b *gqf.Buffer) float64 { return float64(b.GetSize()) }
	for _, t := range man.GetTensors() {
		if t.GetRole() == "constant" {
			continue
		}
		e := 1.0
		for _, d := range t.GetShape() {
			e *= float64(d)
		}
		b := 8 * (size(t.GetData()) + size(t.GetScales()) + size(t.GetZeros()) + size(t.GetBlockScales()))
		bits, n = bits+b, n+e
		if arch.Role(t.GetRole()).IsLinear() {
			linBits, linN = linBits+b, linN+e
		}
	}
	if n > 0 {
		all = bits / n
	}
	if linN > 0 {
		linear = linBits / linN
	}
	return all, linear
}

// openGQF opens a gqf file as a source and returns its activation encodings by name, its
// run-time encoding of linear inputs (nil when none) and its stored bits per weight (all,
// linear).
func openGQF(path string) (*source, map[string]*gqf.Encoding, *gqf.Encoding, [2]float64, error) {
	f, err := gqf.Open(path)
	if err != nil {
		return nil, nil, nil, [2]float64{}, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	man := f.Manifest
	fam, err := arch.ForHF(man.Config.GetHfArchitecture())
	if err != nil {
		return nil, nil, nil, [2]float64{}, fmt.Errorf("%s: config: %w", path, err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(man.Config.GetConfigJson(), &cfg); err != nil {
		return nil, nil, nil, [2]float64{}, fmt.Errorf("%s: config: %v", path, err)
	}
	spec, err := fam.SpecFromHF(cfg)
	if err != nil {
		return nil, nil, nil, [2]float64{}, fmt.Errorf("%s: config: %w", path, err)
	}
	tok, err := tokenizer.FromGGUF(man.Tokenizer.Getter())
	if err != nil {
		return nil, nil, nil, [2]float64{}, fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	encs := map[string]*gqf.Encoding{}
	if g := man.Graph; g != nil {
		for _, a := range g.Activations {
			if a.Encoding != nil {
				encs[a.Name] = a.Encoding
			}
		}
	}
	src := &source{
		file: path, format: "hf", family: fam, spec: spec, tok: tok, close: f.Close,
		tensor: func(t arch.Tensor) (rawTensor, bool, error) {
			gt, found := f.Tensor(t.Ref.GGUFName())
			if !found {
				return rawTensor{}, false, nil
			}
			rt, err := gqfRaw(f, gt)
			if err != nil {
				return rawTensor{}, true, fmt.Errorf("%s: %w", path, err)
			}
			return rt, true, nil
		},
	}
	ok = true
	all, linear := storedBPW(man)
	return src, encs, man.LinearInputs, [2]float64{all, linear}, nil
}

// gqfRaw turns a gqf tensor into the runtime's stored-tensor view: float data as they are,
// quantized data decoded to float32.
func gqfRaw(f *gqf.File, t *gqf.Tensor) (rawTensor, error) {
	shape := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int(d)
	}
	rt := rawTensor{name: t.Name, shape: shape}
	if e := t.Encoding; e.Granularity == gqf.Granularity_FLOAT {
		switch e.Dtype {
		case gqf.DataType_F32:
			rt.typ = gguf.F32
		case gqf.DataType_F16:
			rt.typ = gguf.F16
		case gqf.DataType_BF16:
			rt.typ = gguf.BF16
		default:
			return rt, fmt.Errorf("%s: dtype %v is not a weight type", t.Name, e.Dtype)
		}
		rt.data = f.Bytes(t.Data)
		return rt, nil
	}
	vals, err := f.Decode(t)
	if err != nil {
		return rt, err
	}
	rt.typ = gguf.F32
	if len(vals) > 0 {
		rt.data = unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))
	}
	return rt, nil
}

// linearInputNames are the activations (ActivationNames) that are the inputs of linear
// layers: attn_norm (q, k, v), kqv_out (attn_output), ffn_norm (gate, up), ffn_act (down)
// and output_norm (output).
func linearInputNames(spec *arch.Spec) map[string]bool {
	names := map[string]bool{"output_norm": true}
	for l := 0; l < spec.Layers; l++ {
		for _, s := range []string{"attn_norm", "kqv_out", "ffn_norm", "ffn_act"} {
			names[fmt.Sprintf("blk.%d.%s", l, s)] = true
		}
	}
	return names
}

// simulateActivations returns hooks that quantize and dequantize each named activation with
// its static encoding, then, with a dynamic encoding dyn, each linear input (named in
// linear) per token, then call the user's hooks.
func simulateActivations(encs map[string]*gqf.Encoding, dyn *gqf.Encoding, linear map[string]bool, user *Hooks) *Hooks {
	h := &Hooks{}
	if user != nil {
		h.LinearInput = user.LinearInput
	}
	h.Activation = func(name string, x []float32, n, dim int) {
		if e, ok := encs[name]; ok {
			gqf.QDQ(e, x)
		}
		if dyn != nil && linear[name] {
			gqf.QDQRows(dyn, x, dim)
		}
		if user != nil && user.Activation != nil {
			user.Activation(name, x, n, dim)
		}
	}
	return h
}
