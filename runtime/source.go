package runtime

import (
	"fmt"
	"unsafe"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// rawTensor is one stored tensor: its ggml type, its shape in HF order ([out, in] for
// matrices, [n] for vectors) and its bytes (a view of the mapped file).
type rawTensor struct {
	name  string // GGUF name, for errors, hooks and accounting
	typ   gguf.Type
	shape []int
	data  []byte
	// rows, when set, decodes rows [r0, r1) of a tensor stored in an encoding of its own (a
	// gqf file's integer groups) to float32; data is then nil and size its stored bytes.
	rows func(dst []float32, r0, r1 int) error
	size int
	// offset is added to every value as it is decoded (arch.Tensor.Offset: Gemma's norm
	// weights read from an HF checkpoint); 0 for tensors stored as the graph reads them.
	offset float32
	// parts, for a stack of expert matrices (shape [experts, rows, cols]) stored one tensor per
	// expert (an HF checkpoint), holds each expert's bytes; data is then nil.
	parts [][]byte
}

// stored is the bytes the tensor takes in its file.
func (rt rawTensor) stored() int {
	switch {
	case rt.rows != nil:
		return rt.size
	case rt.parts != nil:
		n := 0
		for _, p := range rt.parts {
			n += len(p)
		}
		return n
	}
	return len(rt.data)
}

// experts returns the bytes of each matrix of a stack of expert matrices: its parts, or its
// data cut in shape[0] equal pieces (a GGUF stack, expert after expert).
func (rt rawTensor) experts() ([][]byte, error) {
	if rt.parts != nil {
		return rt.parts, nil
	}
	if len(rt.shape) != 3 || rt.rows != nil {
		return nil, fmt.Errorf("%s: shape %v is not a stack of expert matrices", rt.name, rt.shape)
	}
	e := rt.shape[0]
	if e <= 0 || len(rt.data)%e != 0 {
		return nil, fmt.Errorf("%s: %d bytes do not divide into %d experts", rt.name, len(rt.data), e)
	}
	per := len(rt.data) / e
	out := make([][]byte, e)
	for i := range out {
		out[i] = rt.data[i*per : (i+1)*per]
	}
	return out, nil
}

// widened returns the tensor decoded to F32 (a copy), for one stored with rows.
func (rt rawTensor) widened() (rawTensor, error) {
	n := 1
	for _, d := range rt.shape {
		n *= d
	}
	rows := rt.shape[0]
	if len(rt.shape) == 1 {
		rows = n
	}
	f := make([]float32, n)
	if err := rt.rows(f, 0, rows); err != nil {
		return rt, err
	}
	out := rawTensor{name: rt.name, typ: gguf.F32, shape: rt.shape}
	if n > 0 {
		out.data = unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*n)
	}
	return out, nil
}

// source is what a loader hands the model builder: the model's description and a way to
// fetch each expected tensor.
type source struct {
	file   string // the path the user gave, for errors
	format string // "hf" or "gguf": the weights' RoPE pairing (arch.Family.RopeLayout)
	// ggufNames: the file names its tensors as GGUF does (GGUF and gqf files), for errors.
	ggufNames bool
	family    arch.Family
	spec      *arch.Spec
	tok       *tokenizer.Tokenizer
	// tensor returns the stored tensor for an expected one; ok is false when it is absent.
	tensor func(t arch.Tensor) (rt rawTensor, ok bool, err error)
	// ropeFactors are llama3 rope frequency factors stored in the file (GGUF rope_freqs), or nil.
	ropeFactors []float32
	// close releases the mapped files.
	close func() error

	// matrix, when set, makes the matrix of a weight itself (gqf's integer groups, for the
	// packed kernels); it returns nil for a weight it leaves to newLinear, and whether the
	// matrix's kernels quantize their input per token as dyn says.
	matrix func(name string, rt rawTensor, mode kernels.ActMode) (w *kernels.Matrix, dynInKernel bool, err error)
	// dyn is the run-time encoding of linear inputs (a w4a8 gqf file), nil for none.
	dyn *gqf.Encoding
	// mask is the attention mask of the file's graph (a gqf file's attn.mask), 0 for the
	// default (arch.MaskValue).
	mask float32
	// graphLen is the length of a gqf file's graph (0 for other sources): longrope's factors
	// are those its rotation tables hold, whatever a State's capacity.
	graphLen int
}
