package kernels

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
)

// WType is a weight encoding: a ggml type id (formats/gguf's Type, whose table gives the
// names, block sizes and block bytes), or a gqf format's type (GroupFormat.Type, outside
// ggml's ids).
type WType uint32

// The ggml weight encodings the kernels support.
const (
	F32    = WType(gguf.F32)
	F16    = WType(gguf.F16)
	Q4_0   = WType(gguf.Q4_0)
	Q4_1   = WType(gguf.Q4_1)
	Q5_0   = WType(gguf.Q5_0)
	Q5_1   = WType(gguf.Q5_1)
	Q8_0   = WType(gguf.Q8_0)
	Q2_K   = WType(gguf.Q2_K)
	Q3_K   = WType(gguf.Q3_K)
	Q4_K   = WType(gguf.Q4_K)
	Q5_K   = WType(gguf.Q5_K)
	Q6_K   = WType(gguf.Q6_K)
	IQ4_NL = WType(gguf.IQ4_NL)
	IQ4_XS = WType(gguf.IQ4_XS)
	BF16   = WType(gguf.BF16)

	IQ2_XXS = WType(gguf.IQ2_XXS)
	IQ2_XS  = WType(gguf.IQ2_XS)
	IQ2_S   = WType(gguf.IQ2_S)
	IQ3_XXS = WType(gguf.IQ3_XXS)
	IQ3_S   = WType(gguf.IQ3_S)
	IQ1_S   = WType(gguf.IQ1_S)
	IQ1_M   = WType(gguf.IQ1_M)
	TQ1_0   = WType(gguf.TQ1_0)
	TQ2_0   = WType(gguf.TQ2_0)
)

// Types lists every supported ggml weight encoding: the kernels' own list (formats/gguf knows
// more types, I8 … F64 and Q8_1 among them, that no weight tensor here takes).
var Types = []WType{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, Q2_K, Q3_K, IQ4_XS,
	IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0}

var supported = func() map[WType]bool {
	s := make(map[WType]bool, len(Types))
	for _, t := range Types {
		s[t] = true
	}
	return s
}()

// Supported reports whether the kernels handle ggml weight encoding t (NewMatrix takes it). The
// gqf formats' types (GroupFormat.Type) are not ggml encodings: NewGroupMatrix makes them.
func (t WType) Supported() bool { return supported[t] }

// String returns ggml's name of the type ("Q4_K", from formats/gguf), a gqf format's name
// ("gqf-int4-g128-asym"), or "type(N)" for an unknown one.
func (t WType) String() string {
	if f, ok := t.Group(); ok {
		return f.String()
	}
	return gguf.Type(t).String()
}

// BlockSize returns the number of elements in one block (1 for float types, 0 if unsupported).
func (t WType) BlockSize() int {
	if !t.Supported() {
		return 0
	}
	return gguf.Type(t).BlockSize()
}

// TypeSize returns the number of bytes of one block (0 if unsupported).
func (t WType) TypeSize() int {
	if !t.Supported() {
		return 0
	}
	return gguf.Type(t).TypeSize()
}

// RowBytes returns the bytes of one row of cols elements, or an error when the type is
// unsupported or cols is not a positive multiple of its block size.
func (t WType) RowBytes(cols int) (int, error) {
	if _, grp := t.Group(); grp {
		return 0, fmt.Errorf("%v matrices are made by NewGroupMatrix", t)
	}
	if !t.Supported() {
		return 0, fmt.Errorf("unsupported weight type %v", t)
	}
	bs := t.BlockSize()
	if cols <= 0 || cols%bs != 0 {
		return 0, fmt.Errorf("row length %d is not a positive multiple of %v's block size %d", cols, t, bs)
	}
	return cols / bs * t.TypeSize(), nil
}

// quantized reports whether t is a block-quantized type (not F32, F16 or BF16).
func (t WType) quantized() bool { return t.BlockSize() > 1 }
