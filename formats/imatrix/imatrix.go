// Package imatrix reads and writes llama.cpp's importance-matrix files: the GGUF format that
// llama-imatrix writes by default (tools/imatrix/imatrix.cpp save_imatrix) and the legacy
// binary .dat format (save_imatrix_legacy). Both are read by common/imatrix-loader.cpp
// common_imatrix_load, which llama-quantize uses; this package follows that loader.
//
// An importance matrix holds, for each weight matrix W (ggml shape [n_per_row, rows] or, for
// MoE expert stacks, [n_per_row, rows, n_mat]), the per-input-column sum of squared activations
// Σx² over the calibration tokens and the number of activation rows summed (per expert). The
// quantizers receive the mean, Σx²/count (see Matrix.Importance).
package imatrix

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Metadata keys of the GGUF format (common/imatrix-loader.h).
const (
	KeyType       = "general.type"
	KeyDatasets   = "imatrix.datasets"
	KeyChunkCount = "imatrix.chunk_count"
	KeyChunkSize  = "imatrix.chunk_size"
	// TypeImatrix is the value of general.type in an imatrix GGUF.
	TypeImatrix = "imatrix"
)

// Tensor name suffixes of the GGUF format: "<weight>.in_sum2" holds Σx², F32 with ggml shape
// [n_per_row, n_mat]; "<weight>.counts" the activation rows per matrix, F32 [1, n_mat]; and the
// optional "<weight>.in_sum" Σx, shaped like in_sum2 (not written by llama.cpp 34af94cd, whose
// loader ignores it).
const (
	SuffixSum2   = ".in_sum2"
	SuffixCounts = ".counts"
	SuffixSum    = ".in_sum"
)

// Entry is the statistics of one weight matrix (or one stack of n_mat expert matrices).
type Entry struct {
	// Name is the weight's GGUF tensor name, e.g. "blk.0.attn_q.weight".
	Name string
	// Sum2 is Σx² per input column, matrix after matrix: len = RowLen()·len(Counts).
	// In an entry read from a legacy .dat file it holds what that file stores, (Σx²/count)·ncall.
	Sum2 []float32
	// Sum is Σx per input column, shaped like Sum2; nil when not collected.
	Sum []float32
	// Counts is the number of activation rows summed into each matrix (one per expert; one for
	// a dense weight). For a legacy .dat entry it is {ncall}, the number of chunks.
	Counts []int64
}

// Matrices is the number of matrices (experts) the entry covers.
func (e *Entry) Matrices() int { return len(e.Counts) }

// RowLen is the number of input columns per matrix (the weight's n_per_row).
func (e *Entry) RowLen() int {
	if len(e.Counts) == 0 {
		return 0
	}
	return len(e.Sum2) / len(e.Counts)
}

// Matrix is the content of one importance-matrix file.
type Matrix struct {
	// Entries is sorted by Name (the order llama.cpp writes them); names are unique.
	Entries []Entry
	// Datasets names the calibration text files (GGUF imatrix.datasets; the single dataset
	// name of a legacy trailer).
	Datasets []string
	// ChunkCount is the number of chunks (of ChunkSize tokens) the statistics were computed on.
	ChunkCount int
	// ChunkSize is the number of tokens per chunk (n_ctx / n_parallel); 0 when unknown, as in
	// a legacy file.
	ChunkSize int
	// Legacy is set for a matrix read from a .dat file: Sum2 holds (Σx²/count)·ncall and
	// Counts {ncall}, so that Sum2/Counts is still the mean, but raw sums are lost.
	Legacy bool
}

// Sort orders the entries by name, as the files store them.
func (m *Matrix) Sort() {
	sort.Slice(m.Entries, func(i, j int) bool { return m.Entries[i].Name < m.Entries[j].Name })
}

// Entry returns the entry of the named weight, or nil.
func (m *Matrix) Entry(weight string) *Entry {
	i := sort.Search(len(m.Entries), func(i int) bool { return m.Entries[i].Name >= weight })
	if i < len(m.Entries) && m.Entries[i].Name == weight {
		return &m.Entries[i]
	}
	// Tolerate an unsorted Entries built by hand.
	for i := range m.Entries {
		if m.Entries[i].Name == weight {
			return &m.Entries[i]
		}
	}
	return nil
}

