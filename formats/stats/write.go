package stats

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/gguf"
)

// Type is general.type of a gquant statistics file.
const Type = "gquant.calibration"

// Version is the version of the statistics file layout (calibration.version) this package
// writes. Version 3 adds the exact sums (calibration.exact), the windows and the shard;
// version 2 holds every point of the model's graph; version 1 files (read too) hold the
// runtime's named activations of the time, a subset. Files of versions 1 and 2 read as they
// always did, without exact sums: they cannot be merged.
const Version = 3

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
		return sw.writeFixedPart(i, off, block)
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
	path    string
	w       *gguf.Writer
	hessIdx map[string]int
	exact   bool // the file holds exact sums (Hessians: WriteHessianExact)
	done    bool
	buf     []byte // writeF64s's and writeFixedPart's
}

// Exact reports whether the file holds the exact sums: Hessians are then written with
// WriteHessianExact.
func (sw *Writer) Exact() bool { return sw.exact }

// Create lays out the file and writes everything but the Hessians.
func Create(path string, s *Stats) (*Writer, error) {
	m := s.Meta
	id := m.Model
	exact := s.exactForm()
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
	}}
	var data [][]byte
	add := func(name string, t gguf.Type, shape []uint64, b []byte) {
		h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: name, Type: t, Shape: shape})
		data = append(data, b)
	}
	hessIdx := map[string]int{}
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
			hessIdx[ls.Weight] = len(h.Tensors)
			if exact {
				add(ls.Weight+sufHessianExact, gguf.I64, []uint64{2, uint64(TriangleLen(ls.Cols))}, nil)
			} else {
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
	sw := &Writer{path: path, w: w, hessIdx: hessIdx, exact: exact}
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
		if err := sw.writeFixedPart(i, off, tri[off:min(off+fixedBlock, len(tri))]); err != nil {
			return err
		}
	}
	return nil
}

// fixedBlock is the number of Fixed values written or read at a time (1 MiB).
const fixedBlock = 1 << 20 / fixedBytes

// writeFixedPart writes exact values at element offset off of tensor i.
func (sw *Writer) writeFixedPart(i, off int, v []Fixed) error {
	if cap(sw.buf) < fixedBytes*len(v) {
		sw.buf = make([]byte, max(1<<20, fixedBytes*len(v)))
	}
	b := sw.buf[:fixedBytes*len(v)]
	putFixed(b, v)
	if err := sw.w.WriteTensorPart(i, uint64(fixedBytes*off), b); err != nil {
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
