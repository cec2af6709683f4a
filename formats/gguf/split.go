package gguf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	problemlist "github.com/gquant/gquant/internal/problems"
)

// Split metadata keys, as llama.cpp's gguf-split and llama-quantize --keep-split write them
// (src/llama-arch.cpp): the 0-based part number and the part count as UINT16, and the total
// tensor count of all parts as INT32.
const (
	KeySplitNo           = "split.no"
	KeySplitCount        = "split.count"
	KeySplitTensorsCount = "split.tensors.count"
)

// splitSuffix is llama.cpp's split file name suffix (llama_split_path: "%s-%05d-of-%05d.gguf").
const splitSuffix = "-%05d-of-%05d.gguf"

// SplitName is the name of part i (0-based) of n: "<prefix>-00001-of-00003.gguf", where prefix
// is path without a trailing ".gguf", as gguf-py names shards.
func SplitName(path string, i, n int) string {
	return strings.TrimSuffix(path, ".gguf") + fmt.Sprintf(splitSuffix, i+1, n)
}

// SplitHeaders divides h into parts whose tensor data (each tensor padded to the alignment,
// metadata not counted, as gguf-split counts) is at most maxBytes; tensors are kept whole and
// in order, and a tensor larger than maxBytes gets a part of its own. The first part holds all
// the metadata, the others only the split keys (and general.alignment when it is not the
// default); every part gets split.no, split.count and split.tensors.count. Split keys already
// in h are dropped. When everything fits in one part, the result is one header without split
// keys, to be written to the path itself (as llama-quantize does); otherwise part i goes to
// SplitName(path, i, n). h is laid out first; the returned headers are laid out too.
func SplitHeaders(h *Header, maxBytes int64) ([]*Header, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("split: maximum part size %d is not positive", maxBytes)
	}
	if err := h.Layout(); err != nil {
		return nil, err
	}
	meta := slices.DeleteFunc(slices.Clone(h.KVs), func(kv KV) bool {
		return kv.Key == KeySplitNo || kv.Key == KeySplitCount || kv.Key == KeySplitTensorsCount
	})
	// Group the tensors greedily, as gguf-split --split-max-size does.
	var groups [][]TensorInfo
	var used uint64
	for _, t := range h.Tensors {
		t.Offset, t.Size = 0, 0 // recomputed by each part's Layout
		size, _ := tensorSize(t.Type, t.Shape)
		padded, _ := padTo(size, uint64(h.Alignment))
		if len(groups) == 0 || used+padded > uint64(maxBytes) {
			groups = append(groups, nil)
			used = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], t)
		used += padded
	}
	if len(groups) <= 1 {
		return []*Header{{KVs: meta, Tensors: slices.Clone(h.Tensors), Alignment: h.Alignment}}, nil
	}
	n := len(groups)
	if n > math.MaxUint16 {
		return nil, fmt.Errorf("split: %d parts, at most %d allowed", n, math.MaxUint16)
	}
	if len(h.Tensors) > math.MaxInt32 {
		return nil, fmt.Errorf("split: %d tensors, at most %d allowed", len(h.Tensors), math.MaxInt32)
	}
	out := make([]*Header, n)
	for i, g := range groups {
		var kvs []KV
		if i == 0 {
			kvs = slices.Clone(meta)
		} else if kv, ok := findKV(meta, KeyAlignment); ok {
			kvs = []KV{kv}
		}
		kvs = append(kvs,
			KV{KeySplitNo, uint16(i)},
			KV{KeySplitCount, uint16(n)},
			KV{KeySplitTensorsCount, int32(len(h.Tensors))})
		out[i] = &Header{KVs: kvs, Tensors: g, Alignment: h.Alignment}
		if err := out[i].Layout(); err != nil {
			return nil, fmt.Errorf("split part %d: %w", i, err)
		}
	}
	return out, nil
}

// findKV returns the entry with the given key.
func findKV(kvs []KV, key string) (KV, bool) {
	i := slices.IndexFunc(kvs, func(kv KV) bool { return kv.Key == key })
	if i < 0 {
		return KV{}, false
	}
	return kvs[i], true
}

