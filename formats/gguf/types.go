// Package gguf reads and writes GGUF v3 files as llama.cpp does (ggml/src/gguf.cpp).
package gguf

import (
	"fmt"
	"strings"
)

// Type is a ggml tensor type id (ggml/include/ggml.h).
type Type uint32

// Tensor type ids, as numbered by ggml.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
)

type typeTraits struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
}

var traits = map[Type]typeTraits{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	Q4_0: {"Q4_0", 32, 18},
	Q4_1: {"Q4_1", 32, 20},
	Q5_0: {"Q5_0", 32, 22},
	Q5_1: {"Q5_1", 32, 24},
	Q8_0: {"Q8_0", 32, 34},
	Q8_1: {"Q8_1", 32, 36},
	Q2_K: {"Q2_K", 256, 84},
	Q3_K: {"Q3_K", 256, 110},
	Q4_K: {"Q4_K", 256, 144},
	Q5_K: {"Q5_K", 256, 176},
	Q6_K: {"Q6_K", 256, 210},
	Q8_K: {"Q8_K", 256, 292},
	// The i-quants (ggml-common.h's block_iq*): fp16 d then the packed grid indexes, signs and
	// scales; IQ1_M keeps its fp16 scale in the top nibbles of its scales.
	IQ2_XXS: {"IQ2_XXS", 256, 66}, // d, qs[32] uint16
	IQ2_XS:  {"IQ2_XS", 256, 74},  // d, qs[32] uint16, scales[8]
	IQ2_S:   {"IQ2_S", 256, 82},   // d, qs[64], qh[8], scales[8]
	IQ3_XXS: {"IQ3_XXS", 256, 98}, // d, qs[96]
	IQ3_S:   {"IQ3_S", 256, 110},  // d, qs[64], qh[8], signs[32], scales[4]
	IQ1_S:   {"IQ1_S", 256, 50},   // d, qs[32], qh[8] uint16
	IQ1_M:   {"IQ1_M", 256, 56},   // qs[32], qh[16], scales[8]
	IQ4_NL:  {"IQ4_NL", 32, 18},
	IQ4_XS:  {"IQ4_XS", 256, 136},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", 256, 54}, // ternary, 5 trits per byte: qs[48], 4 trits per byte: qh[4], d
	TQ2_0:   {"TQ2_0", 256, 66}, // ternary, 2 bits per element: qs[64], d
}

// Known reports whether ggml defines t (among the types gquant knows).
func (t Type) Known() bool { _, ok := traits[t]; return ok }

// String is ggml's name of the type ("Q4_K", "BF16"), or "type(N)" when unknown.
func (t Type) String() string {
	if tr, ok := traits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements in one block (1 for plain types); 0 when unknown.
func (t Type) BlockSize() int { return traits[t].blockSize }

// TypeSize is the number of bytes in one block; 0 when unknown.
func (t Type) TypeSize() int { return traits[t].typeSize }

// RowBytes is the size in bytes of n elements of type t; n must be a multiple of the block size.
func (t Type) RowBytes(n int) int {
	tr := traits[t]
	if tr.blockSize == 0 {
		return 0
	}
	return n / tr.blockSize * tr.typeSize
}

// BitsPerWeight is the storage cost of one element.
func (t Type) BitsPerWeight() float64 {
	tr := traits[t]
	if tr.blockSize == 0 {
		return 0
	}
	return float64(tr.typeSize*8) / float64(tr.blockSize)
}

// ParseType accepts ggml's names, case-insensitively ("q4_k", "BF16").
func ParseType(s string) (Type, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	for t, tr := range traits {
		if tr.name == u {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q", s)
}

// ValueType is a GGUF metadata value type (gguf.h: enum gguf_type).
type ValueType uint32

// Metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)