// Importance returns what llama-quantize passes to ggml_quantize_chunk for the named weight
// (tools/quantize/quantize.cpp load_imatrix): per matrix, Sum2[i] / float32(count) in float32,
// all matrices concatenated (RowLen()·Matrices() values); a matrix with count 0 gets 1 for every
// column in a GGUF file, and its stored values in a legacy one. It returns nil when the weight
// has no entry.
func (m *Matrix) Importance(weight string) []float32 {
	e := m.Entry(weight)
	if e == nil || len(e.Counts) == 0 {
		return nil
	}
	n := e.RowLen()
	out := make([]float32, n*len(e.Counts))
	for j, c := range e.Counts {
		src, dst := e.Sum2[j*n:(j+1)*n], out[j*n:(j+1)*n]
		switch {
		case c > 0:
			fc := float32(c)
			for i, v := range src {
				dst[i] = v / fc
			}
		case m.Legacy:
			copy(dst, src)
		default:
			for i := range dst {
				dst[i] = 1
			}
		}
	}
	return out
}

// Validate checks the matrix as the writers and readers need it, naming file (used only in
// messages) and the offending entry; all problems are joined in one error.
func (m *Matrix) Validate(file string) error {
	var probs []string
	add := func(name, format string, args ...any) {
		probs = append(probs, printable(name)+": "+fmt.Sprintf(format, args...))
	}
	if len(m.Entries) == 0 {
		add("entries", "no entries")
	}
	if m.ChunkCount < 0 || m.ChunkCount > math.MaxInt32 {
		add(KeyChunkCount, "%d out of range", m.ChunkCount)
	}
	if m.ChunkSize < 0 || m.ChunkSize > math.MaxInt32 {
		add(KeyChunkSize, "%d out of range", m.ChunkSize)
	}
	seen := make(map[string]bool, len(m.Entries))
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Name == "" {
			add(fmt.Sprintf("entry %d", i), "empty name")
			continue
		}
		if seen[e.Name] {
			add(e.Name, "listed twice")
		}
		seen[e.Name] = true
		if p := e.check(); p != "" {
			add(e.Name, "%s", p)
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %s", file, strings.Join(probs, "; "))
	}
	return nil
}

// check returns what is wrong with the entry's shapes and values, or "".
func (e *Entry) check() string {
	var p []string
	switch {
	case len(e.Counts) == 0:
		p = append(p, "no counts")
	case len(e.Sum2) == 0:
		p = append(p, "no in_sum2 values")
	case len(e.Sum2)%len(e.Counts) != 0:
		p = append(p, fmt.Sprintf("%d in_sum2 values do not divide into %d matrices", len(e.Sum2), len(e.Counts)))
	}
	if e.Sum != nil && len(e.Sum) != len(e.Sum2) {
		p = append(p, fmt.Sprintf("in_sum has %d values, in_sum2 %d", len(e.Sum), len(e.Sum2)))
	}
	for j, c := range e.Counts {
		if c < 0 {
			p = append(p, fmt.Sprintf("count %d of matrix %d is negative", c, j))
			break
		}
	}
	if i := firstBad(e.Sum2, true); i >= 0 {
		p = append(p, fmt.Sprintf("in_sum2[%d] = %g (want finite and ≥ 0)", i, e.Sum2[i]))
	}
	if i := firstBad(e.Sum, false); i >= 0 {
		p = append(p, fmt.Sprintf("in_sum[%d] = %g is not finite", i, e.Sum[i]))
	}
	return strings.Join(p, ", ")
}

// firstBad is the index of the first NaN or infinity in v (or negative value when nonNeg),
// or -1.
func firstBad(v []float32, nonNeg bool) int {
	for i, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) || (nonNeg && f < 0) {
			return i
		}
	}
	return -1
}

// errNoEntries is returned for a file with nothing in it (llama.cpp: "no data in file").
var errNoEntries = errors.New("no entries")
