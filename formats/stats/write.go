package stats

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/gquant/gquant/formats/gguf"
)

// Type is general.type of a gquant statistics file.
const Type = "gquant.calibration"

// Version is the version of the statistics file layout (calibration.version) this package
// writes. Version 4 folds the exact Hessians by groups of chunks (calibration.fold_chunks:
// each group's float64 sum rounded once) where version 3 folded each chunk's; version 3 adds
// the exact sums (calibration.exact), the windows and the shard; version 2 holds every point
// of the model's graph; version 1 files (read too) hold the runtime's named activations of the
// time, a subset. Files of versions 1 and 2 read as they always did, without exact sums: they
// cannot be merged. Files of version 3 read with a fold group of one chunk, and merge with
// statistics of the same fold group (those without Hessians, or of version 3).
const Version = 4

// Metadata keys of the statistics file.
const (
	keyPrefix       = "calibration."
	keyVer          = keyPrefix + "version"
	keyExact        = keyPrefix + "exact"
	keyWindowChunks = keyPrefix + "windows.chunks"
	keyWindowTokens = keyPrefix + "windows.tokens"
	keyShards       = keyPrefix + "shard.count"
	keyShardIndex   = keyPrefix + "shard.index"
	keyChunkSet     = keyPrefix + "chunk_set"
	keyFoldChunks   = keyPrefix + "fold_chunks"
	keyActs         = keyPrefix + "acts" // written only when not the default
)

// Tensor suffixes of the statistics file (see the package comment).
const (
	sufSum2         = ".in_sum2"
	sufSum          = ".in_sum"
	sufAbsMax       = ".in_absmax"
	sufCount        = ".count"
	sufHessian      = ".hessian"
	sufSum2Exact    = ".in_sum2_exact"
	sufSumExact     = ".in_sum_exact"
	sufHessianExact = ".hessian_exact"
	sufMin          = ".min"
	sufMax          = ".max"
	sufHist         = ".hist"
	sufHistBounds   = ".hist_bounds"
	sufFitRange     = ".fit_range"
	sufHeldRange    = ".held_range"
)

// Write writes statistics to path (temporary file, then rename). With Meta.Hessian every
// weight that shares no input must carry its Hessian. The exact sums are written when every
// weight has them (and every Hessian its exact form); otherwise the file holds the float64
// values only, as older versions did, and cannot be merged.
func Write(path string, s *Stats) error {
	if err := s.Check(); err != nil {
		return err
	}
	w, err := Create(path, s)
	if err != nil {
		return err
	}
	defer w.Abort()
	if s.Meta.Hessian {
		for _, ls := range s.Linear {
			if ls.SharesInputOf != "" {
				continue
			}
			if w.exact {
				if err := w.copyExactHessian(s, ls); err != nil {
					return err
				}
				continue
			}
			h, _, err := s.Hessian(ls.Weight)
			if err != nil {
				return err
			}
			if h == nil {
				return fmt.Errorf("%s: %s: no Hessian", path, ls.Weight)
			}
			if err := w.WriteHessian(ls.Weight, h); err != nil {
				return err
			}
		}
	}
	return w.Commit()
}

// copyExactHessian writes ls's exact Hessian, from memory or from the file it was read from.
func (sw *Writer) copyExactHessian(s *Stats, ls *LinearStats) error {
	if ls.Exact != nil && ls.Exact.Hessian != nil {
		return sw.WriteHessianExact(ls.Weight, ls.Exact.Hessian)
	}
	ref := ls.hessian
	if ref == nil || !ref.exact {
		return fmt.Errorf("%s: %s: no exact Hessian", sw.path, ls.Weight)
	}
	i := sw.hessIdx[ls.Weight]
	return ref.blocks(func(off int, block []Fixed) error {
		return sw.writeFixedPart(ls.Weight, i, off, block)
	})
}

// exactForm reports whether statistics can be written with their exact sums: every weight has
// them, and no Hessian that is there lacks its exact form (Hessians still to come, streamed by
// calibrate, are written exactly).
func (s *Stats) exactForm() bool {
	if len(s.Linear) == 0 {
		return false
	}
	for _, ls := range s.Linear {
		e := ls.Exact
		if e == nil || len(e.Sum2) != ls.Cols || len(e.Sum) != ls.Cols {
			return false
		}
		if ls.SharesInputOf != "" || !s.Meta.Hessian {
			continue
		}
		switch {
		case e.Hessian != nil:
		case ls.hessian != nil && ls.hessian.exact:
		case ls.Hessian != nil || ls.hessian != nil:
			return false // a Hessian in float64 only
		}
	}
	return true
}

