package gguf

import (
	"fmt"
	"math"
	"math/bits"
	"os"

	"github.com/gquant/gquant/internal/mapped"
)

// KeyAlignment is the metadata key that sets the data alignment (UINT32, a power of two).
const KeyAlignment = "general.alignment"

// DefaultAlignment is the alignment of tensor data when general.alignment is absent.
const DefaultAlignment = 32

// MaxNameLen is the longest tensor name ggml accepts (GGML_MAX_NAME 64 with the NUL).
const MaxNameLen = 63

// MaxDims is the most dimensions a ggml tensor has.
const MaxDims = 4

// TensorInfo describes one tensor: in a File as read, in a Header as to be written.
type TensorInfo struct {
	Name string
	Type Type
	// Shape is in ggml's ne order: Shape[0] is the row length (the reverse of HF's order).
	Shape []uint64
	// Offset is the position of the data relative to the start of the data section.
	Offset uint64
	// Size is the length of the data in bytes, without padding.
	Size uint64
}

// File is a parsed GGUF file. Tensor data is not copied: TensorData returns slices of the
// mapped file (or of the bytes given to Parse), valid until Close.
type File struct {
	// Name is the path given to Open (or the name given to Parse), used in errors.
	Name    string
	Version uint32
	// KVs holds the metadata in file order.
	KVs     []KV
	Tensors []TensorInfo
	// Alignment is the data alignment (general.alignment, or 32).
	Alignment int
	// DataOffset is the absolute position of the data section in the file.
	DataOffset uint64

	data    []byte
	unmap   func() error
	keys    map[string]int
	tensors map[string]int
}

// Open maps the file at path read-only and parses it. Close releases the mapping.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	defer fd.Close() // the mapping outlives the descriptor
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case st.Size() == 0:
		return nil, fmt.Errorf("%s: header: file is empty", path)
	case st.Size() > math.MaxInt:
		return nil, fmt.Errorf("%s: header: file of %d bytes is too large to map", path, st.Size())
	}
	data, err := mapped.Map(fd, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	unmap := func() error { return mapped.Unmap(data) }
	f, err := Parse(data, path)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// Close releases the file mapping; slices returned by TensorData become invalid.
// Closing twice is harmless.
func (f *File) Close() error {
	f.data = nil
	if f.unmap == nil {
		return nil
	}
	unmap := f.unmap
	f.unmap = nil
	if err := unmap(); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	return nil
}

// Size is the length of the file in bytes (0 after Close).
func (f *File) Size() int64 { return int64(len(f.data)) }

// TensorData returns tensor i's bytes without copying them, or nil when i is out of range or
// the file is closed.
func (f *File) TensorData(i int) []byte {
	if i < 0 || i >= len(f.Tensors) || f.data == nil {
		return nil
	}
	t := f.Tensors[i]
	start := f.DataOffset + t.Offset
	end := start + t.Size
	return f.data[start:end:end]
}

// TensorIndex returns the index of the tensor with the given name.
func (f *File) TensorIndex(name string) (int, bool) {
	i, ok := f.tensors[name]
	return i, ok
}

// ElementCount is the number of elements of a tensor of the given shape (1 for no dimensions).
func ElementCount(shape []uint64) uint64 {
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// elements is ElementCount with overflow detection: ok is false when the count does not fit
// in an int64 (llama.cpp's limit).
func elements(shape []uint64) (n uint64, ok bool) {
	n = 1
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// tensorSize is the byte size of a tensor of type t and the given shape; ok is false when the
// shape does not fit the type's blocks or the size overflows.
func tensorSize(t Type, shape []uint64) (size uint64, err error) {
	n, ok := elements(shape)
	if !ok {
		return 0, fmt.Errorf("shape %v has more than 2^63-1 elements", shape)
	}
	bs := uint64(t.BlockSize())
	ne0 := uint64(1)
	if len(shape) > 0 {
		ne0 = shape[0]
	}
	if ne0%bs != 0 {
		return 0, fmt.Errorf("row length %d is not a multiple of the %s block size %d", ne0, t, bs)
	}
	hi, lo := bits.Mul64(n/bs, uint64(t.TypeSize()))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, fmt.Errorf("shape %v of type %s is more than 2^63-1 bytes", shape, t)
	}
	return lo, nil
}

// padTo rounds n up to a multiple of align (a power of two); ok is false on overflow.
func padTo(n, align uint64) (uint64, bool) {
	p := (n + align - 1) &^ (align - 1)
	return p, p >= n
}
