package gguf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	problemlist "github.com/gquant/gquant/internal/problems"
)

// Header is everything a writer needs before any tensor data: the metadata, the tensors'
// names, types and shapes, and the alignment. Layout fills in each tensor's Offset and Size.
type Header struct {
	// KVs is written sorted by key (bytewise), whatever the order here, so that the same
	// header always gives the same bytes. Keys must be unique.
	KVs []KV
	// Tensors is written in this order; only Name, Type and Shape are read.
	Tensors []TensorInfo
	// Alignment of the tensor data: 0 means general.alignment from KVs, or 32 when absent.
	// When it is not 32, general.alignment is written even if KVs lacks it.
	Alignment int
}

// maxProblems caps the number of problems one error lists.
const maxProblems = 10

// problems collects the problems one check finds, to be joined with "; ".
type problems []string

func (ps *problems) add(format string, args ...any) { *ps = append(*ps, fmt.Sprintf(format, args...)) }

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return errors.New(problemlist.Join(ps, maxProblems))
}

// Layout validates the header and fills in each tensor's Size and Offset (the running sum of
// the earlier tensors' sizes, each rounded up to the alignment, which is where llama.cpp
// requires them) and the Alignment. It checks that keys are non-empty and unique and values
// are GGUF values, and that tensor names are non-empty, unique and at most 63 bytes, types are
// known and shapes have 1 to 4 dimensions with a row length that is a multiple of the block
// size. All problems are reported in one error, "<tensor or key>: <problem>; ...", without a
// file name (Create adds it).
func (h *Header) Layout() error {
	var ps problems
	align := h.resolveAlignment(&ps)
	seen := make(map[string]bool, len(h.KVs))
	for i, kv := range h.KVs {
		switch {
		case kv.Key == "":
			ps.add("key #%d: empty key", i)
		case seen[kv.Key]:
			ps.add("%s: duplicate key", problemlist.Printable(kv.Key))
		}
		seen[kv.Key] = true
		if err := checkValue(kv.Value, 0); err != nil {
			ps.add("%s: %v", problemlist.Printable(kv.Key), err)
		}
	}
	names := make(map[string]bool, len(h.Tensors))
	var off uint64
	for i := range h.Tensors {
		t := &h.Tensors[i]
		subject := problemlist.Printable(t.Name)
		switch {
		case t.Name == "":
			subject = fmt.Sprintf("tensor #%d", i)
			ps.add("%s: empty name", subject)
		case len(t.Name) > MaxNameLen:
			ps.add("%s: name of %d bytes is longer than %d", subject, len(t.Name), MaxNameLen)
		case names[t.Name]:
			ps.add("%s: duplicate tensor name", subject)
		}
		names[t.Name] = true
		if !t.Type.Known() {
			ps.add("%s: unknown tensor type %d", subject, uint32(t.Type))
			continue
		}
		if len(t.Shape) == 0 || len(t.Shape) > MaxDims {
			ps.add("%s: shape %v has %d dimensions, want 1 to %d", subject, t.Shape, len(t.Shape), MaxDims)
			continue
		}
		if slices.ContainsFunc(t.Shape, func(d uint64) bool { return d > math.MaxInt64 }) {
			ps.add("%s: shape %v has a dimension above 2^63-1", subject, t.Shape)
			continue
		}
		size, err := tensorSize(t.Type, t.Shape)
		if err != nil {
			ps.add("%s: %v", subject, err)
			continue
		}
		t.Size, t.Offset = size, off
		next, ok := padTo(off+size, align)
		if !ok || off+size < off || next > math.MaxInt64 {
			ps.add("%s: data ends past 2^63-1 bytes", subject)
			continue
		}
		off = next
	}
	if err := ps.err(); err != nil {
		return err
	}
	h.Alignment = int(align)
	return nil
}

// resolveAlignment reconciles h.Alignment with general.alignment in KVs; on a problem it
// records it and returns the default.
func (h *Header) resolveAlignment(ps *problems) uint64 {
	var fromKV uint64
	present := false
	for _, kv := range h.KVs {
		if kv.Key != KeyAlignment || present {
			continue
		}
		present = true
		a, ok := kv.Value.(uint32)
		if !ok {
			ps.add("%s: has type %s, want UINT32", KeyAlignment, describe(kv.Value))
			return DefaultAlignment
		}
		if a == 0 || a&(a-1) != 0 {
			ps.add("%s: alignment %d is not a power of two", KeyAlignment, a)
			return DefaultAlignment
		}
		fromKV = uint64(a)
	}
	if h.Alignment < 0 || uint64(h.Alignment) > math.MaxUint32 {
		ps.add("%s: Header.Alignment %d does not fit in a UINT32", KeyAlignment, h.Alignment)
		return DefaultAlignment
	}
	a := uint64(h.Alignment)
	switch {
	case a == 0 && present:
		return fromKV
	case a == 0:
		return DefaultAlignment
	case present && a != fromKV:
		ps.add("%s: is %d but Header.Alignment is %d", KeyAlignment, fromKV, a)
		return DefaultAlignment
	case a&(a-1) != 0:
		ps.add("%s: Header.Alignment %d is not a power of two", KeyAlignment, a)
		return DefaultAlignment
	}
	return a
}

// hasKey reports whether some entry has the key.
func hasKey(kvs []KV, key string) bool {
	return slices.ContainsFunc(kvs, func(kv KV) bool { return kv.Key == key })
}

// sortedKVs returns the entries to write: the header's, plus general.alignment when the
// alignment is not the default and KVs lacks it, sorted by key.
func (h *Header) sortedKVs() []KV {
	kvs := slices.Clone(h.KVs)
	if h.Alignment != DefaultAlignment && !hasKey(kvs, KeyAlignment) {
		kvs = append(kvs, KV{Key: KeyAlignment, Value: uint32(h.Alignment)})
	}
	slices.SortStableFunc(kvs, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	return kvs
}

// encode returns the bytes before the data section (magic, version, counts, metadata, tensor
// infos, zero padding to the alignment) and the total file size. h must have passed Layout.
func (h *Header) encode() (hdr []byte, total uint64) {
	kvs := h.sortedKVs()
	b := le(make([]byte, 0, 4096))
	b = append(b, Magic...)
	b = b.u32(Version)
	b = b.u64(uint64(len(h.Tensors)))
	b = b.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		b = appendKV(b, kv)
	}
	for _, t := range h.Tensors {
		b = b.str(t.Name)
		b = b.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			b = b.u64(d)
		}
		b = b.u32(uint32(t.Type))
		b = b.u64(t.Offset)
	}
	align := uint64(h.Alignment)
	n, _ := padTo(uint64(len(b)), align)
	b = append(b, make([]byte, n-uint64(len(b)))...)
	total = n
	if k := len(h.Tensors); k > 0 {
		end, _ := padTo(h.Tensors[k-1].Offset+h.Tensors[k-1].Size, align)
		total += end
	}
	return b, total
}
