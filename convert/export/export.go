// Package export turns a gqf file into what Qualcomm's and ONNX Runtime's tools take: the
// decoder as an ONNX model (opset 21; float, or QDQ with QuantizeLinear/DequantizeLinear
// around every activation and quantized weights) and an AIMET encodings JSON keyed by the
// tensor names of the float ONNX model.
//
// The ONNX model has one input, input_ids (int64 [batch, max_len]), and one output, logits
// (float32 [batch, max_len, vocab]); no KV cache. Positions are causal, so a shorter prompt
// can be padded at the end and the logits of its own positions read. Node outputs keep the
// gqf graph's activation names; weights keep their gqf names (a FullyConnected weight is
// stored transposed, [in, out], for MatMul; a tied output weight is a second initializer,
// output.weight). QNN's RmsNorm is written as SimplifiedLayerNormalization, which ONNX
// Runtime implements and its QNN provider maps to RmsNorm.
package export

import (
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/onnx"
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

// param is one initializer of the exported model made from a gqf tensor.
type param struct {
	name string
	t    *gqf.Tensor
	use  usage
}

// exporter builds the ONNX graph and the matching encodings.
type exporter struct {
	f      *gqf.File
	qdq    bool
	g      *onnx.GraphProto
	enc    *encodings.File
	params map[string]map[usage]string // tensor name → usage → initializer name
	acts   map[string]*gqf.Value
}

// ONNX exports the decoder of f as an ONNX model.
func ONNX(f *gqf.File, o Options) (*onnx.ModelProto, error) {
	e, err := run(f, o.QDQ)
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
	e, err := run(f, false)
	if err != nil {
		return nil, err
	}
	return e.enc, nil
}

// run builds the export.
func run(f *gqf.File, qdq bool) (*exporter, error) {
	g := f.Manifest.Graph
	if g == nil {
		return nil, fmt.Errorf("%s: graph: missing", f.Path)
	}
	e := &exporter{f: f, qdq: qdq, g: &onnx.GraphProto{}, enc: &encodings.File{Version: encodings.V1},
		params: map[string]map[usage]string{}, acts: map[string]*gqf.Value{}}
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
	for _, in := range g.Inputs {
		dims := []any{"batch"}
		for _, d := range in.Shape[1:] {
			dims = append(dims, d)
		}
		e.g.Input = append(e.g.Input, onnx.ValueInfo(in.Name, onnxType(in.Dtype), dims...))
	}
	for _, nd := range g.Nodes {
		if err := e.node(nd); err != nil {
			return nil, fmt.Errorf("%s: graph: node %s: %w", f.Path, nd.Name, err)
		}
	}
	for _, out := range g.Outputs {
		a := e.acts[out]
		dims := []any{"batch"}
		for _, d := range a.Shape[1:] {
			dims = append(dims, d)
		}
		e.g.Output = append(e.g.Output, onnx.ValueInfo(out, onnx.TensorProto_FLOAT, dims...))
	}
	for _, a := range g.Activations {
		e.enc.Activations = append(e.enc.Activations, aimetActivation(a))
	}
	e.enc.QuantizerArgs = quantizerArgs(f.Manifest)
	return e, nil
}

func onnxType(t gqf.DataType) onnx.TensorProto_DataType {
	if t == gqf.DataType_INT64 {
		return onnx.TensorProto_INT64
	}
	return onnx.TensorProto_FLOAT
}

// initializers emits one initializer (and, in QDQ form, its DequantizeLinear) per stored
// tensor and way of use, in the order the nodes first read them.
func (e *exporter) initializers(g *gqf.Graph) error {
	taken := map[string]bool{}
	for _, t := range e.f.Manifest.Tensors {
		taken[t.Name] = true
	}
	var list []param
	seen := map[string]map[usage]bool{}
	for _, nd := range g.Nodes {
		for i, in := range nd.Inputs {
			t, ok := e.f.Tensor(in)
			if !ok {
				continue
			}
			u := useOther
			switch {
			case nd.Op == "FullyConnected" && i == 1:
				u = useFC
			case nd.Op == "Gather" && i == 0:
				u = useGather
			}
			if seen[in] == nil {
				seen[in] = map[usage]bool{}
			}
			if seen[in][u] {
				continue
			}
			seen[in][u] = true
			list = append(list, param{name: in, t: t, use: u})
		}
	}
	// A tensor read two ways (the tied embedding: Gather table and output weight) gets a
	// second initializer for the second way.
	for i, p := range list {
		if len(seen[p.t.Name]) > 1 && p.use == useFC {
			name := "output.weight"
			if taken[name] {
				name = p.t.Name + ".fc"
			}
			taken[name] = true
			list[i].name = name
		}
	}
	for _, p := range list {
		if e.params[p.t.Name] == nil {
			e.params[p.t.Name] = map[usage]string{}
		}
		e.params[p.t.Name][p.use] = p.name
		if err := e.param(p); err != nil {
			return fmt.Errorf("%s: %w", p.t.Name, err)
		}
	}
	return nil
}

// param emits one initializer.
func (e *exporter) param(p param) error {
	t, enc := p.t, p.t.Encoding
	dims := append([]int64(nil), t.Shape...)
	if enc.Dtype == gqf.DataType_INT64 {
		vals := int64s(e.f.Bytes(t.Data))
		e.g.Initializer = append(e.g.Initializer, onnx.Int64Tensor(p.name, dims, vals))
		return nil
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
		// Float parameters: uint16 per-tensor codes in QDQ form, as they are otherwise.
		lo, hi := rangeOf(vals)
		re := gqf.RangeEncoding(lo, hi, 16)
		if !e.qdq {
			e.g.Initializer = append(e.g.Initializer, onnx.FloatTensor(p.name, dims, vals))
		} else {
			codes := make([]uint16, len(vals))
			s, off := float64(re.Scale[0]), float64(re.Offset[0])
			for i, v := range vals {
				codes[i] = uint16(max(0, min(65535, math.RoundToEven(float64(v)/s)-off)))
			}
			e.g.Initializer = append(e.g.Initializer,
				onnx.Uint16Tensor(p.name+".q", dims, codes),
				onnx.FloatTensor(p.name+".scale", nil, []float32{re.Scale[0]}),
				onnx.Uint16Tensor(p.name+".zp", nil, []uint16{uint16(-re.Offset[0])}))
			e.g.Node = append(e.g.Node, onnx.Node("DequantizeLinear", p.name+".dq", []string{p.name + ".q", p.name + ".scale", p.name + ".zp"}, []string{p.name}))
		}
		if e.quantizedScheme() {
			e.enc.Params = append(e.enc.Params, encodings.Encoding{Name: p.name, Type: encodings.PerTensor, Dtype: encodings.Int,
				Bitwidth: 16, Scale: re.Scale, Offset: re.Offset})
		} else {
			e.enc.Params = append(e.enc.Params, encodings.Encoding{Name: p.name, Type: encodings.PerTensor, Dtype: encodings.Float, Bitwidth: 16})
		}
		return nil
	}
	e.enc.Params = append(e.enc.Params, e.aimetParam(p.name, t))
	if !e.qdq {
		e.g.Initializer = append(e.g.Initializer, onnx.FloatTensor(p.name, dims, vals))
		return nil
	}
	return e.dequantized(p, dims, transpose)
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
	e.g.Initializer = append(e.g.Initializer, q, onnx.FloatTensor(p.name+".scale", sdims, scale))
	if zp != nil {
		e.g.Initializer = append(e.g.Initializer, zp)
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
