package gqf

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/internal/atomicfile"
)

// Builder assembles a gqf file in memory: the manifest, and the tensor buffers that
// AddTensor places in the data section.
type Builder struct {
	m      *Manifest
	chunks []chunk
	size   uint64 // bytes of the data section so far
}

type chunk struct {
	off  uint64
	data []byte
}

// NewBuilder starts a file with manifest m (its tensors are added with AddTensor).
func NewBuilder(m *Manifest) *Builder {
	if m.Version == 0 {
		m.Version = ManifestVersion
	}
	return &Builder{m: m}
}

// Manifest returns the manifest being built.
func (b *Builder) Manifest() *Manifest { return b.m }

// place appends data at the next offset aligned to align and returns its buffer (nil for no
// data).
func (b *Builder) place(data []byte, align uint64) *Buffer {
	if data == nil {
		return nil
	}
	off := alignUp(b.size, align)
	b.chunks = append(b.chunks, chunk{off, data})
	b.size = off + uint64(len(data))
	return &Buffer{Offset: off, Size: uint64(len(data))}
}

// AddTensor appends t to the manifest and its buffers to the data section: data at a
// multiple of Alignment, the scales, zeros and block scales (nil when absent) after it at
// multiples of 64. The slices are kept until WriteFile.
func (b *Builder) AddTensor(t *Tensor, data, scales, zeros, blockScales []byte) {
	t.Data = b.place(data, Alignment)
	t.Scales = b.place(scales, subAlignment)
	t.Zeros = b.place(zeros, subAlignment)
	t.BlockScales = b.place(blockScales, subAlignment)
	b.m.Tensors = append(b.m.Tensors, t)
}

// Bytes returns the whole file, after checking the manifest as a reader will.
func (b *Builder) Bytes() ([]byte, error) {
	if err := b.m.validate(b.size); err != nil {
		return nil, err
	}
	return b.bytesUnchecked()
}

// bytesUnchecked renders the file without checking the manifest (tests build malformed
// files with it).
func (b *Builder) bytesUnchecked() ([]byte, error) {
	man, err := proto.MarshalOptions{Deterministic: true}.Marshal(b.m)
	if err != nil {
		return nil, err
	}
	start := alignUp(headerSize+uint64(len(man)), Alignment)
	out := make([]byte, start+b.size)
	copy(out, Magic)
	binary.LittleEndian.PutUint32(out[4:], FormatVersion)
	binary.LittleEndian.PutUint64(out[8:], uint64(len(man)))
	copy(out[headerSize:], man)
	for _, c := range b.chunks {
		copy(out[start+c.off:], c.data)
	}
	return out, nil
}

// WriteFile writes the file to path through a temporary file renamed into place; an existing
// file is replaced only when force is set.
func (b *Builder) WriteFile(path string, force bool) error {
	if err := atomicfile.CheckNew(path, force); err != nil {
		return err
	}
	data, err := b.Bytes()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.WriteFile(path, data)
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }
