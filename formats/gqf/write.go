package gqf

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/internal/atomicfile"
)

// Layout lays tensors out in a data section: Place appends a tensor to the manifest and gives
// its buffers their offsets (data at multiples of Alignment, the scales, zeros and block
// scales after it at multiples of 64). The layout depends on the sizes only, so a writer can
// place every tensor before any byte exists and fill the buffers in any order.
type Layout struct {
	m    *Manifest
	size uint64 // bytes of the data section so far
}

// NewLayout starts a layout for manifest m (its tensors are added with Place).
func NewLayout(m *Manifest) *Layout {
	if m.Version == 0 {
		m.Version = ManifestVersion
	}
	return &Layout{m: m}
}

// place returns the buffer of size bytes at the next offset aligned to align (nil for 0).
func (l *Layout) place(size, align uint64) *Buffer {
	if size == 0 {
		return nil
	}
	off := alignUp(l.size, align)
	l.size = off + size
	return &Buffer{Offset: off, Size: size}
}

// Place appends t to the manifest with buffers of the given sizes (0: none) for its data,
// scales, zeros and block scales.
func (l *Layout) Place(t *Tensor, data, scales, zeros, blockScales uint64) {
	t.Data = l.place(data, Alignment)
	t.Scales = l.place(scales, subAlignment)
	t.Zeros = l.place(zeros, subAlignment)
	t.BlockScales = l.place(blockScales, subAlignment)
	l.m.Tensors = append(l.m.Tensors, t)
}

// header renders the file header of format version 2: magic, version, the manifest's offset
// and length.
func header(manOff, manLen uint64) []byte {
	h := make([]byte, headerSize)
	copy(h, Magic)
	binary.LittleEndian.PutUint32(h[4:], FormatVersion)
	binary.LittleEndian.PutUint64(h[8:], manOff)
	binary.LittleEndian.PutUint64(h[16:], manLen)
	return h
}

// marshal checks m against a data section of size bytes, as a reader will, and encodes it.
func marshal(m *Manifest, size uint64) ([]byte, error) {
	if err := m.validate(size); err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// Writer writes a gqf file in place: the data section first, a buffer at a time in any order
// (WriteAt), then the manifest after it (Flush), so nothing is held in memory and the manifest
// may be completed once the data are written. The file is a temporary one until Commit.
type Writer struct {
	path   string
	f      *atomicfile.File
	l      *Layout
	flushN uint64 // end of the data section when the manifest was last written
	done   bool
}

// Create starts a gqf file at path (a temporary file beside it until Commit) whose tensors are
// laid out in l. The layout must be complete: its data section is sized now.
func Create(path string, l *Layout) (*Writer, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	w := &Writer{path: path, f: f, l: l}
	if err := f.Truncate(int64(dataStart + l.size)); err != nil {
		w.Abort()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// Tensor returns the placed tensor of that name (nil when none).
func (w *Writer) Tensor(name string) *Tensor {
	for _, t := range w.l.m.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// TempPath is the temporary file being written: after Flush it is a complete gqf file that
// Open reads (a converter may run the model it holds before committing).
func (w *Writer) TempPath() string { return w.f.Name() }

// WriteAt writes data at offset off of buffer b (a buffer of a placed tensor).
func (w *Writer) WriteAt(b *Buffer, off uint64, data []byte) error {
	if b == nil || off+uint64(len(data)) > b.Size {
		return fmt.Errorf("%s: write of %d bytes at %d outside a buffer of %d", w.path, len(data), off, b.GetSize())
	}
	if _, err := w.f.WriteAt(data, int64(dataStart+b.Offset+off)); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return nil
}

// Flush checks the manifest as a reader will and writes it after the data section, with the
// header; the manifest may change and be flushed again.
func (w *Writer) Flush() error {
	size := w.l.size
	man, err := marshal(w.l.m, size)
	if err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	off := dataStart + size
	if err := w.f.Truncate(int64(off)); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	if _, err := w.f.WriteAt(man, int64(off)); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	if _, err := w.f.WriteAt(header(off, uint64(len(man))), 0); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return nil
}

// Commit flushes the manifest and renames the file into place.
func (w *Writer) Commit() error {
	if err := w.Flush(); err != nil {
		w.Abort()
		return err
	}
	w.done = true
	return w.f.Commit()
}

// Abort removes the temporary file (nothing happens after Commit).
func (w *Writer) Abort() {
	if !w.done {
		w.done = true
		w.f.Abort()
	}
}

// Builder assembles a small gqf file in memory (tests, tools): tensors with their bytes, then
// Bytes renders the whole file in the layout Writer writes.
type Builder struct {
	l      *Layout
	chunks []chunk
}

type chunk struct {
	off  uint64
	data []byte
}

// NewBuilder starts a file with manifest m (its tensors are added with AddTensor).
func NewBuilder(m *Manifest) *Builder { return &Builder{l: NewLayout(m)} }

// AddTensor appends t with its buffers (nil when absent); the slices are kept until Bytes.
func (b *Builder) AddTensor(t *Tensor, data, scales, zeros, blockScales []byte) {
	b.l.Place(t, uint64(len(data)), uint64(len(scales)), uint64(len(zeros)), uint64(len(blockScales)))
	bufs := t.Buffers()
	for i, d := range [][]byte{data, scales, zeros, blockScales} {
		if buf := bufs[i]; buf != nil {
			b.chunks = append(b.chunks, chunk{buf.Offset, d})
		}
	}
}

// Bytes returns the whole file, after checking the manifest as a reader will.
func (b *Builder) Bytes() ([]byte, error) {
	man, err := marshal(b.l.m, b.l.size)
	if err != nil {
		return nil, err
	}
	return b.render(man), nil
}

// bytesUnchecked renders the file without checking the manifest (tests build malformed
// files with it).
func (b *Builder) bytesUnchecked() ([]byte, error) {
	man, err := proto.MarshalOptions{Deterministic: true}.Marshal(b.l.m)
	if err != nil {
		return nil, err
	}
	return b.render(man), nil
}

func (b *Builder) render(man []byte) []byte {
	off := dataStart + b.l.size
	out := make([]byte, off+uint64(len(man)))
	copy(out, header(off, uint64(len(man))))
	for _, c := range b.chunks {
		copy(out[dataStart+c.off:], c.data)
	}
	copy(out[off:], man)
	return out
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
