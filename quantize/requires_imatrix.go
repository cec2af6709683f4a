package quantize

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
)

// RequiresImatrix reports whether t can only be quantized with an importance matrix, as
// ggml_quantize_requires_imatrix says (IQ2_XXS, IQ2_XS and IQ1_S: ggml_quantize_chunk asserts
// one). The Quantize of such a codec panics when imatrix is nil, like a wrong length: callers
// check this first and report the missing matrix as a usage error.
func RequiresImatrix(t gguf.Type) bool {
	switch t {
	case gguf.IQ2_XXS, gguf.IQ2_XS, gguf.IQ1_S:
		return true
	}
	return false
}

// mustHaveImatrix panics when a codec that requires an importance matrix is called without one.
func mustHaveImatrix(e Encoding, imatrix []float32) {
	if imatrix == nil {
		panic(fmt.Sprintf("quantize: %s: needs an importance matrix (ggml_quantize_chunk asserts one)", e.Type()))
	}
}
