package gguf

import (
	"fmt"
	"math"
)

// KV is one metadata entry. Value is exactly one of the Go types below, and the Go type decides
// the GGUF value type written, so writers control metadata types exactly (llama.cpp rejects
// "key has wrong type": counts are uint32, epsilons float32, tokens []string, and so on):
//
//	uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64, int64, float64
//	a slice of one of those ([]string, []int32, []float32, ...): a GGUF array
//	[]any whose elements are themselves arrays (slices or []any): a nested array
//
// Nested arrays are valid GGUF (gguf-py reads and writes them) but llama.cpp's loader rejects a
// file that holds one.
type KV struct {
	Key   string
	Value any
}

// maxNesting bounds how deeply arrays may nest, so that a hostile file cannot drive the parser
// into deep recursion.
const maxNesting = 8

// name is the GGUF spelling of a value type, used in error messages ("UINT32").
func (t ValueType) name() string {
	switch t {
	case TypeUint8:
		return "UINT8"
	case TypeInt8:
		return "INT8"
	case TypeUint16:
		return "UINT16"
	case TypeInt16:
		return "INT16"
	case TypeUint32:
		return "UINT32"
	case TypeInt32:
		return "INT32"
	case TypeFloat32:
		return "FLOAT32"
	case TypeBool:
		return "BOOL"
	case TypeString:
		return "STRING"
	case TypeArray:
		return "ARRAY"
	case TypeUint64:
		return "UINT64"
	case TypeInt64:
		return "INT64"
	case TypeFloat64:
		return "FLOAT64"
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// scalarSize is the encoded size of a fixed-size value type, 0 for strings, arrays and unknown
// types.
func (t ValueType) scalarSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// known reports whether t is one of the thirteen GGUF value types.
func (t ValueType) known() bool { return t <= TypeFloat64 }

// typeOf maps a Go value to its GGUF value type; for arrays it also returns the element type.
// ok is false when v is not one of the Go types KV documents.
func typeOf(v any) (t, elem ValueType, ok bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, true
	case int8:
		return TypeInt8, 0, true
	case uint16:
		return TypeUint16, 0, true
	case int16:
		return TypeInt16, 0, true
	case uint32:
		return TypeUint32, 0, true
	case int32:
		return TypeInt32, 0, true
	case float32:
		return TypeFloat32, 0, true
	case bool:
		return TypeBool, 0, true
	case string:
		return TypeString, 0, true
	case uint64:
		return TypeUint64, 0, true
	case int64:
		return TypeInt64, 0, true
	case float64:
		return TypeFloat64, 0, true
	case []uint8:
		return TypeArray, TypeUint8, true
	case []int8:
		return TypeArray, TypeInt8, true
	case []uint16:
		return TypeArray, TypeUint16, true
	case []int16:
		return TypeArray, TypeInt16, true
	case []uint32:
		return TypeArray, TypeUint32, true
	case []int32:
		return TypeArray, TypeInt32, true
	case []float32:
		return TypeArray, TypeFloat32, true
	case []bool:
		return TypeArray, TypeBool, true
	case []string:
		return TypeArray, TypeString, true
	case []uint64:
		return TypeArray, TypeUint64, true
	case []int64:
		return TypeArray, TypeInt64, true
	case []float64:
		return TypeArray, TypeFloat64, true
	case []any:
		return TypeArray, TypeArray, true
	}
	return 0, 0, false
}

// describe names the GGUF type of a Go value for error messages: "UINT32", "ARRAY[STRING]",
// or the Go type when v is not a GGUF value.
func describe(v any) string {
	t, elem, ok := typeOf(v)
	switch {
	case !ok:
		return fmt.Sprintf("Go type %T (not a GGUF value)", v)
	case t == TypeArray:
		return "ARRAY[" + elem.name() + "]"
	}
	return t.name()
}

// checkValue reports why v cannot be written as a GGUF value, or nil when it can.
func checkValue(v any, depth int) error {
	t, elem, ok := typeOf(v)
	if !ok {
		return fmt.Errorf("unsupported value of Go type %T", v)
	}
	if t != TypeArray || elem != TypeArray {
		return nil
	}
	if depth >= maxNesting {
		return fmt.Errorf("arrays nested deeper than %d levels", maxNesting)
	}
	for i, e := range v.([]any) {
		if et, _, _ := typeOf(e); et != TypeArray {
			return fmt.Errorf("element %d of a nested array is %s, not an array", i, describe(e))
		}
		if err := checkValue(e, depth+1); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

// le is a little-endian appender for the encoders below.
type le []byte

func (b le) u8(v uint8) le   { return append(b, v) }
func (b le) u16(v uint16) le { return append(b, byte(v), byte(v>>8)) }
func (b le) u32(v uint32) le { return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
func (b le) u64(v uint64) le {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24),
		byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
}
func (b le) str(s string) le { return append(b.u64(uint64(len(s))), s...) }

// appendKV encodes one metadata entry: key, value type, value. v must have passed checkValue.
func appendKV(b le, kv KV) le {
	b = b.str(kv.Key)
	t, _, _ := typeOf(kv.Value)
	b = b.u32(uint32(t))
	return appendValue(b, kv.Value)
}

// appendValue encodes a value without its type tag; an array is written as element type,
// count and elements.
func appendValue(b le, v any) le {
	switch x := v.(type) {
	case uint8:
		return b.u8(x)
	case int8:
		return b.u8(uint8(x))
	case uint16:
		return b.u16(x)
	case int16:
		return b.u16(uint16(x))
	case uint32:
		return b.u32(x)
	case int32:
		return b.u32(uint32(x))
	case float32:
		return b.u32(math.Float32bits(x))
	case bool:
		if x {
			return b.u8(1)
		}
		return b.u8(0)
	case string:
		return b.str(x)
	case uint64:
		return b.u64(x)
	case int64:
		return b.u64(uint64(x))
	case float64:
		return b.u64(math.Float64bits(x))
	}
	_, elem, _ := typeOf(v)
	b = b.u32(uint32(elem))
	switch x := v.(type) {
	case []uint8:
		b = b.u64(uint64(len(x)))
		return append(b, x...)
	case []int8:
		return appendSlice(b, x)
	case []uint16:
		return appendSlice(b, x)
	case []int16:
		return appendSlice(b, x)
	case []uint32:
		return appendSlice(b, x)
	case []int32:
		return appendSlice(b, x)
	case []float32:
		return appendSlice(b, x)
	case []bool:
		return appendSlice(b, x)
	case []string:
		return appendSlice(b, x)
	case []uint64:
		return appendSlice(b, x)
	case []int64:
		return appendSlice(b, x)
	case []float64:
		return appendSlice(b, x)
	case []any:
		return appendSlice(b, x)
	}
	panic(fmt.Sprintf("gguf: appendValue called with unchecked %T", v)) // unreachable after checkValue
}

// appendSlice writes an array's count and elements.
func appendSlice[E any](b le, xs []E) le {
	b = b.u64(uint64(len(xs)))
	for _, x := range xs {
		b = appendValue(b, x)
	}
	return b
}
