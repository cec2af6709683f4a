package runtime

import (
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
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
}