// Writer writes a statistics file whose Hessians arrive later, one at a time.
type Writer struct {
	path     string
	w        *gguf.Writer
	hessIdx  map[string]int
	hessCols map[string]int
	exact    bool // the file holds exact sums (Hessians: WriteHessianExact)
	// compact: the exact Hessians are stored as float64s (the statistics cover one fold group:
	// Meta.OneFold), 8 bytes a value instead of 16.
	compact bool
	mu      sync.Mutex // serializes WriteHessianSum's writes
	// sums holds the buffers of WriteHessianSum's goroutines, reused from call to call
	// (garbage of a few MB per Hessian would pile up beside gigabytes of live partials
	// before the GC ran).
	sums []sumBuffers
	done bool
	buf  []byte // writeF64s's and writeFixedPart's
}

// Exact reports whether the file holds the exact sums: Hessians are then written with
// WriteHessianExact.
func (sw *Writer) Exact() bool { return sw.exact }

// Create lays out the file and writes everything but the Hessians.
func Create(path string, s *Stats) (*Writer, error) {
	m := s.Meta
	id := m.Model
	exact := s.exactForm()
	compact := exact && m.OneFold()
	var shared []string
	for _, ls := range s.Linear {
		if ls.SharesInputOf != "" {
			shared = append(shared, ls.Weight+"="+ls.SharesInputOf)
		}
	}
	u32 := func(v int) uint32 { return uint32(v) }
	shardIndex := []uint32{}
	for _, i := range m.ShardIndex {
		shardIndex = append(shardIndex, u32(i))
	}
	chunkSet := []uint32{}
	for _, r := range m.ChunkSet {
		chunkSet = append(chunkSet, u32(r.Start), u32(r.End))
	}
	h := &gguf.Header{KVs: []gguf.KV{
		{Key: "general.type", Value: Type},
		{Key: keyVer, Value: uint32(Version)},
		{Key: keyPrefix + "model.name", Value: id.Name},
		{Key: keyPrefix + "model.family", Value: id.Family},
		{Key: keyPrefix + "model.hidden", Value: u32(id.Hidden)},
		{Key: keyPrefix + "model.intermediate", Value: u32(id.Intermediate)},
		{Key: keyPrefix + "model.layers", Value: u32(id.Layers)},
		{Key: keyPrefix + "model.heads", Value: u32(id.Heads)},
		{Key: keyPrefix + "model.kv_heads", Value: u32(id.KVHeads)},
		{Key: keyPrefix + "model.head_dim", Value: u32(id.HeadDim)},
		{Key: keyPrefix + "model.vocab", Value: u32(id.Vocab)},
		{Key: keyPrefix + "model.tensors_sha256", Value: id.TensorsSHA256},
		{Key: keyPrefix + "model.config_sha256", Value: id.ConfigSHA256},
		{Key: keyPrefix + "model.weights_sha256", Value: id.WeightsSHA256},
		{Key: keyPrefix + "corpus.name", Value: m.CorpusName},
		{Key: keyPrefix + "corpus.sha256", Value: m.CorpusSHA256},
		{Key: keyPrefix + "tokens", Value: uint64(m.Tokens)},
		{Key: keyPrefix + "ctx", Value: u32(m.Ctx)},
		{Key: keyPrefix + "chunks", Value: u32(m.Chunks)},
		{Key: keyPrefix + "seed", Value: m.Seed},
		{Key: keyPrefix + "hessian", Value: m.Hessian},
		{Key: keyPrefix + "shared_inputs", Value: append([]string{}, shared...)},
		{Key: keyExact, Value: exact},
		{Key: keyWindowChunks, Value: u32(m.WindowChunks)},
		{Key: keyWindowTokens, Value: uint64(m.WindowTokens)},
		{Key: keyShards, Value: u32(m.Shards)},
		{Key: keyShardIndex, Value: shardIndex},
		{Key: keyChunkSet, Value: chunkSet},
		{Key: keyFoldChunks, Value: u32(m.FoldChunks)},
	}}
	if m.Acts != "" {
		h.KVs = append(h.KVs, gguf.KV{Key: keyActs, Value: m.Acts})
	}
	var data [][]byte
	add := func(name string, t gguf.Type, shape []uint64, b []byte) {
		h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: name, Type: t, Shape: shape})
		data = append(data, b)
	}
	hessIdx, hessCols := map[string]int{}, map[string]int{}
	for _, ls := range s.Linear {
		c := uint64(ls.Cols)
		add(ls.Weight+sufSum2, gguf.F64, []uint64{c}, f64Bytes(ls.Sum2))
		add(ls.Weight+sufSum, gguf.F64, []uint64{c}, f64Bytes(ls.Sum))
		add(ls.Weight+sufAbsMax, gguf.F32, []uint64{c}, f32Bytes(ls.AbsMax))
		add(ls.Weight+sufCount, gguf.F64, []uint64{1}, f64Bytes([]float64{float64(ls.Count)}))
		if exact {
			add(ls.Weight+sufSum2Exact, gguf.I64, []uint64{2, c}, fixedBytesOf(ls.Exact.Sum2))
			add(ls.Weight+sufSumExact, gguf.I64, []uint64{2, c}, fixedBytesOf(ls.Exact.Sum))
		}
		if m.Hessian && ls.SharesInputOf == "" {
			hessIdx[ls.Weight], hessCols[ls.Weight] = len(h.Tensors), ls.Cols
			switch n := uint64(TriangleLen(ls.Cols)); {
			case compact:
				add(ls.Weight+sufHessianExact, gguf.F64, []uint64{n}, nil)
			case exact:
				add(ls.Weight+sufHessianExact, gguf.I64, []uint64{2, n}, nil)
			default:
				add(ls.Weight+sufHessian, gguf.F64, []uint64{c, c}, nil)
			}
		}
	}
	for _, a := range s.Acts {
		lo, hi := a.Hist.Bounds()
		add(a.Name+sufMin, gguf.F32, []uint64{1}, f32Bytes([]float32{a.Min}))
		add(a.Name+sufMax, gguf.F32, []uint64{1}, f32Bytes([]float32{a.Max}))
		add(a.Name+sufHist, gguf.F64, []uint64{uint64(len(a.Hist.Counts))}, f64Bytes(a.Hist.Counts))
		add(a.Name+sufHistBounds, gguf.F64, []uint64{2}, f64Bytes([]float64{lo, hi}))
		// A shard may hold fit chunks only, or held-out ones only: each pair is written when
		// seen (Held: both).
		if a.Held || a.fitSeen {
			add(a.Name+sufFitRange, gguf.F32, []uint64{2}, f32Bytes([]float32{a.FitMin, a.FitMax}))
		}
		if a.Held || a.heldSeen {
			add(a.Name+sufHeldRange, gguf.F32, []uint64{2}, f32Bytes([]float32{a.HeldMin, a.HeldMax}))
		}
	}
	w, err := gguf.Create(path, h)
	if err != nil {
		return nil, err
	}
	sw := &Writer{path: path, w: w, hessIdx: hessIdx, hessCols: hessCols, exact: exact, compact: compact}
	for i, b := range data {
		if b == nil {
			continue
		}
		if err := w.WriteTensor(i, b); err != nil {
			sw.Abort()
			return nil, err
		}
	}
	return sw, nil
}

