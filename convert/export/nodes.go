package export

import (
	"fmt"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/onnx"
)

// onnxOps maps gqf (QNN) op types to ONNX op types.
var onnxOps = map[string]string{
	"FullyConnected":      "MatMul",
	"MatMul":              "MatMul",
	"RmsNorm":             "SimplifiedLayerNormalization",
	"ElementWiseMultiply": "Mul",
	"ElementWiseAdd":      "Add",
	"Softmax":             "Softmax",
	"Gather":              "Gather",
	"Reshape":             "Reshape",
	"Transpose":           "Transpose",
	"Sigmoid":             "Sigmoid",
	"Concat":              "Concat",
}

// isGraphOutput reports whether name is an output of the gqf graph.
func (e *exporter) isGraphOutput(name string) bool {
	for _, o := range e.f.Manifest.Graph.Outputs {
		if o == name {
			return true
		}
	}
	return false
}

// input names what a node reads for its i-th input.
func (e *exporter) input(nd *gqf.Node, i int) string {
	in := nd.Inputs[i]
	if byUse, ok := e.params[in]; ok {
		u := useOther
		switch {
		case nd.Op == "FullyConnected" && i == 1:
			u = useFC
		case nd.Op == "Gather" && i == 0:
			u = useGather
		}
		return byUse[u]
	}
	if a := e.acts[in]; a != nil && e.qdq && a.Encoding != nil && !e.isGraphOutput(in) {
		return in + ".dq"
	}
	return in
}

// node emits one gqf node as ONNX node(s): the op itself, then (QDQ form) the
// QuantizeLinear and DequantizeLinear of its output.
func (e *exporter) node(nd *gqf.Node) error {
	op, ok := onnxOps[nd.Op]
	if !ok {
		return fmt.Errorf("op %q has no ONNX form", nd.Op)
	}
	if len(nd.Outputs) != 1 {
		return fmt.Errorf("%d outputs, want 1", len(nd.Outputs))
	}
	out := nd.Outputs[0]
	a := e.acts[out]
	quant := e.qdq && a != nil && a.Encoding != nil
	produced := out
	if quant && e.isGraphOutput(out) {
		produced = out + ".f"
	}
	var inputs []string
	for i := range nd.Inputs {
		inputs = append(inputs, e.input(nd, i))
	}
	var attrs []*onnx.AttributeProto
	get := func(name string) *gqf.Attribute {
		for _, at := range nd.Attrs {
			if at.Name == name {
				return at
			}
		}
		return &gqf.Attribute{}
	}
	switch nd.Op {
	case "Gather", "Softmax", "Concat":
		attrs = append(attrs, onnx.AttrInt("axis", get("axis").I))
	case "Transpose":
		attrs = append(attrs, onnx.AttrInts("perm", get("perm").Ints...))
	case "RmsNorm":
		attrs = append(attrs, onnx.AttrInt("axis", -1), onnx.AttrFloat("epsilon", get("epsilon").F), onnx.AttrInt("stash_type", 1))
	case "Reshape":
		shape := out + ".shape"
		e.g.Initializer = append(e.g.Initializer, onnx.Int64Tensor(shape, []int64{int64(len(get("shape").Ints))}, get("shape").Ints))
		inputs = append(inputs, shape)
	}
	e.g.Node = append(e.g.Node, onnx.Node(op, out, inputs, []string{produced}, attrs...))
	if !quant {
		return nil
	}
	enc := a.Encoding
	scale, zp := out+".scale", out+".zp"
	e.g.Initializer = append(e.g.Initializer, onnx.FloatTensor(scale, nil, []float32{enc.Scale[0]}))
	if enc.Dtype == gqf.DataType_UINT8 {
		e.g.Initializer = append(e.g.Initializer, onnx.Uint8Tensor(zp, nil, []uint8{uint8(-enc.Offset[0])}))
	} else if enc.Dtype == gqf.DataType_UINT16 {
		e.g.Initializer = append(e.g.Initializer, onnx.Uint16Tensor(zp, nil, []uint16{uint16(-enc.Offset[0])}))
	} else {
		return fmt.Errorf("activation %s: %v codes have no QDQ form (want UINT8 or UINT16)", out, enc.Dtype)
	}
	dq := out + ".dq"
	if e.isGraphOutput(out) {
		dq = out
	}
	e.g.Node = append(e.g.Node,
		onnx.Node("QuantizeLinear", out+".quantize", []string{produced, scale, zp}, []string{out + ".q"}),
		onnx.Node("DequantizeLinear", out+".dequantize", []string{out + ".q", scale, zp}, []string{dq}))
	return nil
}
