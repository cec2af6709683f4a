package imatrix

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/internal/atomicfile"
)

// WriteGGUF writes m in the GGUF format that llama-imatrix writes and llama-quantize --imatrix
// reads: general.type "imatrix", imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size,
// then per weight in name order "<weight>.in_sum2" F32 [RowLen, Matrices] and "<weight>.counts"
// F32 [1, Matrices] (trailing 1s dropped, as ggml does), followed by "<weight>.in_sum" when Sum
// is set. The tensor data is
// llama.cpp's; the metadata is in key order (gquant's GGUF writer sorts keys), so the file is
// not byte-identical to llama-imatrix's, whose keys come in insertion order.
//
// A legacy matrix is written as it is (sums (Σx²/count)·ncall with counts ncall), which keeps
// Importance exact; llama-imatrix --in-file would instead multiply both by its chunk size.
func WriteGGUF(path string, m *Matrix) error {
	if err := m.Validate(path); err != nil {
		return err
	}
	entries := sortedEntries(m)
	h := &gguf.Header{KVs: []gguf.KV{
		{Key: KeyType, Value: TypeImatrix},
		{Key: KeyDatasets, Value: append([]string{}, m.Datasets...)},
		{Key: KeyChunkCount, Value: uint32(m.ChunkCount)},
		{Key: KeyChunkSize, Value: uint32(m.ChunkSize)},
	}}
	var data [][]byte
	for _, e := range entries {
		n, nmat := uint64(e.RowLen()), uint64(e.Matrices())
		counts := make([]float32, nmat)
		for j, c := range e.Counts {
			counts[j] = float32(c)
		}
		h.Tensors = append(h.Tensors,
			gguf.TensorInfo{Name: e.Name + SuffixSum2, Type: gguf.F32, Shape: ggmlShape(n, nmat)},
			gguf.TensorInfo{Name: e.Name + SuffixCounts, Type: gguf.F32, Shape: ggmlShape(1, nmat)})
		data = append(data, floatBytes(e.Sum2), floatBytes(counts))
		if e.Sum != nil {
			h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: e.Name + SuffixSum, Type: gguf.F32, Shape: ggmlShape(n, nmat)})
			data = append(data, floatBytes(e.Sum))
		}
	}
	return gguf.WriteFile(path, h, func(i int) ([]byte, error) { return data[i], nil })
}

// WriteDat writes m in the legacy format, as save_imatrix_legacy does: entries in name order,
// skipping those whose counts are all zero; per entry ncall = ⌈max count / ChunkSize⌉ and the
// values (Σx²/count)·ncall in float32 (a matrix with count 0 stores ncall); then the chunk
// count and the last dataset name. Per-expert counts and Σx are lost. A matrix read from a
// legacy file is written back unchanged. A GGUF-born matrix needs ChunkSize > 0.
func WriteDat(path string, m *Matrix) error {
	if err := m.Validate(path); err != nil {
		return err
	}
	if !m.Legacy && m.ChunkSize <= 0 {
		return fmt.Errorf("%s: %s: is 0; the legacy format needs it to compute ncall", path, KeyChunkSize)
	}
	var buf []byte
	put := func(v int32) { buf = binary.LittleEndian.AppendUint32(buf, uint32(v)) }
	var kept []*Entry
	for _, e := range sortedEntries(m) {
		for _, c := range e.Counts {
			if c != 0 || m.Legacy {
				kept = append(kept, e)
				break
			}
		}
	}
	if len(kept) == 0 {
		return fmt.Errorf("%s: entries: every entry has zero counts; nothing to write", path)
	}
	put(int32(len(kept)))
	for _, e := range kept {
		put(int32(len(e.Name)))
		buf = append(buf, e.Name...)
		ncall, vals, err := legacyValues(e, m)
		if err != nil {
			return fmt.Errorf("%s: %s: %v", path, e.Name, err)
		}
		put(ncall)
		put(int32(len(vals)))
		buf = append(buf, floatBytes(vals)...)
	}
	put(int32(m.ChunkCount))
	var dataset string
	if len(m.Datasets) > 0 {
		dataset = m.Datasets[len(m.Datasets)-1]
	}
	put(int32(len(dataset)))
	buf = append(buf, dataset...)
	return atomicfile.WriteFile(path, buf)
}

// legacyValues computes an entry's ncall and stored values for the legacy format.
func legacyValues(e *Entry, m *Matrix) (int32, []float32, error) {
	if m.Legacy {
		if len(e.Counts) != 1 {
			return 0, nil, fmt.Errorf("a legacy entry has %d counts, want 1", len(e.Counts))
		}
		return int32(e.Counts[0]), e.Sum2, nil
	}
	var maxc int64
	for _, c := range e.Counts {
		maxc = max(maxc, c)
	}
	cs := int64(m.ChunkSize)
	nc := (maxc + cs - 1) / cs // ceiling division, "to avoid accidental zeros"
	if nc > math.MaxInt32 {
		return 0, nil, fmt.Errorf("ncall %d does not fit in int32", nc)
	}
	ncall := float32(nc)
	n := e.RowLen()
	vals := make([]float32, len(e.Sum2))
	for i, v := range e.Sum2 {
		count := float32(e.Counts[i/n])
		if count == 0 { // partial data: store 1
			v, count = 1, 1
		}
		vals[i] = (v / count) * ncall
	}
	return int32(nc), vals, nil
}

// ggmlShape is the shape ggml records for a 2-D tensor [ne0, ne1]: trailing dimensions of 1
// are dropped (gguf_add_tensor writes ggml_n_dims), so [64, 1] is written as [64].
func ggmlShape(ne0, ne1 uint64) []uint64 {
	if ne1 == 1 {
		return []uint64{ne0}
	}
	return []uint64{ne0, ne1}
}

// sortedEntries returns pointers to m's entries in name order without reordering m.
func sortedEntries(m *Matrix) []*Entry {
	es := make([]*Entry, len(m.Entries))
	for i := range m.Entries {
		es[i] = &m.Entries[i]
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return es
}

// floatBytes encodes v as little-endian float32.
func floatBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