// SplitFile is a model stored in one file or in llama.cpp-style split parts. The embedded
// File is the first part: its metadata (Get, String, Uint32, ...) is the model's. Tensors and
// TensorData shadow the first part's and cover all parts.
type SplitFile struct {
	*File
	// Parts are the open parts, Parts[0] == File.
	Parts []*File
	// Tensors lists the tensors of all parts, part by part, in file order.
	Tensors []SplitTensor

	index map[string]int
}

// SplitTensor is a tensor of a SplitFile and where it lives.
type SplitTensor struct {
	TensorInfo
	// Part is the index in Parts; Index is the tensor's index within that part.
	Part, Index int
}

// OpenSplit opens a GGUF model given its only file or its first part
// ("<prefix>-00001-of-NNNNN.gguf"), and then all other parts, as llama.cpp's loader does: each
// part must carry split.no equal to its position and the same split.count, tensor names must be
// unique across parts, and the total must equal split.tensors.count.
func OpenSplit(path string) (*SplitFile, error) {
	first, err := Open(path)
	if err != nil {
		return nil, err
	}
	s := &SplitFile{File: first, Parts: []*File{first}}
	if err := s.openParts(path); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.buildIndex(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openParts opens the parts after the first, if split.count says there are any.
func (s *SplitFile) openParts(path string) error {
	n, err := s.Uint16(KeySplitCount)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if n <= 1 {
		return nil
	}
	no, err := s.Uint16(KeySplitNo)
	if err != nil {
		return err
	}
	if no != 0 {
		return fmt.Errorf("%s: %s: is %d: open the first part of the %d", path, KeySplitNo, no, n)
	}
	suffix := fmt.Sprintf(splitSuffix, 1, n)
	prefix, ok := strings.CutSuffix(path, suffix)
	if !ok || prefix == "" {
		return fmt.Errorf("%s: %s: file name of a first part must end in %q", path, KeySplitCount, suffix)
	}
	for i := 1; i < int(n); i++ {
		name := prefix + fmt.Sprintf(splitSuffix, i+1, n)
		part, err := Open(name)
		if err != nil {
			return err
		}
		s.Parts = append(s.Parts, part)
		if no, err := part.Uint16(KeySplitNo); err != nil {
			return err
		} else if int(no) != i {
			return fmt.Errorf("%s: %s: is %d, want %d", name, KeySplitNo, no, i)
		}
		if c, err := part.Uint16(KeySplitCount); err != nil {
			return err
		} else if c != n {
			return fmt.Errorf("%s: %s: is %d, but the first part says %d", name, KeySplitCount, c, n)
		}
	}
	return nil
}

// buildIndex lists the tensors of all parts and checks them against split.tensors.count.
func (s *SplitFile) buildIndex() error {
	s.index = make(map[string]int)
	for p, f := range s.Parts {
		for i, t := range f.Tensors {
			if j, dup := s.index[t.Name]; dup {
				return fmt.Errorf("%s: %s: duplicate tensor, also in %s", f.Name, problemlist.Printable(t.Name), s.Parts[s.Tensors[j].Part].Name)
			}
			s.index[t.Name] = len(s.Tensors)
			s.Tensors = append(s.Tensors, SplitTensor{TensorInfo: t, Part: p, Index: i})
		}
	}
	if len(s.Parts) == 1 {
		return nil
	}
	want, err := s.Int32(KeySplitTensorsCount)
	if err != nil {
		return err
	}
	if int(want) != len(s.Tensors) {
		return fmt.Errorf("%s: %s: is %d, but the %d parts hold %d tensors",
			s.File.Name, KeySplitTensorsCount, want, len(s.Parts), len(s.Tensors))
	}
	return nil
}

// TensorData returns the bytes of tensor i of s.Tensors, without copying; nil when i is out
// of range or the file is closed.
func (s *SplitFile) TensorData(i int) []byte {
	if i < 0 || i >= len(s.Tensors) {
		return nil
	}
	t := s.Tensors[i]
	return s.Parts[t.Part].TensorData(t.Index)
}

// TensorIndex returns the index in s.Tensors of the tensor with the given name.
func (s *SplitFile) TensorIndex(name string) (int, bool) {
	i, ok := s.index[name]
	return i, ok
}

// Close closes every part.
func (s *SplitFile) Close() error {
	var ps problems
	for _, f := range s.Parts {
		if err := f.Close(); err != nil {
			ps.add("%v", err)
		}
	}
	return ps.err()
}
