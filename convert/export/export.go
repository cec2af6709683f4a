// Package export turns a gqf file into what Qualcomm's and ONNX Runtime's tools take, in
// standard ONNX ops (opset 21; RmsNorm written out as Pow, ReduceMean, Add, Sqrt, Reciprocal
// and Mul), float or QDQ (QuantizeLinear/DequantizeLinear around every activation, quantized
// weights as integer codes behind DequantizeLinear):
//
//   - ONNX: the file's own graph, input_ids (int64 [batch, max_len]) → logits (float32
//     [batch, max_len, vocab]), no KV cache. Positions are causal, so a shorter prompt can be
//     padded at the end and the logits of its own positions read. Weights over 1 GiB go to an
//     external data file.
//   - WriteKV: the deployment graphs over a KV cache (runtime/arch's LowerKV; prompt and
//     token, optionally in parts), weights in external data, metadata.json (kv.go).
//   - AIMET encodings JSON keyed by the tensor names of either.
//
// Node outputs keep the graph's activation names; weights keep their gqf names (a
// FullyConnected weight is stored transposed, [in, out], for MatMul; a tied output weight is
// a second initializer, output.weight).
package export

import (
	"fmt"
	"io"
	"math"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/onnx"
	"github.com/gquant/gquant/runtime/arch"
)

// Options tune the ONNX export.
type Options struct {
	// QDQ writes the quantized form: every activation through QuantizeLinear and
	// DequantizeLinear with its encoding, quantized weights through DequantizeLinear from
	// their integer codes, float parameters as uint16 per-tensor codes. The file's
	// activations must have encodings.
	QDQ bool
	// Version is the producer version recorded in the model.
	Version string
}

// usage is how a node reads a stored tensor.
type usage int

const (
	useOther  usage = iota // as it is stored
	useFC                  // FullyConnected weight: transposed to [in, out] for MatMul
	useGather              // Gather table
)

// param is one initializer of the exported model: a gqf tensor, or a constant of the
// exported graph's lowering (c).
type param struct {
	name string
	t    *gqf.Tensor
	c    *arch.Const
	use  usage
}

// key is the name the graph's nodes read the parameter by.
func (p param) key() string {
	if p.c != nil {
		return p.c.Name
	}
	return p.t.Name
}

// exporter builds the ONNX graph and the matching encodings.
type exporter struct {
	f      *gqf.File
	qdq    bool
	g      *onnx.GraphProto
	enc    *encodings.File
	params map[string]map[usage]string // tensor name → usage → initializer name
	acts   map[string]*gqf.Value
	// src is the graph translated: the file's own, or its deployment form.
	src *source
	// ext, when set, takes the data of large initializers into an external data file.
	ext *onnx.External
}

// source is a graph to export: the gqf file's own graph (its constants stored in the file,
// a symbolic batch dimension), or a deployment form from runtime/arch's LowerKV (constants
// from the lowering, every activation with its point's encoding, static shapes).
type source struct {
	g      *gqf.Graph
	consts map[string]arch.Const
	static bool
}

// stored returns the gqf tensor a node input names, if it is a stored tensor of the source:
// the weights, and, for the file's own graph, its constants.
func (e *exporter) stored(name string) (*gqf.Tensor, bool) {
	t, ok := e.f.Tensor(name)
	if !ok || (e.src.consts != nil && t.Role == "constant") {
		return nil, false
	}
	return t, true
}

// addInit adds an initializer, its data moved to the external data file when there is one.
func (e *exporter) addInit(ts ...*onnx.TensorProto) error {
	for _, t := range ts {
		if e.ext != nil {
			if err := e.ext.Place(t); err != nil {
				return err
			}
		}
		e.g.Initializer = append(e.g.Initializer, t)
	}
	return nil
}

// ONNX exports the decoder of f as an ONNX model.
func ONNX(f *gqf.File, o Options) (*onnx.ModelProto, error) {
	e, err := run(f, o.QDQ, nil, nil)
	if err != nil {
		return nil, err
	}
	m := onnx.NewModel(e.g, o.Version)
	return m, nil
}

