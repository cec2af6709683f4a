package stats

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/imatrix"
	"github.com/gquant/gquant/internal/problems"
)

// Read reads statistics: a gquant statistics file, or a llama.cpp imatrix file (GGUF or
// legacy .dat), which gives Σx² and counts (and Σx when present) only. The statistics are
// checked (finite sums, consistent shapes); Validate checks them against a model.
func Read(path string) (*Stats, error) {
	head := make([]byte, 4)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	n, _ := f.Read(head)
	f.Close()
	if n < 4 || !bytes.Equal(head, []byte(gguf.Magic)) {
		return readImatrix(path)
	}
	gf, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer gf.Close()
	typ, err := gf.String("general.type")
	if err != nil {
		return nil, fmt.Errorf("%s: general.type: missing or not a string: not a statistics or imatrix file", path)
	}
	switch typ {
	case imatrix.TypeImatrix:
		return readImatrix(path)
	case Type:
	default:
		return nil, fmt.Errorf("%s: general.type: %q is neither %q nor %q", path, typ, Type, imatrix.TypeImatrix)
	}
	s, err := parseStats(gf)
	if err != nil {
		return nil, err
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// readImatrix converts a llama.cpp importance matrix.
func readImatrix(path string) (*Stats, error) {
	m, err := imatrix.Read(path)
	if err != nil {
		return nil, err
	}
	s := &Stats{Source: path, Kind: "imatrix"}
	if m.Legacy {
		s.Kind = "imatrix-dat"
	}
	if len(m.Datasets) > 0 {
		s.Meta.CorpusName = strings.Join(m.Datasets, ",")
	}
	s.Meta.Ctx, s.Meta.Chunks = m.ChunkSize, m.ChunkCount
	s.Meta.Tokens = m.ChunkSize * m.ChunkCount
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Matrices() > 1 { // a stack of experts: one LinearStats per expert (ExpertWeight)
			n := e.RowLen()
			for x, c := range e.Counts {
				ls := &LinearStats{Weight: ExpertWeight(e.Name, x), Cols: n, Count: c, Sum2: widen(e.Sum2[x*n : (x+1)*n])}
				if e.Sum != nil {
					ls.Sum = widen(e.Sum[x*n : (x+1)*n])
				}
				s.Linear = append(s.Linear, ls)
			}
			continue
		}
		ls := &LinearStats{Weight: e.Name, Cols: e.RowLen(), Count: e.Counts[0], Sum2: widen(e.Sum2)}
		if e.Sum != nil {
			ls.Sum = widen(e.Sum)
		}
		s.Linear = append(s.Linear, ls)
	}
	s.index()
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// widen converts float32s to float64s.
func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// parseStats decodes a gquant statistics file.
func parseStats(gf *gguf.File) (*Stats, error) {
	path := gf.Name
	// Hessians are read again later (Stats.Hessian), whatever the working directory then.
	absPath, err := filepath.Abs(path)
	if err != nil {
		absPath = path
	}
	stamp, err := statStamp(absPath)
	if err != nil {
		return nil, err
	}
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	u32 := func(key string) int {
		v, err := gf.Uint32(keyPrefix + key)
		if err != nil {
			bad("%s: missing or not UINT32", keyPrefix+key)
		}
		return int(v)
	}
	str := func(key string) string {
		v, err := gf.String(keyPrefix + key)
		if err != nil {
			bad("%s: missing or not a string", keyPrefix+key)
		}
		return v
	}
	v := u32("version")
	if len(probs) == 0 && (v < 1 || v > Version) {
		return nil, fmt.Errorf("%s: %s: version %d, this gquant reads versions 1 to %d", path, keyVer, v, Version)
	}
	s := &Stats{Source: path, Kind: "gquant", Version: v}
	m := &s.Meta
	m.Model = ModelID{
		Name: str("model.name"), Family: str("model.family"),
		Hidden: u32("model.hidden"), Intermediate: u32("model.intermediate"), Layers: u32("model.layers"),
		Heads: u32("model.heads"), KVHeads: u32("model.kv_heads"), HeadDim: u32("model.head_dim"),
		Vocab:         u32("model.vocab"),
		TensorsSHA256: str("model.tensors_sha256"), ConfigSHA256: str("model.config_sha256"),
		WeightsSHA256: str("model.weights_sha256"),
	}
	m.CorpusName, m.CorpusSHA256 = str("corpus.name"), str("corpus.sha256")
	tokens, err := gf.Uint64(keyPrefix + "tokens")
	if err != nil {
		bad("%stokens: missing or not UINT64", keyPrefix)
	}
	m.Tokens = int(tokens)
	m.Ctx, m.Chunks = u32("ctx"), u32("chunks")
	if m.Seed, err = gf.Uint64(keyPrefix + "seed"); err != nil {
		bad("%sseed: missing or not UINT64", keyPrefix)
	}
	if m.Hessian, err = gf.Bool(keyPrefix + "hessian"); err != nil {
		bad("%shessian: missing or not BOOL", keyPrefix)
	}
	exact := false
	if v >= 3 {
		if exact, err = gf.Bool(keyExact); err != nil {
			bad("%s: missing or not BOOL", keyExact)
		}
		m.WindowChunks = u32("windows.chunks")
		wt, err := gf.Uint64(keyWindowTokens)
		if err != nil {
			bad("%s: missing or not UINT64", keyWindowTokens)
		}
		m.WindowTokens = int(wt)
		m.Shards = u32("shard.count")
		idx, err := gf.Uint32s(keyShardIndex)
		if err != nil {
			bad("%s: missing or not an array of UINT32", keyShardIndex)
		}
		for _, i := range idx {
			m.ShardIndex = append(m.ShardIndex, int(i))
		}
		set, err := gf.Uint32s(keyChunkSet)
		if err != nil {
			bad("%s: missing or not an array of UINT32", keyChunkSet)
		}
		if len(set)%2 != 0 {
			bad("%s: %d values, not [start, end) pairs", keyChunkSet, len(set))
		}
		for i := 0; i+1 < len(set); i += 2 {
			m.ChunkSet = append(m.ChunkSet, ChunkRange{int(set[i]), int(set[i+1])})
		}
		m.FoldChunks = 1 // version 3: each chunk folded on its own
		if v >= 4 {
			m.FoldChunks = u32("fold_chunks")
		}
		if p := checkShards(m); p != "" {
			bad("%s", p)
		}
		if _, ok := gf.Get(keyActs); ok {
			a, err := gf.String(keyActs)
			if err != nil || (a != "quant" && a != "float") {
				bad("%s: want \"quant\" or \"float\"", keyActs)
			}
			m.Acts = a
		}
	}
	shared, err := gf.Strings(keyPrefix + "shared_inputs")
	if err != nil {
		bad("%sshared_inputs: missing or not an array of strings", keyPrefix)
	}
	leaders := map[string]string{}
	for _, p := range shared {
		w, l, ok := strings.Cut(p, "=")
		if !ok || w == "" || l == "" {
			bad("%sshared_inputs: %q is not weight=leader", keyPrefix, p)
			continue
		}
		leaders[w] = l
	}

	lin := map[string]*LinearStats{}
	act := map[string]*ActStats{}
	getLin := func(w string) *LinearStats {
		if ls := lin[w]; ls != nil {
			return ls
		}
		ls := &LinearStats{Weight: w, Cols: -1, SharesInputOf: leaders[w]}
		lin[w] = ls
		s.Linear = append(s.Linear, ls)
		return ls
	}
	getAct := func(n string) *ActStats {
		if a := act[n]; a != nil {
			return a
		}
		a := &ActStats{Name: n}
		act[n] = a
		s.Acts = append(s.Acts, a)
		return a
	}
	exactOf := func(ls *LinearStats) *ExactSums {
		if ls.Exact == nil {
			ls.Exact = &ExactSums{}
		}
		return ls.Exact
	}
	seenActPart := map[string]int{}
	for i, t := range gf.Tensors {
		data := gf.TensorData(i)
		name := t.Name
		// want checks the tensor's type and element count.
		want := func(typ gguf.Type, n int) bool {
			if t.Type != typ || int(gguf.ElementCount(t.Shape)) != n || (n == 0) {
				bad("%s: %v %v, want %v with %d elements", name, t.Type, t.Shape, typ, n)
				return false
			}
			return true
		}
		cut := func(suf string) (string, bool) { return strings.CutSuffix(name, suf) }
		// dim0 is the length of a 1-D tensor (0, which want rejects, otherwise).
		dim0 := 0
		if len(t.Shape) == 1 {
			dim0 = int(t.Shape[0])
		}
		// exactPair checks an exact tensor: I64 [2, n] (Lo and Hi of n values), in a file that
		// says it has them.
		exactPair := func() bool {
			if !exact {
				bad("%s: exact sums in a file without %s", name, keyExact)
				return false
			}
			if len(t.Shape) != 2 || t.Shape[0] != 2 || t.Type != gguf.I64 || t.Shape[1] == 0 {
				bad("%s: %v %v, want I64 [2, n]", name, t.Type, t.Shape)
				return false
			}
			return true
		}
		if w, ok := cut(sufSum2Exact); ok {
			if ls := getLin(w); exactPair() {
				exactOf(ls).Sum2 = fixeds(data)
			}
		} else if w, ok := cut(sufSumExact); ok {
			if ls := getLin(w); exactPair() {
				exactOf(ls).Sum = fixeds(data)
			}
		} else if w, ok := cut(sufHessianExact); ok {
			ls := getLin(w)
			ref := &hessianRef{path: absPath, tensor: name, offset: int64(gf.DataOffset + t.Offset), stamp: stamp, exact: true}
			switch {
			case t.Type == gguf.F64 && len(t.Shape) == 1 && t.Shape[0] > 0 && exact:
				// One fold group's values, each a float64 on the grid (read checks them).
				ref.n, ref.compact = int(t.Shape[0]), true
				ls.hessian = ref
			case exactPair():
				ref.n = int(t.Shape[1])
				ls.hessian = ref
			}
		} else if w, ok := cut(sufSum2); ok {
			ls := getLin(w)
			if want(gguf.F64, dim0) {
				ls.Sum2 = f64s(data)
			}
		} else if w, ok := cut(sufSum); ok {
			if ls := getLin(w); want(gguf.F64, dim0) {
				ls.Sum = f64s(data)
			}
		} else if w, ok := cut(sufAbsMax); ok {
			if ls := getLin(w); want(gguf.F32, dim0) {
				ls.AbsMax = f32s(data)
			}
		} else if w, ok := cut(sufCount); ok {
			if ls := getLin(w); want(gguf.F64, 1) {
				c := f64s(data)[0]
				if c < 0 || c != math.Trunc(c) || c > 1<<53 {
					bad("%s: count %g is not a whole number of rows", name, c)
				} else {
					ls.Count = int64(c)
				}
			}
		} else if w, ok := cut(sufHessian); ok {
			ls := getLin(w)
			if exact {
				bad("%s: a float64 Hessian in a file with exact sums (want %s%s)", name, w, sufHessianExact)
			} else if len(t.Shape) != 2 || t.Shape[0] != t.Shape[1] {
				bad("%s: shape %v is not square", name, t.Shape)
			} else if want(gguf.F64, int(t.Shape[0]*t.Shape[1])) {
				// Checked here through read(2), not the mapping (whose pages would all count
				// as resident), and read again when used (Stats.Hessian).
				ref := &hessianRef{path: absPath, tensor: name, offset: int64(gf.DataOffset + t.Offset), cols: int(t.Shape[0]), n: int(t.Shape[0] * t.Shape[1]), stamp: stamp}
				if _, err := ref.read(true); err != nil {
					bad("%s", strings.TrimPrefix(err.Error(), absPath+": "))
				} else {
					ls.hessian = ref
				}
			}
		} else if a, ok := cut(sufFitRange); ok {
			seenActPart[a] |= 16
			if want(gguf.F32, 2) {
				r := f32s(data)
				getAct(a).FitMin, getAct(a).FitMax = r[0], r[1]
			}
		} else if a, ok := cut(sufHeldRange); ok {
			seenActPart[a] |= 32
			if want(gguf.F32, 2) {
				r := f32s(data)
				getAct(a).HeldMin, getAct(a).HeldMax = r[0], r[1]
			}
		} else if a, ok := cut(sufHistBounds); ok {
			seenActPart[a] |= 8
			if want(gguf.F64, 2) {
				b := f64s(data)
				getAct(a).Hist.Start, getAct(a).Hist.Width = histGeometry(b[0], b[1])
			}
		} else if a, ok := cut(sufHist); ok {
			seenActPart[a] |= 4
			if want(gguf.F64, dim0) {
				getAct(a).Hist.Counts = f64s(data)
			}
		} else if a, ok := cut(sufMin); ok {
			seenActPart[a] |= 1
			if want(gguf.F32, 1) {
				getAct(a).Min = f32s(data)[0]
			}
		} else if a, ok := cut(sufMax); ok {
			seenActPart[a] |= 2
			if want(gguf.F32, 1) {
				getAct(a).Max = f32s(data)[0]
			}
		} else {
			bad("%s: unknown tensor", name)
		}
	}
	for _, a := range s.Acts {
		// The fit and held-out extremes are optional (older files lack them); before version 3
		// they go together, from version 3 each is there when its kind of chunk was seen (a
		// shard may hold one kind only).
		seen := seenActPart[a.Name]
		a.fitSeen, a.heldSeen = seen&16 != 0, seen&32 != 0
		a.Held = a.fitSeen && a.heldSeen
		switch {
		case seen&15 != 15:
			bad("%s: needs all of .min, .max, .hist and .hist_bounds", a.Name)
		case v < 3 && seen&48 != 0 && seen&48 != 48:
			bad("%s: needs both or neither of %s and %s", a.Name, sufFitRange, sufHeldRange)
		}
	}
	hessSuffix := sufHessian
	if exact {
		hessSuffix = sufHessianExact
	}
	for _, ls := range s.Linear {
		if ls.Sum2 == nil {
			bad("%s%s: missing", ls.Weight, sufSum2)
			continue
		}
		ls.Cols = len(ls.Sum2)
		if m.Hessian && ls.SharesInputOf == "" && ls.Hessian == nil && ls.hessian == nil {
			bad("%s%s: missing (%shessian is set)", ls.Weight, hessSuffix, keyPrefix)
		}
		if r := ls.hessian; r != nil && r.exact {
			if r.n != TriangleLen(ls.Cols) {
				bad("%s: %d values, want %d (the upper triangle of %d columns)", r.tensor, r.n, TriangleLen(ls.Cols), ls.Cols)
				ls.hessian = nil
				continue
			}
			r.cols = ls.Cols
			// Checked here through read(2), not the mapping (whose pages would all count as
			// resident), and read again when used (Stats.Hessian).
			if _, err := r.read(true); err != nil {
				bad("%s", strings.TrimPrefix(err.Error(), absPath+": "))
				ls.hessian = nil
			}
		}
		if !exact {
			continue
		}
		e := ls.Exact
		switch {
		case e == nil || e.Sum2 == nil:
			bad("%s%s: missing (%s is set)", ls.Weight, sufSum2Exact, keyExact)
		case e.Sum == nil:
			bad("%s%s: missing (%s is set)", ls.Weight, sufSumExact, keyExact)
		case len(e.Sum2) != ls.Cols || len(e.Sum) != ls.Cols:
			bad("%s: exact sums of %d and %d values for %d columns", ls.Weight, len(e.Sum2), len(e.Sum), ls.Cols)
		}
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", path, joinProblems(probs))
	}
	s.index()
	return s, nil
}

// histGeometry recovers the bin index of the first bin and the bin width from the bounds of a
// histogram of HistBins bins (a width of 0 for an invalid pair; check rejects it).
func histGeometry(lo, hi float64) (start int64, width float64) {
	w := (hi - lo) / HistBins
	if !(w > 0) || math.IsInf(w, 0) {
		return 0, 0
	}
	return int64(math.Round(lo / w)), w
}

// hessianRef locates a Hessian in a statistics file, in the file as it was when read (stamp):
// cols × cols little-endian float64 at offset, or, exact, the upper triangle (n =
// TriangleLen(cols) Fixed values, row by row; compact, as float64s on the grid).
type hessianRef struct {
	path, tensor string
	offset       int64
	cols, n      int
	stamp        string
	exact        bool
	compact      bool
}

// statStamp identifies a file's version: size and modification time.
func statStamp(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d@%d", fi.Size(), fi.ModTime().UnixNano()), nil
}

// blocks reads an exact Hessian in blocks of at most fixedBlock values, passing each (valid
// during the call) with its element offset to fn; it fails when the file changed since it was
// read.
func (r *hessianRef) blocks(fn func(off int, block []Fixed) error) error {
	f, err := os.Open(r.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := statStamp(r.path); err != nil || st != r.stamp {
		return fmt.Errorf("%s: %s: the file changed since it was read", r.path, r.tensor)
	}
	var buf []byte
	v := make([]Fixed, min(r.n, fixedBlock))
	for off := 0; off < r.n; {
		m := min(r.n-off, fixedBlock)
		if buf, err = r.readFixed(f, off, v[:m], buf); err != nil {
			return err
		}
		if err := fn(off, v[:m]); err != nil {
			return err
		}
		off += m
	}
	return nil
}

// readFixed reads len(v) values of the exact Hessian from element off of f (the file, open)
// into v, through buf (grown as needed, returned).
func (r *hessianRef) readFixed(f *os.File, off int, v []Fixed, buf []byte) ([]byte, error) {
	size := fixedBytes
	if r.compact {
		size = 8
	}
	if cap(buf) < size*len(v) {
		buf = make([]byte, size*len(v))
	}
	b := buf[:size*len(v)]
	if _, err := f.ReadAt(b, r.offset+int64(size*off)); err != nil {
		return buf, fmt.Errorf("%s: %s: %v", r.path, r.tensor, err)
	}
	if !r.compact {
		getFixed(v, b)
		return buf, nil
	}
	for k := range v {
		x := math.Float64frombits(binary.LittleEndian.Uint64(b[8*k:]))
		if g, ok := gridFloat(x); !ok || g != x {
			return buf, fmt.Errorf("%s: %s[%d] = %g is not finite or not on the exact grid (2^-64, within ±2^63)", r.path, r.tensor, off+k, x)
		}
		v[k], _ = FixedOf(x)
	}
	return buf, nil
}

// readExact reads the Hessian in blocks and checks it: every diagonal element (a Σx²) ≥ 0;
// unless checkOnly it returns the full symmetric float64 matrix.
func (r *hessianRef) readExact(checkOnly bool) ([]float64, error) {
	c := r.cols
	var h []float64
	if !checkOnly {
		h = make([]float64, c*c)
	}
	row, rowStart := 0, 0 // the row the next diagonal element is on, and its triangle index
	err := r.blocks(func(off int, block []Fixed) error {
		end := off + len(block)
		for row < c && rowStart < end {
			if block[rowStart-off].Neg() {
				return fmt.Errorf("%s: %s[%d] = %g: diagonal element %d is negative", r.path, r.tensor, rowStart, block[rowStart-off].Float64(), row)
			}
			rowStart += c - row
			row++
		}
		if h == nil {
			return nil
		}
		// Element off+k of the triangle: find its row from the block's first.
		i := triRowOf(off, c)
		j := off - triRow(i, c) + i
		for _, f := range block {
			x := f.Float64()
			h[i*c+j], h[j*c+i] = x, x
			if j++; j == c {
				i++
				j = i
			}
		}
		return nil
	})
	return h, err
}

// triRowOf returns the row of the upper-triangle element at index k (row by row).
func triRowOf(k, c int) int {
	lo, hi := 0, c-1 // the last row whose start is ≤ k
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if triRow(mid, c) <= k {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// read reads the Hessian in chunks, checking that every value is finite (exact: that the
// diagonal is not negative); with checkOnly it keeps nothing (nil result).
func (r *hessianRef) read(checkOnly bool) ([]float64, error) {
	if r.exact {
		return r.readExact(checkOnly)
	}
	f, err := os.Open(r.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := statStamp(r.path); err != nil || st != r.stamp {
		return nil, fmt.Errorf("%s: %s: the file changed since it was read", r.path, r.tensor)
	}
	n := r.cols * r.cols
	var h []float64
	if !checkOnly {
		h = make([]float64, n)
	}
	buf := make([]byte, 1<<20)
	for i := 0; i < n; {
		m := min(n-i, len(buf)/8)
		if _, err := f.ReadAt(buf[:8*m], r.offset+int64(8*i)); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", r.path, r.tensor, err)
		}
		for j := 0; j < m; j++ {
			bits := binary.LittleEndian.Uint64(buf[8*j:])
			if bits&0x7ff0000000000000 == 0x7ff0000000000000 {
				return nil, fmt.Errorf("%s: %s[%d] = %g is not finite", r.path, r.tensor, i+j, math.Float64frombits(bits))
			}
			if h != nil {
				h[i+j] = math.Float64frombits(bits)
			}
		}
		i += m
	}
	return h, nil
}

// f64s decodes little-endian float64s.
func f64s(b []byte) []float64 {
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

// fixeds decodes exact values (Lo, Hi little-endian pairs).
func fixeds(b []byte) []Fixed {
	v := make([]Fixed, len(b)/fixedBytes)
	getFixed(v, b)
	return v
}

// f32s decodes little-endian float32s.
func f32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// joinProblems joins problems with "; ", at most 10 of them.
func joinProblems(ps []string) string { return problems.Join(ps, 10) }