// WriteHessian writes one weight's Hessian (c × c float64) to a file without exact sums.
func (sw *Writer) WriteHessian(weight string, h []float64) error {
	i, ok := sw.hessIdx[weight]
	if !ok || sw.exact {
		return fmt.Errorf("%s: %s: no float64 Hessian slot", sw.path, weight)
	}
	if err := sw.writeF64s(i, h); err != nil {
		sw.Abort()
		return err
	}
	return nil
}

// WriteHessianExact writes one weight's exact Hessian (its upper triangle, TriangleLen(c)
// values row by row) to a file with exact sums.
func (sw *Writer) WriteHessianExact(weight string, tri []Fixed) error {
	i, ok := sw.hessIdx[weight]
	if !ok || !sw.exact {
		return fmt.Errorf("%s: %s: no exact Hessian slot", sw.path, weight)
	}
	for off := 0; off < len(tri); off += fixedBlock {
		if err := sw.writeFixedPart(weight, i, off, tri[off:min(off+fixedBlock, len(tri))]); err != nil {
			return err
		}
	}
	return nil
}

// WriteHessianSum writes one weight's exact Hessian to a file with exact sums as the sum of
// the exact triangle acc (nil: zero) and the upper triangle of h (c × c row-major float64,
// each element rounded to the grid as FoldUpper does): the last fold of a calibration, made as
// the file is written, with neither acc nor h changed. The values are computed by up to
// threads goroutines (rows split), and written one block at a time (several writers of one
// file only slow each other down). A sum that does not fit is an error naming the element.
func (sw *Writer) WriteHessianSum(weight string, acc ExactTriangle, h []float64, threads int) error {
	i, ok := sw.hessIdx[weight]
	c := sw.hessCols[weight]
	if t, mem := acc.(Triangle); mem && t == nil {
		acc = nil
	}
	switch t, mem := acc.(Triangle); {
	case !ok || !sw.exact:
		return fmt.Errorf("%s: %s: no exact Hessian slot", sw.path, weight)
	case len(h) < c*c || (mem && len(t) != TriangleLen(c)):
		return fmt.Errorf("%s: %s: a Hessian of %d values and an exact triangle of %d for %d columns", sw.path, weight, len(h), len(t), c)
	}
	bounds := triangleSplit(c, threads)
	errs := make([]error, len(bounds)-1)
	for len(sw.sums) < len(errs) {
		sw.sums = append(sw.sums, sumBuffers{blk: make([]Fixed, fixedBlock)})
	}
	done := make(chan struct{}, len(errs))
	for p := range errs {
		go func() {
			errs[p] = sw.writeSumRows(i, weight, acc, h, c, bounds[p], bounds[p+1], &sw.sums[p])
			done <- struct{}{}
		}()
	}
	for range errs {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			sw.Abort()
			return err
		}
	}
	return nil
}

