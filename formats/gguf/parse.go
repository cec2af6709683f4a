package gguf

import (
	"fmt"
	"math"

	problemlist "github.com/gquant/gquant/internal/problems"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// Version is the GGUF version gquant writes. Versions 2 and 3 are read (they differ only in
// that version 3 allows big-endian files, which start with a byte-swapped version).
const Version = 3

// Smallest encodings, used to reject counts that the file cannot hold before allocating:
// a key-value pair (u64 key length, a 1-byte key, i32 type, a 1-byte value) and a tensor info
// (u64 name length, u32 n_dims, i32 type, u64 offset).
const (
	minKVSize     = 8 + 1 + 4 + 1
	minTensorSize = 8 + 4 + 4 + 8
)

// Parse decodes and validates a GGUF file held in data, as llama.cpp's gguf_init_from_file
// does, and also checks that every tensor's data lies within data. name is used in errors.
// The File aliases data: TensorData returns slices of it.
func Parse(data []byte, name string) (*File, error) {
	p := parser{File: &File{Name: name, data: data}, r: reader{data: data}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.File, nil
}

// parser holds the state of one Parse call.
type parser struct {
	*File
	r reader
}

// fail formats the one-line error "<file>: <subject>: <message>".
// The subject, a key or tensor name from the file, is quoted when it is not printable.
func (p *parser) fail(subject string, err error) error {
	return fmt.Errorf("%s: %s: %w", p.Name, problemlist.Printable(subject), err)
}

func (p *parser) failf(subject, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %s", p.Name, problemlist.Printable(subject), fmt.Sprintf(format, args...))
}

func (p *parser) parse() error {
	nTensors, nKV, err := p.header()
	if err != nil {
		return err
	}
	if err := p.metadata(nKV); err != nil {
		return err
	}
	if err := p.alignment(); err != nil {
		return err
	}
	if err := p.tensorInfos(nTensors); err != nil {
		return err
	}
	return p.layout()
}

// header reads the magic, the version and the two counts.
func (p *parser) header() (nTensors, nKV uint64, err error) {
	magic, err := p.r.take(4, "magic")
	if err != nil {
		return 0, 0, p.fail("header", err)
	}
	if string(magic) != Magic {
		return 0, 0, p.failf("header", "bad magic %q, want %q (not a GGUF file)", magic, Magic)
	}
	v, err := p.r.u32("version")
	if err != nil {
		return 0, 0, p.fail("header", err)
	}
	switch {
	case v == 0:
		return 0, 0, p.failf("header", "bad version 0")
	case v&0xFFFF == 0:
		return 0, 0, p.failf("header", "version %#x: big-endian file (byte order differs from this machine)", v)
	case v == 1:
		return 0, 0, p.failf("header", "GGUF version 1 is no longer supported")
	case v > Version:
		return 0, 0, p.failf("header", "GGUF version %d is newer than the supported %d", v, Version)
	}
	p.Version = v
	if nTensors, err = p.r.u64("tensor count"); err != nil {
		return 0, 0, p.fail("header", err)
	}
	if nKV, err = p.r.u64("metadata count"); err != nil {
		return 0, 0, p.fail("header", err)
	}
	left := uint64(p.r.left())
	if nTensors > math.MaxInt64 || nTensors > left/minTensorSize {
		return 0, 0, p.failf("header", "tensor count %d is impossible in a file of %d bytes", int64(nTensors), len(p.data))
	}
	if nKV > math.MaxInt64 || nKV > left/minKVSize || nTensors*minTensorSize+nKV*minKVSize > left {
		return 0, 0, p.failf("header", "metadata count %d is impossible in a file of %d bytes", int64(nKV), len(p.data))
	}
	return nTensors, nKV, nil
}

// metadata reads the key-value pairs.
func (p *parser) metadata(n uint64) error {
	p.KVs = make([]KV, 0, min(n, preallocLimit))
	p.keys = make(map[string]int, min(n, preallocLimit))
	for i := range int(n) {
		key, err := p.r.str("key")
		if err != nil {
			return p.fail(fmt.Sprintf("key #%d", i), err)
		}
		if key == "" {
			return p.failf(fmt.Sprintf("key #%d", i), "empty key")
		}
		if j, dup := p.keys[key]; dup {
			return p.failf(key, "duplicate key (entries #%d and #%d)", j, i)
		}
		t, err := p.r.u32("value type")
		if err != nil {
			return p.fail(key, err)
		}
		if !ValueType(t).known() {
			return p.failf(key, "unknown value type %d", t)
		}
		v, err := p.r.value(ValueType(t), 0)
		if err != nil {
			return p.fail(key, err)
		}
		p.keys[key] = len(p.KVs)
		p.KVs = append(p.KVs, KV{Key: key, Value: v})
	}
	return nil
}

// alignment reads general.alignment, which llama.cpp requires to be a UINT32 power of two.
func (p *parser) alignment() error {
	p.Alignment = DefaultAlignment
	kv, ok := p.Get(KeyAlignment)
	if !ok {
		return nil
	}
	a, ok := kv.Value.(uint32)
	if !ok {
		return p.failf(KeyAlignment, "has type %s, want UINT32", describe(kv.Value))
	}
	if a == 0 || a&(a-1) != 0 {
		return p.failf(KeyAlignment, "alignment %d is not a power of two", a)
	}
	p.Alignment = int(a)
	return nil
}

// tensorInfos reads the tensor descriptions.
func (p *parser) tensorInfos(n uint64) error {
	p.Tensors = make([]TensorInfo, 0, min(n, preallocLimit))
	p.tensors = make(map[string]int, min(n, preallocLimit))
	for i := range int(n) {
		subject := fmt.Sprintf("tensor #%d", i)
		name, err := p.r.str("tensor name")
		if err != nil {
			return p.fail(subject, err)
		}
		if len(name) > MaxNameLen {
			return p.failf(subject, "name of %d bytes is longer than %d", len(name), MaxNameLen)
		}
		if j, dup := p.tensors[name]; dup {
			return p.failf(name, "duplicate tensor name (tensors #%d and #%d)", j, i)
		}
		subject = name
		nDims, err := p.r.u32("n_dims")
		if err != nil {
			return p.fail(subject, err)
		}
		if nDims > MaxDims {
			return p.failf(subject, "%d dimensions, at most %d allowed", nDims, MaxDims)
		}
		shape := make([]uint64, nDims)
		for j := range shape {
			d, err := p.r.u64(fmt.Sprintf("ne[%d]", j))
			if err != nil {
				return p.fail(subject, err)
			}
			if int64(d) < 0 {
				return p.failf(subject, "dimension %d is negative (%d)", j, int64(d))
			}
			shape[j] = d
		}
		t, err := p.r.u32("type")
		if err != nil {
			return p.fail(subject, err)
		}
		typ := Type(t)
		if !typ.Known() {
			return p.failf(subject, "unknown tensor type %d", t)
		}
		size, err := tensorSize(typ, shape)
		if err != nil {
			return p.fail(subject, err)
		}
		off, err := p.r.u64("offset")
		if err != nil {
			return p.fail(subject, err)
		}
		p.tensors[name] = i
		p.Tensors = append(p.Tensors, TensorInfo{Name: name, Type: typ, Shape: shape, Offset: off, Size: size})
	}
	return nil
}

// layout finds the data section and checks that each tensor sits where llama.cpp expects it
// (at the running sum of the earlier tensors' padded sizes) and inside the file.
func (p *parser) layout() error {
	align := uint64(p.Alignment)
	p.DataOffset = uint64(p.r.off)
	if len(p.Tensors) > 0 { // llama.cpp only seeks past the padding when there are tensors
		p.DataOffset, _ = padTo(p.DataOffset, align) // cannot overflow: off < 2^63, align < 2^32
		if p.DataOffset > uint64(len(p.data)) {
			return p.failf("header", "data section at offset %d starts past the end of the file (%d bytes)",
				p.DataOffset, len(p.data))
		}
	}
	avail := uint64(len(p.data)) - p.DataOffset
	var want uint64 // stays ≤ avail + align, so no overflow below
	for _, t := range p.Tensors {
		if t.Offset != want {
			return p.failf(t.Name, "data offset %d, want %d (the padded end of the previous tensor)", t.Offset, want)
		}
		if t.Size > avail || t.Offset > avail-t.Size {
			return p.failf(t.Name, "%d bytes of data at offset %d lie past the end of the file (%d bytes)",
				t.Size, p.DataOffset+t.Offset, len(p.data))
		}
		want, _ = padTo(t.Offset+t.Size, align)
	}
	return nil
}