// AIMET returns the encodings of f as an AIMET encodings file keyed by the tensor names of
// the float ONNX export: an entry for every activation (node output) and every float
// initializer.
func AIMET(f *gqf.File) (*encodings.File, error) {
	e, err := run(f, false, nil, onnx.NewExternal(io.Discard, "-")) // the weights' data is not kept
	if err != nil {
		return nil, err
	}
	return e.enc, nil
}

// run builds the export of src (nil: the file's own graph), the data of large initializers
// going to ext when it is not nil.
func run(f *gqf.File, qdq bool, src *source, ext *onnx.External) (*exporter, error) {
	if src == nil {
		if f.Manifest.Graph == nil {
			return nil, fmt.Errorf("%s: graph: missing", f.Path)
		}
		src = &source{g: f.Manifest.Graph}
	}
	g := src.g
	e := &exporter{f: f, qdq: qdq, g: &onnx.GraphProto{}, enc: &encodings.File{Version: encodings.V1},
		params: map[string]map[usage]string{}, acts: map[string]*gqf.Value{}, src: src, ext: ext}
	quantized := false
	for _, a := range g.Activations {
		e.acts[a.Name] = a
		quantized = quantized || a.Encoding != nil
	}
	if qdq && !quantized {
		return nil, fmt.Errorf("%s: scheme %s has float activations: there is no QDQ form (export the float model)", f.Path, f.Manifest.Scheme)
	}
	name := g.Name
	if name == "" {
		name = "decoder"
	}
	e.g.Name = &name
	if err := e.initializers(g); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	dims := func(shape []int64) []any {
		var out []any
		for i, d := range shape {
			if i == 0 && !src.static {
				out = append(out, "batch")
				continue
			}
			out = append(out, d)
		}
		return out
	}
	for _, in := range g.Inputs {
		e.g.Input = append(e.g.Input, onnx.ValueInfo(in.Name, onnxType(in.Dtype), dims(in.Shape)...))
		if in.Encoding != nil && qdq {
			e.acts[in.Name] = in
			if err := e.qdqPair(in.Name, in.Name, in.Name+".dq", in.Encoding); err != nil {
				return nil, fmt.Errorf("%s: graph: input %s: %w", f.Path, in.Name, err)
			}
		}
	}
	for _, nd := range g.Nodes {
		if err := e.node(nd); err != nil {
			return nil, fmt.Errorf("%s: graph: node %s: %w", f.Path, nd.Name, err)
		}
	}
	for _, out := range g.Outputs {
		a := e.acts[out]
		e.g.Output = append(e.g.Output, onnx.ValueInfo(out, onnx.TensorProto_FLOAT, dims(a.Shape)...))
	}
	for _, in := range g.Inputs {
		if in.Dtype == gqf.DataType_F32 {
			e.enc.Activations = append(e.enc.Activations, aimetActivation(in))
		}
	}
	for _, a := range g.Activations {
		e.enc.Activations = append(e.enc.Activations, aimetActivation(a))
	}
	e.enc.QuantizerArgs = quantizerArgs(f.Manifest)
	return e, nil
}

func onnxType(t gqf.DataType) onnx.TensorProto_DataType {
	switch t {
	case gqf.DataType_INT64:
		return onnx.TensorProto_INT64
	case gqf.DataType_INT32:
		return onnx.TensorProto_INT32
	}
	return onnx.TensorProto_FLOAT
}

