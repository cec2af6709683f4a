package kernels

import "fmt"

// WType is a weight encoding, numbered as ggml's type ids (ggml.h).
type WType uint32

// The weight encodings the kernels support.
const (
	F32    WType = 0
	F16    WType = 1
	Q4_0   WType = 2
	Q4_1   WType = 3
	Q5_0   WType = 6
	Q5_1   WType = 7
	Q8_0   WType = 8
	Q2_K   WType = 10
	Q3_K   WType = 11
	Q4_K   WType = 12
	Q5_K   WType = 13
	Q6_K   WType = 14
	IQ4_NL WType = 20
	IQ4_XS WType = 23
	BF16   WType = 30
)

// Types lists every supported weight encoding.
var Types = []WType{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, Q2_K, Q3_K, IQ4_XS}

type typeInfo struct {
	name  string
	block int // elements per block
	size  int // bytes per block
}

var typeInfos = map[WType]typeInfo{
	F32:    {"F32", 1, 4},
	F16:    {"F16", 1, 2},
	BF16:   {"BF16", 1, 2},
	Q4_0:   {"Q4_0", 32, 18},
	Q4_1:   {"Q4_1", 32, 20},
	Q5_0:   {"Q5_0", 32, 22},
	Q5_1:   {"Q5_1", 32, 24},
	Q8_0:   {"Q8_0", 32, 34},
	Q4_K:   {"Q4_K", 256, 144},
	Q5_K:   {"Q5_K", 256, 176},
	Q6_K:   {"Q6_K", 256, 210},
	IQ4_NL: {"IQ4_NL", 32, 18},
	Q2_K:   {"Q2_K", 256, 84},
	Q3_K:   {"Q3_K", 256, 110},
	IQ4_XS: {"IQ4_XS", 256, 136},
}

// Supported reports whether the kernels handle ggml weight encoding t (NewMatrix takes it). The
// gqf formats' types (GroupFormat.Type) are not ggml encodings: NewGroupMatrix makes them.
func (t WType) Supported() bool { _, ok := typeInfos[t]; return ok }

// String returns ggml's name of the type ("Q4_K"), or "type(N)" for an unsupported one.
func (t WType) String() string {
	if ti, ok := typeInfos[t]; ok {
		return ti.name
	}
	if f, ok := t.Group(); ok {
		return f.String()
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the number of elements in one block (1 for float types, 0 if unsupported).
func (t WType) BlockSize() int { return typeInfos[t].block }

// TypeSize returns the number of bytes of one block (0 if unsupported).
func (t WType) TypeSize() int { return typeInfos[t].size }

// RowBytes returns the bytes of one row of cols elements, or an error when the type is
// unsupported or cols is not a positive multiple of its block size.
func (t WType) RowBytes(cols int) (int, error) {
	ti, ok := typeInfos[t]
	if _, grp := t.Group(); grp {
		return 0, fmt.Errorf("%v matrices are made by NewGroupMatrix", t)
	}
	if !ok {
		return 0, fmt.Errorf("unsupported weight type %v", t)
	}
	if cols <= 0 || cols%ti.block != 0 {
		return 0, fmt.Errorf("row length %d is not a positive multiple of %v's block size %d", cols, t, ti.block)
	}
	return cols / ti.block * ti.size, nil
}

// quantized reports whether t is a block-quantized type (not F32, F16 or BF16).
func (t WType) quantized() bool { return t.BlockSize() > 1 }
