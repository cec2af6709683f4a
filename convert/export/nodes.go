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
	"RmsNorm":             "Mul", // written out in standard ops: see rmsNorm
	"ElementWiseMultiply": "Mul",
	"ElementWiseAdd":      "Add",
	"Softmax":             "Softmax",
	"Gather":              "Gather",
	"Reshape":             "Reshape",
	"Transpose":           "Transpose",
	"Sigmoid":             "Sigmoid",
	"Tanh":                "Tanh",
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
		if err := e.rmsNorm(out, inputs, produced, get("epsilon").F); err != nil {
			return err
		}
	case "Reshape":
		shape := out + ".shape"
		if err := e.addInit(onnx.Int64Tensor(shape, []int64{int64(len(get("shape").Ints))}, get("shape").Ints)); err != nil {
			return err
		}
		inputs = append(inputs, shape)
	}
	if nd.Op != "RmsNorm" {
		e.g.Node = append(e.g.Node, onnx.Node(op, out, inputs, []string{produced}, attrs...))
	}
	if !quant {
		return nil
	}
	dq := out + ".dq"
	if e.isGraphOutput(out) {
		dq = out
	}
	return e.qdqPair(out, produced, dq, a.Encoding)
}

// qdqPair quantizes and dequantizes the value in (named name) with enc into out.
func (e *exporter) qdqPair(name, in, out string, enc *gqf.Encoding) error {
	scale, zp := name+".scale", name+".zp"
	var zpt *onnx.TensorProto
	switch enc.Dtype {
	case gqf.DataType_UINT8:
		zpt = onnx.Uint8Tensor(zp, nil, []uint8{uint8(-enc.Offset[0])})
	case gqf.DataType_UINT16:
		zpt = onnx.Uint16Tensor(zp, nil, []uint16{uint16(-enc.Offset[0])})
	default:
		return fmt.Errorf("activation %s: %v codes have no QDQ form (want UINT8 or UINT16)", name, enc.Dtype)
	}
	if err := e.addInit(onnx.FloatTensor(scale, nil, []float32{enc.Scale[0]}), zpt); err != nil {
		return err
	}
	e.g.Node = append(e.g.Node,
		onnx.Node("QuantizeLinear", name+".quantize", []string{in, scale, zp}, []string{name + ".q"}),
		onnx.Node("DequantizeLinear", name+".dequantize", []string{name + ".q", scale, zp}, []string{out}))
	return nil
}

// rmsNorm writes QNN's RmsNorm over the last axis in standard ONNX ops (opset 21 has no
// RMSNormalization): weight · x · 1/sqrt(mean(x²) + eps), as Pow, ReduceMean, Add, Sqrt,
// Reciprocal, Mul and Mul, in float32: the pattern Qualcomm's efficient-transformers exports
// and onnxscript's rewriter fuses back into one RMS normalization. The intermediate tensors
// are named after the output (rmsNormParts) and stay in float in QDQ form: QNN's RmsNorm is
// one op, whose output alone carries an encoding.
func (e *exporter) rmsNorm(out string, inputs []string, produced string, eps float32) error {
	x, w := inputs[0], inputs[1]
	t := func(part string) string { return out + "." + part }
	if err := e.addInit(onnx.FloatTensor(t("two"), nil, []float32{2}), onnx.Int64Tensor(t("axes"), []int64{1}, []int64{-1}),
		onnx.FloatTensor(t("eps"), nil, []float32{eps})); err != nil {
		return err
	}
	e.g.Node = append(e.g.Node,
		onnx.Node("Pow", t("sq"), []string{x, t("two")}, []string{t("sq")}),
		onnx.Node("ReduceMean", t("ms"), []string{t("sq"), t("axes")}, []string{t("ms")}, onnx.AttrInt("keepdims", 1)),
		onnx.Node("Add", t("var"), []string{t("ms"), t("eps")}, []string{t("var")}),
		onnx.Node("Sqrt", t("rms"), []string{t("var")}, []string{t("rms")}),
		onnx.Node("Reciprocal", t("inv"), []string{t("rms")}, []string{t("inv")}),
		onnx.Node("Mul", t("x"), []string{x, t("inv")}, []string{t("x")}),
		onnx.Node("Mul", out, []string{w, t("x")}, []string{produced}))
	return nil
}

// rmsNormParts are the suffixes of the intermediate tensors of rmsNorm.
var rmsNormParts = []string{"sq", "ms", "var", "rms", "inv", "x"}
