package gqf

import (
	"encoding/binary"
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/internal/mapped"
)

// File format constants.
const (
	// Magic starts every gqf file.
	Magic = "GQF\x00"
	// FormatVersion is the version of the container (header and data layout) this package
	// writes: 2 (data section first, manifest after it). Version 1 files (manifest first)
	// are read too.
	FormatVersion = 2
	// ManifestVersion is the version of the manifest schema this package writes and reads.
	ManifestVersion = 1
	// Alignment is the alignment of the data section and of each tensor's data, so that
	// tensors can be used straight from a mapping.
	Alignment = 4096
	// subAlignment aligns a tensor's scales, zeros and block scales.
	subAlignment = 64
	// headerSize is magic + version + manifest offset + manifest length (version 2).
	headerSize = 24
	// headerSizeV1 is magic + version + manifest length (version 1).
	headerSizeV1 = 16
	// dataStart is where the data section of a version 2 file starts.
	dataStart = Alignment
	// maxManifest bounds the manifest length a reader accepts.
	maxManifest = 1 << 30
)

// File is an opened gqf file. Its byte slices are views of the mapping: they are valid until
// Close.
type File struct {
	Path     string
	Manifest *Manifest
	// data is the data section.
	data   []byte
	byName map[string]*Tensor
	unmap  func() error
}

// Open maps and parses a gqf file.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > int64(^uint(0)>>1) {
		return nil, fmt.Errorf("%s: file too large to map", path)
	}
	b, err := mapped.Map(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	unmap := func() error { return mapped.Unmap(b) }
	f, err := Parse(path, b)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// Parse parses a whole gqf file held in b (path names it in errors). Every offset, size,
// encoding and graph reference is checked: a File that parses can be decoded without further
// checks.
func Parse(path string, b []byte) (*File, error) {
	if len(b) < headerSizeV1 {
		return nil, fmt.Errorf("%s: header: %d bytes, want at least %d (truncated or not a gqf file)", path, len(b), headerSizeV1)
	}
	if string(b[:4]) != Magic {
		return nil, fmt.Errorf("%s: magic: %q, want %q (not a gqf file)", path, b[:4], Magic)
	}
	var manBytes, data []byte
	switch v := binary.LittleEndian.Uint32(b[4:]); v {
	case 1:
		n := binary.LittleEndian.Uint64(b[8:])
		if n > maxManifest || n > uint64(len(b)-headerSizeV1) {
			return nil, fmt.Errorf("%s: manifest: length %d runs past the end of the file (%d bytes)", path, n, len(b))
		}
		manBytes = b[headerSizeV1 : headerSizeV1+n]
		if start := alignUp(headerSizeV1+n, Alignment); start <= uint64(len(b)) {
			data = b[start:]
		}
	case 2:
		if len(b) < headerSize {
			return nil, fmt.Errorf("%s: header: %d bytes, want %d (truncated)", path, len(b), headerSize)
		}
		off, n := binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
		if off < dataStart || off > uint64(len(b)) || n > maxManifest || n > uint64(len(b))-off {
			return nil, fmt.Errorf("%s: manifest: bytes [%d, +%d) do not lie after the data section inside the file (%d bytes)", path, off, n, len(b))
		}
		manBytes, data = b[off:off+n], b[dataStart:off]
	default:
		return nil, fmt.Errorf("%s: version: %d is not supported (want 1 or %d)", path, v, FormatVersion)
	}
	m := &Manifest{}
	if err := proto.Unmarshal(manBytes, m); err != nil {
		return nil, fmt.Errorf("%s: manifest: %v", path, err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("%s: manifest: version %d is not supported (want %d)", path, m.Version, ManifestVersion)
	}
	if err := m.validate(uint64(len(data))); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &File{Path: path, Manifest: m, data: data, byName: map[string]*Tensor{}}
	for _, t := range m.Tensors {
		f.byName[t.Name] = t
	}
	return f, nil
}

// Close releases the mapping.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap = nil
	return err
}

// Tensor returns the tensor of that name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	t, ok := f.byName[name]
	return t, ok
}

// Buffers returns a tensor's buffers: data, scales, zeros and block scales (nil when absent).
func (t *Tensor) Buffers() [4]*Buffer { return [4]*Buffer{t.Data, t.Scales, t.Zeros, t.BlockScales} }

// Release tells the system that the mapped bytes of t are no longer needed in memory (the
// runtime copied them into its kernels' layout): their pages leave the process's resident
// set and are read from the file again if touched.
func (f *File) Release(t *Tensor) {
	if f.unmap == nil {
		return // parsed from memory: nothing mapped
	}
	for _, b := range t.Buffers() {
		mapped.Release(f.Bytes(b))
	}
}

// Bytes returns the bytes of a buffer (nil for a nil buffer); the buffer must belong to a
// tensor of f (Parse checked it).
func (f *File) Bytes(buf *Buffer) []byte {
	if buf == nil {
		return nil
	}
	return f.data[buf.Offset : buf.Offset+buf.Size]
}
