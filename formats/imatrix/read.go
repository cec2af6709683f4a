package imatrix

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gquant/gquant/formats/gguf"
)

// Read reads an importance-matrix file in either format: a file that starts with the GGUF
// magic is read as a GGUF imatrix, anything else as a legacy .dat file (llama.cpp tries GGUF
// first and falls back the same way). The result is validated (Matrix.Validate); errors name
// the file and the tensor or key.
func Read(path string) (*Matrix, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse decodes an importance-matrix file held in data; name is used in errors.
func Parse(data []byte, name string) (*Matrix, error) {
	var m *Matrix
	var err error
	if bytes.HasPrefix(data, []byte(gguf.Magic)) {
		m, err = parseGGUF(data, name)
	} else {
		m, err = parseDat(data, name)
	}
	if err != nil {
		return nil, err
	}
	if err := m.Validate(name); err != nil {
		return nil, err
	}
	return m, nil
}

// parseGGUF reads the GGUF format as common_imatrix_load does, but strictly: the three
// imatrix keys that llama-quantize requires must be present with their types, every tensor
// must be F32 and one of the known kinds, and each in_sum2 needs its counts.
func parseGGUF(data []byte, name string) (*Matrix, error) {
	f, err := gguf.Parse(data, name)
	if err != nil {
		return nil, err
	}
	m := &Matrix{}
	var probs []string
	add := func(what, format string, args ...any) {
		probs = append(probs, what+": "+fmt.Sprintf(format, args...))
	}
	if kv, ok := f.Get(KeyType); ok {
		if s, _ := kv.Value.(string); s != TypeImatrix {
			add(KeyType, "is %v, want %q (not an imatrix file)", kv.Value, TypeImatrix)
		}
	}
	if m.Datasets, err = f.Strings(KeyDatasets); err != nil {
		probs = append(probs, keyProblem(name, err))
	}
	if n, err := f.Uint32(KeyChunkCount); err != nil {
		probs = append(probs, keyProblem(name, err))
	} else {
		m.ChunkCount = int(n)
	}
	if n, err := f.Uint32(KeyChunkSize); err != nil {
		probs = append(probs, keyProblem(name, err))
	} else {
		m.ChunkSize = int(n)
	}

	// Collect the tensors of each weight.
	type parts struct{ sum2, sum, counts int }
	byWeight := map[string]*parts{}
	get := func(w string) *parts {
		p := byWeight[w]
		if p == nil {
			p = &parts{-1, -1, -1}
			byWeight[w] = p
		}
		return p
	}
	for i, t := range f.Tensors {
		if t.Type != gguf.F32 {
			add(t.Name, "type %s, want F32", t.Type)
			continue
		}
		switch {
		case strings.HasSuffix(t.Name, SuffixSum2):
			get(strings.TrimSuffix(t.Name, SuffixSum2)).sum2 = i
		case strings.HasSuffix(t.Name, SuffixCounts):
			get(strings.TrimSuffix(t.Name, SuffixCounts)).counts = i
		case strings.HasSuffix(t.Name, SuffixSum):
			get(strings.TrimSuffix(t.Name, SuffixSum)).sum = i
		default:
			add(t.Name, "unexpected tensor in an imatrix file (want <weight>%s, %s or %s)", SuffixSum2, SuffixCounts, SuffixSum)
		}
	}
	if len(f.Tensors) == 0 {
		add("tensors", "%v", errNoEntries)
	}
	for w, p := range byWeight {
		if p.sum2 < 0 || p.counts < 0 {
			missing := w + SuffixCounts
			if p.sum2 < 0 {
				missing = w + SuffixSum2
			}
			add(missing, "missing")
			continue
		}
		ts, tc := f.Tensors[p.sum2], f.Tensors[p.counts]
		n := int(ts.Shape[0])
		if n == 0 {
			add(ts.Name, "shape %v is empty", ts.Shape)
			continue
		}
		nmat := int(gguf.ElementCount(ts.Shape)) / n
		if got := int(gguf.ElementCount(tc.Shape)); got != nmat || tc.Shape[0] != 1 {
			add(tc.Name, "shape %v, want [1 %d] to match %s %v", tc.Shape, nmat, ts.Name, ts.Shape)
			continue
		}
		e := Entry{Name: w, Sum2: floats(f.TensorData(p.sum2))}
		for j, c := range floats(f.TensorData(p.counts)) {
			fc := float64(c)
			if math.IsNaN(fc) || math.IsInf(fc, 0) || fc < 0 || fc > math.MaxInt64/2 {
				add(tc.Name, "count %d is %g", j, c)
				break
			}
			e.Counts = append(e.Counts, int64(math.Round(fc))) // lround, as the loader does
		}
		if p.sum >= 0 {
			if tu := f.Tensors[p.sum]; !sameShape(tu.Shape, ts.Shape) {
				add(tu.Name, "shape %v, want %v like %s", tu.Shape, ts.Shape, ts.Name)
				continue
			}
			e.Sum = floats(f.TensorData(p.sum))
		}
		m.Entries = append(m.Entries, e)
	}
	if len(probs) > 0 {
		sort.Strings(probs) // independent of map order
		return nil, fmt.Errorf("%s: %s", name, strings.Join(probs, "; "))
	}
	m.Sort()
	return m, nil
}

// keyProblem turns a gguf getter error ("<file>: <key>: <what>") into "<key>: <what>" so that
// several problems share one file prefix.
func keyProblem(file string, err error) string {
	s := err.Error()
	if errors.Is(err, gguf.ErrNotFound) {
		for _, k := range []string{KeyDatasets, KeyChunkCount, KeyChunkSize} {
			if strings.Contains(s, k) {
				return k + ": missing (llama-quantize requires it)"
			}
		}
	}
	return strings.TrimPrefix(s, file+": ")
}

// parseDat reads the legacy format (common_imatrix_load_legacy): int32 n_entries; per entry
// int32 name length, the name, int32 ncall, int32 nval, nval float32; then optionally int32
// last chunk, int32 length and the dataset name. Unlike llama.cpp it rejects truncated data,
// names with NUL bytes and bytes after the trailer.
func parseDat(data []byte, name string) (*Matrix, error) {
	r := &datReader{data: data}
	m := &Matrix{Legacy: true}
	n := r.int32()
	if r.err != nil || n < 1 {
		return nil, fmt.Errorf("%s: entries: %v (file too short or not an imatrix file)", name, errNoEntries)
	}
	if int64(n)*12 > int64(len(data)) {
		return nil, fmt.Errorf("%s: entries: %d entries cannot fit in %d bytes (not an imatrix file?)", name, n, len(data))
	}
	for i := 0; i < int(n); i++ {
		where := fmt.Sprintf("entry %d", i)
		l := r.int32()
		if r.err == nil && (l < 1 || int(l) > r.left()) {
			return nil, fmt.Errorf("%s: %s: name length %d out of range", name, where, l)
		}
		w := string(r.bytes(int(l)))
		if r.err == nil {
			where = printable(w)
			if strings.IndexByte(w, 0) >= 0 {
				return nil, fmt.Errorf("%s: %s: name holds a NUL byte", name, where)
			}
		}
		ncall := r.int32()
		nval := r.int32()
		if r.err == nil && (nval < 1 || int64(nval)*4 > int64(r.left())) {
			return nil, fmt.Errorf("%s: %s: %d values out of range", name, where, nval)
		}
		vals := floats(r.bytes(int(nval) * 4))
		if r.err != nil {
			return nil, fmt.Errorf("%s: %s: truncated", name, where)
		}
		m.Entries = append(m.Entries, Entry{Name: w, Sum2: vals, Counts: []int64{int64(ncall)}})
	}
	if r.left() > 0 {
		m.ChunkCount = int(r.int32())
		l := r.int32()
		if r.err == nil && (l < 0 || int(l) > r.left()) {
			return nil, fmt.Errorf("%s: dataset: name length %d out of range", name, l)
		}
		if l > 0 {
			m.Datasets = []string{string(r.bytes(int(l)))}
		}
		if r.err != nil {
			return nil, fmt.Errorf("%s: trailer: truncated", name)
		}
		if r.left() > 0 {
			return nil, fmt.Errorf("%s: trailer: %d unexpected bytes after the dataset name", name, r.left())
		}
	}
	if m.ChunkCount < 0 {
		return nil, fmt.Errorf("%s: chunk count: %d is negative", name, m.ChunkCount)
	}
	m.Sort()
	return m, nil
}

// datReader reads little-endian values, remembering the first overrun.
type datReader struct {
	data []byte
	off  int
	err  error
}

func (r *datReader) left() int { return len(r.data) - r.off }

func (r *datReader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > r.left() {
		r.err = errors.New("truncated")
		return nil
	}
	b := r.data[r.off : r.off+n]
	r.off += n
	return b
}

func (r *datReader) int32() int32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return int32(binary.LittleEndian.Uint32(b))
}

// floats copies little-endian float32 values out of b.
func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func sameShape(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// printable returns name as is, or Go-quoted when it holds control or invalid bytes, so that
// errors stay on one line.
func printable(name string) string {
	for _, c := range name {
		if c < 0x20 || c == 0x7f || c == utf8.RuneError {
			return strconv.Quote(name)
		}
	}
	return name
}