// sumBuffers are the buffers of one goroutine of WriteHessianSum.
type sumBuffers struct {
	blk      []Fixed // fixedBlock values
	buf, acc []byte  // encoded values; the exact triangle's, read
}

// writeSumRows is WriteHessianSum over rows [i0, i1) of the triangle, in blocks of fixedBlock
// values, through b.
func (sw *Writer) writeSumRows(ti int, weight string, acc ExactTriangle, h []float64, c, i0, i1 int, b *sumBuffers) error {
	if sw.compact && acc == nil {
		return sw.writeGridRows(ti, weight, h, c, i0, i1, b)
	}
	blk := b.blk[:0]
	off := triRow(i0, c) // the triangle index of blk[0]
	flush := func() error {
		var err error
		if b.buf, err = sw.encodeFixed(b.buf, weight, off, blk); err != nil {
			return err
		}
		sw.mu.Lock()
		err = sw.w.WriteTensorPart(ti, uint64(sw.valueBytes()*off), b.buf)
		sw.mu.Unlock()
		off += len(blk)
		blk = blk[:0]
		return err
	}
	for r := i0; r < i1; r++ {
		row := h[r*c+r : r*c+c]
		for j := r; len(row) > 0; {
			k := min(len(row), cap(blk)-len(blk))
			seg := blk[len(blk) : len(blk)+k]
			if acc == nil {
				clear(seg)
			} else {
				var err error
				if b.acc, err = acc.readFixed(off+len(blk), seg, b.acc); err != nil {
					return err
				}
			}
			if e, ok := FoldFloats(seg, row[:k]); !ok {
				return fmt.Errorf("%s: %s: Hessian[%d, %d]: the sum %g is not finite or leaves the exact range ±2^63", sw.path, weight, r, j+e, row[e])
			}
			blk = blk[:len(blk)+k]
			row, j = row[k:], j+k
			if len(blk) == cap(blk) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if len(blk) > 0 {
		return flush()
	}
	return nil
}

// writeGridRows is writeSumRows of a compact file without exact triangle: the upper triangle
// of h rounded to the grid, as float64s.
func (sw *Writer) writeGridRows(ti int, weight string, h []float64, c, i0, i1 int, b *sumBuffers) error {
	if cap(b.buf) < 8*fixedBlock {
		b.buf = make([]byte, 0, 8*fixedBlock)
	}
	buf := b.buf[:0]
	off := triRow(i0, c) // the triangle index of buf's first value
	flush := func() error {
		sw.mu.Lock()
		err := sw.w.WriteTensorPart(ti, uint64(8*off), buf)
		sw.mu.Unlock()
		off += len(buf) / 8
		buf = buf[:0]
		return err
	}
	for r := i0; r < i1; r++ {
		for j, x := range h[r*c+r : r*c+c] {
			v, ok := gridFloat(x)
			if !ok {
				return fmt.Errorf("%s: %s: Hessian[%d, %d]: the sum %g is not finite or leaves the exact range ±2^63", sw.path, weight, r, r+j, x)
			}
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
			if len(buf) == cap(buf) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if len(buf) > 0 {
		return flush()
	}
	return nil
}

// valueBytes is the size of an exact Hessian value in the file.
func (sw *Writer) valueBytes() int {
	if sw.compact {
		return 8
	}
	return fixedBytes
}

// encodeFixed encodes exact Hessian values, v from element off of weight's, as the file
// stores them into buf (grown as needed): 16-byte pairs, or, compact, float64s, each of which
// must hold its value exactly.
func (sw *Writer) encodeFixed(buf []byte, weight string, off int, v []Fixed) ([]byte, error) {
	n := sw.valueBytes() * len(v)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if !sw.compact {
		putFixed(buf, v)
		return buf, nil
	}
	for k, f := range v {
		x := f.Float64()
		if g, _ := FixedOf(x); g != f {
			return buf, fmt.Errorf("%s: %s%s[%d]: the sum (about %g) is not a float64, as in statistics of one fold group", sw.path, weight, sufHessianExact, off+k, x)
		}
		binary.LittleEndian.PutUint64(buf[8*k:], math.Float64bits(x))
	}
	return buf, nil
}

// fixedBlock is the number of Fixed values written or read at a time (1 MiB).
const fixedBlock = 1 << 20 / fixedBytes

// writeFixedPart writes exact Hessian values at element offset off of tensor i, weight's.
func (sw *Writer) writeFixedPart(weight string, i, off int, v []Fixed) error {
	b, err := sw.encodeFixed(sw.buf, weight, off, v)
	sw.buf = b
	if err == nil {
		err = sw.w.WriteTensorPart(i, uint64(sw.valueBytes()*off), b)
	}
	if err != nil {
		sw.Abort()
		return err
	}
	return nil
}

// Commit finishes the file.
func (sw *Writer) Commit() error {
	if err := sw.w.Commit(); err != nil {
		sw.Abort()
		return err
	}
	sw.done = true
	return nil
}

// Abort removes the temporary file unless the file was committed.
func (sw *Writer) Abort() {
	if !sw.done {
		sw.w.Abort()
		sw.done = true
	}
}

// fixedBytesOf encodes exact values, each Lo then Hi, little-endian.
func fixedBytesOf(v []Fixed) []byte {
	b := make([]byte, fixedBytes*len(v))
	putFixed(b, v)
	return b
}

// putFixed encodes v into b (16 bytes each).
func putFixed(b []byte, v []Fixed) {
	for i, f := range v {
		binary.LittleEndian.PutUint64(b[16*i:], f.Lo)
		binary.LittleEndian.PutUint64(b[16*i+8:], f.Hi)
	}
}

// getFixed decodes len(v) exact values from b.
func getFixed(v []Fixed, b []byte) {
	for i := range v {
		v[i] = Fixed{binary.LittleEndian.Uint64(b[16*i:]), binary.LittleEndian.Uint64(b[16*i+8:])}
	}
}

// f64Bytes encodes float64s little-endian.
func f64Bytes(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

// writeF64s writes float64s as tensor i, little-endian, through a reused 1 MB buffer: a
// Hessian encoded whole would be a garbage copy of up to hundreds of MB per tensor.
func (sw *Writer) writeF64s(i int, v []float64) error {
	if len(sw.buf) < 1<<20 {
		sw.buf = make([]byte, 1<<20)
	}
	buf := sw.buf[:1<<20]
	for off := 0; off < len(v); {
		n := min(len(v)-off, len(buf)/8)
		for j, x := range v[off : off+n] {
			binary.LittleEndian.PutUint64(buf[8*j:], math.Float64bits(x))
		}
		if err := sw.w.WriteTensorPart(i, uint64(8*off), buf[:8*n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// f32Bytes encodes float32s little-endian.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
