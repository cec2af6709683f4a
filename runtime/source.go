package runtime

import (
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
}

// source is what a loader hands the model builder: the model's description and a way to
// fetch each expected tensor.
type source struct {
	file   string // the path the user gave, for errors
	format string // "hf" or "gguf": the weights' RoPE pairing (arch.Family.RopeLayout)
	family arch.Family
	spec   *arch.Spec
	tok    *tokenizer.Tokenizer
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
	// packed, when set, is called once every matrix is packed (gqf: releases the mapping's
	// pages of the weights the kernels copied).
	packed func()
	// dyn is the run-time encoding of linear inputs (a w4a8 gqf file), nil for none.
	dyn *gqf.Encoding
}
