package gqf

// The op vocabulary of a gqf graph: Qualcomm QNN's op names (Node.op). This is its one list:
// the graph builder (runtime/arch's Lower) emits these, Parse accepts only these, and the
// ONNX export maps each to its ONNX form.
const (
	OpFullyConnected      = "FullyConnected"      // x·Wᵀ, W [out, in] a stored tensor
	OpMatMul              = "MatMul"              // batched [..., M, K]·[..., K, N]
	OpRmsNorm             = "RmsNorm"             // over the last axis; attr epsilon
	OpElementWiseMultiply = "ElementWiseMultiply" // broadcasting
	OpElementWiseAdd      = "ElementWiseAdd"      // broadcasting
	OpSoftmax             = "Softmax"             // attr axis (the last)
	OpGather              = "Gather"              // attr axis; int64 indices
	OpReshape             = "Reshape"             // attr shape (ONNX rules: 0 copies, −1 infers)
	OpTranspose           = "Transpose"           // attr perm
	OpSigmoid             = "Sigmoid"
	OpTanh                = "Tanh"   // soft-capping (Gemma 2)
	OpConcat              = "Concat" // attr axis
)

// Ops lists the vocabulary.
var Ops = []string{OpFullyConnected, OpMatMul, OpRmsNorm, OpElementWiseMultiply, OpElementWiseAdd,
	OpSoftmax, OpGather, OpReshape, OpTranspose, OpSigmoid, OpTanh, OpConcat}
