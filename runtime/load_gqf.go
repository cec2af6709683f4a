package runtime

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
)

// loadGQF loads a gqf file. Float tensors (F32, F16, BF16) are used from the mapping;
// quantized ones (int8 per-channel, int4 LPBQ, ...) are decoded to float32 at load with the
// file's own decoding rules. Every activation encoding of the file's graph is placed on a
// point of the model's graph (placeEncodings) and applied as the point is produced — the
// simulation of the NPU's static activation quantization — before any hook of opts sees it.
// When the manifest quantizes linear layer inputs at run time (w4a8: int8 per token), the
// inputs of every linear layer are quantized that way.
func loadGQF(path string, opts Options) (*Model, error) {
	src, encs, bpw, err := openGQF(path)
	if err != nil {
		return nil, err
	}
	quant, placed, err := placeEncodings(src.spec, encs)
	if err != nil {
		src.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := build(src, opts, quant)
	if err != nil {
		src.close()
		return nil, err
	}
	m.bpwAll, m.bpwLinear = bpw[0], bpw[1]
	m.encPlaced, m.encTotal = placed, len(encs)
	return m, nil
}

// placeEncodings maps a gqf graph's activation encodings (by activation name) to the points
// of the model's graph: an activation is a point, or a data-movement tensor of one
// (arch.Lowered.Point), and all the activations of a point must carry the same encoding.
// It refuses, naming them, encodings it cannot place. placed counts the activations placed.
func placeEncodings(spec *arch.Spec, encs map[string]*gqf.Encoding) (map[string]*qdq, int, error) {
	if len(encs) == 0 {
		return nil, 0, nil
	}
	low, err := arch.ModelGraph(spec).Lower(1)
	if err != nil {
		return nil, 0, err
	}
	quant := map[string]*qdq{}
	from := map[string]string{}
	var unknown, conflict []string
	names := make([]string, 0, len(encs))
	for name := range encs {
		names = append(names, name)
	}
	sort.Strings(names)
	placed := 0
	for _, name := range names {
		e := encs[name]
		pt, ok := low.Point[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		if q := quant[pt]; q != nil {
			if !proto.Equal(q.e, e) {
				conflict = append(conflict, fmt.Sprintf("%s and %s", from[pt], name))
			}
			placed++
			continue
		}
		quant[pt], from[pt] = &qdq{e: e}, name
		placed++
	}
	var probs []string
	if len(unknown) > 0 {
		probs = append(probs, fmt.Sprintf("graph: %d activation encodings name no tensor of the %s graph: %s", len(unknown), spec.Family, strings.Join(firstN(unknown, 5), ", ")))
	}
	if len(conflict) > 0 {
		probs = append(probs, fmt.Sprintf("graph: %d data-movement tensors carry another encoding than the tensor they move (the runtime cannot requantize them): %s", len(conflict), strings.Join(firstN(conflict, 5), "; ")))
	}
	if len(probs) > 0 {
		return nil, 0, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return quant, placed, nil
}

// firstN keeps the first n strings of s and counts the rest.
func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string(nil), s[:n]...), fmt.Sprintf("and %d more", len(s)-n))
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

// openGQF opens a gqf file as a source (with its run-time encoding of linear inputs, if any)
// and returns its activation encodings by name and its stored bits per weight (all, linear).
func openGQF(path string) (*source, map[string]*gqf.Encoding, [2]float64, error) {
	f, err := gqf.Open(path)
	if err != nil {
		return nil, nil, [2]float64{}, err
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
		return nil, nil, [2]float64{}, fmt.Errorf("%s: config: %w", path, err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(man.Config.GetConfigJson(), &cfg); err != nil {
		return nil, nil, [2]float64{}, fmt.Errorf("%s: config: %v", path, err)
	}
	spec, err := fam.SpecFromHF(cfg)
	if err != nil {
		return nil, nil, [2]float64{}, fmt.Errorf("%s: config: %w", path, err)
	}
	tok, err := tokenizer.FromGGUF(man.Tokenizer.Getter())
	if err != nil {
		return nil, nil, [2]float64{}, fmt.Errorf("%s: tokenizer: %w", path, err)
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
	src.dyn = man.LinearInputs
	ok = true
	all, linear := storedBPW(man)
	return src, encs, [2]float64{all, linear}, nil
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
