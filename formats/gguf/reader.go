package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// reader decodes little-endian fields from a byte slice and refuses to read, or to allocate
// for, more than the bytes that are left.
type reader struct {
	data []byte
	off  int
}

// left is the number of unread bytes.
func (r *reader) left() int { return len(r.data) - r.off }

// take returns the next n bytes, or an error naming what was being read.
func (r *reader) take(n uint64, what string) ([]byte, error) {
	if n > uint64(r.left()) {
		return nil, fmt.Errorf("truncated: %s at offset %d needs %d bytes, %d left", what, r.off, n, r.left())
	}
	b := r.data[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) u8(what string) (uint8, error) {
	b, err := r.take(1, what)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (r *reader) u16(what string) (uint16, error) {
	b, err := r.take(2, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64(what string) (uint64, error) {
	b, err := r.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a u64 length and that many bytes, copied into a Go string.
func (r *reader) str(what string) (string, error) {
	n, err := r.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(r.left()) {
		return "", fmt.Errorf("%s length %d at offset %d exceeds the %d bytes left", what, n, r.off-8, r.left())
	}
	b, _ := r.take(n, what)
	return string(b), nil
}

// maxArrayElements is llama.cpp's GGUF_MAX_ARRAY_ELEMENTS.
const maxArrayElements = 1 << 30

// value reads one value of type t (not its type tag). depth counts enclosing arrays.
func (r *reader) value(t ValueType, depth int) (any, error) {
	switch t {
	case TypeUint8:
		return r.u8("UINT8 value")
	case TypeInt8:
		v, err := r.u8("INT8 value")
		return int8(v), err
	case TypeUint16:
		return r.u16("UINT16 value")
	case TypeInt16:
		v, err := r.u16("INT16 value")
		return int16(v), err
	case TypeUint32:
		return r.u32("UINT32 value")
	case TypeInt32:
		v, err := r.u32("INT32 value")
		return int32(v), err
	case TypeFloat32:
		v, err := r.u32("FLOAT32 value")
		return math.Float32frombits(v), err
	case TypeBool:
		v, err := r.u8("BOOL value")
		return v != 0, err // llama.cpp: any non-zero byte is true
	case TypeString:
		return r.str("string")
	case TypeUint64:
		return r.u64("UINT64 value")
	case TypeInt64:
		v, err := r.u64("INT64 value")
		return int64(v), err
	case TypeFloat64:
		v, err := r.u64("FLOAT64 value")
		return math.Float64frombits(v), err
	case TypeArray:
		return r.array(depth)
	}
	return nil, fmt.Errorf("unknown value type %d", uint32(t))
}

// array reads an element type, a u64 count and the elements. It checks that the count fits
// in the bytes left before it allocates anything.
func (r *reader) array(depth int) (any, error) {
	et, err := r.u32("array element type")
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	if !elem.known() {
		return nil, fmt.Errorf("array has unknown element type %d", et)
	}
	n, err := r.u64("array length")
	if err != nil {
		return nil, err
	}
	if n > maxArrayElements {
		return nil, fmt.Errorf("array of %d elements exceeds the limit of %d", n, maxArrayElements)
	}
	// The smallest encoding of one element: a scalar's size, a string's length prefix, an
	// inner array's element type and count.
	minSize := uint64(elem.scalarSize())
	switch elem {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 12
		if depth+1 >= maxNesting {
			return nil, fmt.Errorf("arrays nested deeper than %d levels", maxNesting)
		}
	}
	if n > uint64(r.left())/minSize {
		return nil, fmt.Errorf("array of %d %s elements at offset %d does not fit in the %d bytes left",
			n, elem.name(), r.off, r.left())
	}
	switch elem {
	case TypeUint8:
		b, _ := r.take(n, "")
		return append([]uint8{}, b...), nil
	case TypeInt8:
		return fixed(r, n, 1, func(b []byte) int8 { return int8(b[0]) }), nil
	case TypeUint16:
		return fixed(r, n, 2, binary.LittleEndian.Uint16), nil
	case TypeInt16:
		return fixed(r, n, 2, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) }), nil
	case TypeUint32:
		return fixed(r, n, 4, binary.LittleEndian.Uint32), nil
	case TypeInt32:
		return fixed(r, n, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) }), nil
	case TypeFloat32:
		return fixed(r, n, 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }), nil
	case TypeBool:
		return fixed(r, n, 1, func(b []byte) bool { return b[0] != 0 }), nil
	case TypeUint64:
		return fixed(r, n, 8, binary.LittleEndian.Uint64), nil
	case TypeInt64:
		return fixed(r, n, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }), nil
	case TypeFloat64:
		return fixed(r, n, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }), nil
	case TypeString:
		// A string takes 16 bytes in memory and may take 8 in the file: grow as strings are
		// read rather than trusting the count.
		out := make([]string, 0, min(n, preallocLimit))
		for i := range n {
			s, err := r.str(fmt.Sprintf("string %d of array", i))
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	out := make([]any, 0, min(n, preallocLimit)) // elem == TypeArray
	for i := range n {
		v, err := r.array(depth + 1)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// preallocLimit caps the capacity reserved from a count read from the file when the Go
// representation is larger than the encoding; beyond it, slices grow as elements are read.
const preallocLimit = 1 << 12

// fixed decodes n fixed-size elements; the caller has checked that n*size bytes are left.
func fixed[E any](r *reader, n uint64, size int, dec func([]byte) E) []E {
	out := make([]E, n)
	b, _ := r.take(n*uint64(size), "")
	for i := range out {
		out[i] = dec(b[i*size:])
	}
	return out
}