// initializers emits one initializer (and, in QDQ form, its DequantizeLinear) per stored
// tensor or constant and way of use, in the order the nodes first read them.
func (e *exporter) initializers(g *gqf.Graph) error {
	taken := map[string]bool{}
	for _, t := range e.f.Manifest.Tensors {
		taken[t.Name] = true
	}
	var list []param
	seen := map[string]map[usage]bool{}
	for _, nd := range g.Nodes {
		for i, in := range nd.Inputs {
			p := param{name: in}
			if t, ok := e.stored(in); ok {
				p.t = t
			} else if c, ok := e.src.consts[in]; ok {
				p.c = &c
			} else {
				continue
			}
			switch {
			case nd.Op == "FullyConnected" && i == 1:
				p.use = useFC
			case nd.Op == "Gather" && i == 0:
				p.use = useGather
			}
			if seen[in] == nil {
				seen[in] = map[usage]bool{}
			}
			if seen[in][p.use] {
				continue
			}
			seen[in][p.use] = true
			list = append(list, p)
		}
	}
	// A tensor read two ways (the tied embedding: Gather table and output weight) gets a
	// second initializer for the second way.
	for i, p := range list {
		if len(seen[p.key()]) > 1 && p.use == useFC {
			name := "output.weight"
			if taken[name] {
				name = p.key() + ".fc"
			}
			taken[name] = true
			list[i].name = name
		}
	}
	for _, p := range list {
		k := p.key()
		if e.params[k] == nil {
			e.params[k] = map[usage]string{}
		}
		e.params[k][p.use] = p.name
		if err := e.param(p); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// param emits one initializer.
func (e *exporter) param(p param) error {
	if c := p.c; c != nil {
		if c.I != nil {
			return e.addInit(onnx.Int64Tensor(p.name, c.Shape, c.I))
		}
		return e.floatParam(p.name, c.Shape, c.F)
	}
	t, enc := p.t, p.t.Encoding
	dims := append([]int64(nil), t.Shape...)
	if enc.Dtype == gqf.DataType_INT64 {
		return e.addInit(onnx.Int64Tensor(p.name, dims, int64s(e.f.Bytes(t.Data))))
	}
	vals, err := e.f.Decode(t)
	if err != nil {
		return err
	}
	transpose := p.use == useFC
	if transpose {
		if len(dims) != 2 {
			return fmt.Errorf("FullyConnected weight of shape %v", dims)
		}
		vals = transposeF(vals, int(dims[0]), int(dims[1]))
		dims = []int64{dims[1], dims[0]}
	}
	if enc.Granularity == gqf.Granularity_FLOAT {
		return e.floatParam(p.name, dims, vals)
	}
	e.enc.Params = append(e.enc.Params, e.aimetParam(p.name, t))
	if !e.qdq {
		return e.addInit(onnx.FloatTensor(p.name, dims, vals))
	}
	return e.dequantized(p, dims, transpose)
}

// floatParam emits a float parameter: as it is, or in QDQ form as uint16 per-tensor codes
// behind a DequantizeLinear.
func (e *exporter) floatParam(name string, dims []int64, vals []float32) error {
	lo, hi := rangeOf(vals)
	re := gqf.RangeEncoding(lo, hi, 16)
	if e.quantizedScheme() {
		e.enc.Params = append(e.enc.Params, encodings.Encoding{Name: name, Type: encodings.PerTensor, Dtype: encodings.Int,
			Bitwidth: 16, Scale: re.Scale, Offset: re.Offset})
	} else {
		e.enc.Params = append(e.enc.Params, encodings.Encoding{Name: name, Type: encodings.PerTensor, Dtype: encodings.Float, Bitwidth: 16})
	}
	if !e.qdq {
		return e.addInit(onnx.FloatTensor(name, dims, vals))
	}
	codes := make([]uint16, len(vals))
	s, off := float64(re.Scale[0]), float64(re.Offset[0])
	for i, v := range vals {
		codes[i] = uint16(max(0, min(65535, math.RoundToEven(float64(v)/s)-off)))
	}
	e.g.Node = append(e.g.Node, onnx.Node("DequantizeLinear", name+".dq", []string{name + ".q", name + ".scale", name + ".zp"}, []string{name}))
	return e.addInit(
		onnx.Uint16Tensor(name+".q", dims, codes),
		onnx.FloatTensor(name+".scale", nil, []float32{re.Scale[0]}),
		onnx.Uint16Tensor(name+".zp", nil, []uint16{uint16(-re.Offset[0])}))
}

// dequantized emits a quantized weight as integer codes and a DequantizeLinear.
func (e *exporter) dequantized(p param, dims []int64, transpose bool) error {
	t, enc := p.t, p.t.Encoding
	rows, cols := int(t.Shape[0]), int(t.Shape[1])
	codes := e.f.Codes(t)
	if transpose {
		codes = transposeI(codes, rows, cols)
	}
	axis := int64(0)
	if transpose {
		axis = 1
	}
	var scale []float32
	var sdims []int64
	var zp *onnx.TensorProto
	var attrs []*onnx.AttributeProto
	switch enc.Granularity {
	case gqf.Granularity_PER_CHANNEL:
		if enc.Dtype != gqf.DataType_INT8 && enc.Dtype != gqf.DataType_UINT8 {
			return fmt.Errorf("per-channel %v codes have no QDQ form", enc.Dtype)
		}
		scale, sdims = e.f.Scales(t), []int64{int64(rows)}
		attrs = append(attrs, onnx.AttrInt("axis", axis))
		if z := e.f.Zeros(t); z != nil {
			zb := make([]uint8, len(z))
			for i, v := range z {
				zb[i] = uint8(v)
			}
			zp = onnx.Uint8Tensor(p.name+".zp", sdims, zb)
		}
	case gqf.Granularity_LPBQ:
		if enc.Dtype != gqf.DataType_INT4 {
			return fmt.Errorf("LPBQ %v codes have no QDQ form", enc.Dtype)
		}
		bs := int(enc.BlockSize)
		nb := cols / bs
		ch, k := e.f.Scales(t), e.f.BlockScales(t)
		scale = make([]float32, rows*nb)
		for r := 0; r < rows; r++ {
			for b := 0; b < nb; b++ {
				scale[r*nb+b] = float32(ch[r] * float32(k[r*nb+b]))
			}
		}
		sdims = []int64{int64(rows), int64(nb)}
		if transpose {
			scale = transposeF(scale, rows, nb)
			sdims = []int64{int64(nb), int64(rows)}
		}
		// Blocks run along the input channels: axis 1 of [out, in], axis 0 of [in, out].
		attrs = append(attrs, onnx.AttrInt("axis", 1-axis), onnx.AttrInt("block_size", int64(bs)))
	default:
		return fmt.Errorf("%v encodings have no QDQ form", enc.Granularity)
	}
	var q *onnx.TensorProto
	switch enc.Dtype {
	case gqf.DataType_INT8:
		b := make([]int8, len(codes))
		for i, v := range codes {
			b[i] = int8(v)
		}
		q = onnx.Int8Tensor(p.name+".q", dims, b)
	case gqf.DataType_UINT8:
		b := make([]uint8, len(codes))
		for i, v := range codes {
			b[i] = uint8(v)
		}
		q = onnx.Uint8Tensor(p.name+".q", dims, b)
	case gqf.DataType_INT4:
		b := make([]int8, len(codes))
		for i, v := range codes {
			b[i] = int8(v)
		}
		q = onnx.Int4Tensor(p.name+".q", dims, b)
	}
	inputs := []string{p.name + ".q", p.name + ".scale"}
	if err := e.addInit(q, onnx.FloatTensor(p.name+".scale", sdims, scale)); err != nil {
		return err
	}
	if zp != nil {
		if err := e.addInit(zp); err != nil {
			return err
		}
		inputs = append(inputs, p.name+".zp")
	}
	e.g.Node = append(e.g.Node, onnx.Node("DequantizeLinear", p.name+".dq", inputs, []string{p.name}, attrs...))
	return nil
}

// quantizedScheme reports whether the file's activations are quantized.
func (e *exporter) quantizedScheme() bool {
	for _, a := range e.acts {
		if a.Encoding != nil {
			return true
		}
	}
	return false
}

func rangeOf(v []float32) (lo, hi float64) {
	for _, x := range v {
		lo, hi = min(lo, float64(x)), max(hi, float64(x))
	}
	return lo, hi
}

func transposeF(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[c*rows+r] = v[r*cols+c]
		}
	}
	return out
}

func transposeI(v []int32, rows, cols int) []int32 {
	out := make([]int32, len(v))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[c*rows+r] = v[r*cols+c]
		}
	}
	return out
}

func int64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		var x uint64
		for j := 7; j >= 0; j-- {
			x = x<<8 | uint64(b[8*i+j])
		}
		out[i] = int64(x)
	}
	return out
}
