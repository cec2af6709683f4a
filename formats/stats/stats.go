package stats

import (
	"fmt"
	"math"
)

// ModelID identifies the model statistics were collected on: its dimensions and a digest of
// its tensor list (runtime/arch's StatsModel computes it). Statistics fit another model only
// when the two agree.
type ModelID struct {
	Name, Family                                                 string
	Hidden, Intermediate, Layers, Heads, KVHeads, HeadDim, Vocab int
	// TensorsSHA256 is the SHA-256 of the model's tensor list (see arch.TensorsDigest).
	TensorsSHA256 string
	// ConfigSHA256 is the SHA-256 of config.json ("" when unknown or for a GGUF model).
	ConfigSHA256 string
	// WeightsSHA256 fingerprints the weights themselves (see arch.WeightsDigest; "" when
	// unknown): two models of the same shapes differ here.
	WeightsSHA256 string
}

// Meta describes how statistics were collected. Fields are zero when unknown (for example in
// statistics read from a llama.cpp imatrix file).
type Meta struct {
	Model        ModelID
	CorpusName   string
	CorpusSHA256 string
	// Tokens is the number of tokens evaluated, in Chunks chunks of at most Ctx tokens.
	Tokens, Ctx, Chunks int
	Seed                uint64
	Hessian             bool
	// WindowChunks and WindowTokens count the chunks (and their tokens) that the chunking
	// (corpus, Ctx, the tokens asked for, Seed) cuts: every chunk of an unsharded run, the
	// whole of which a shard evaluates a part (0 when unknown: older files).
	WindowChunks, WindowTokens int
	// Shards is the number of parts the windows were split into (1: unsharded; 0 unknown) and
	// ShardIndex the parts these statistics hold, in increasing order (one for a shard, several
	// after a partial merge).
	Shards     int
	ShardIndex []int
	// ChunkSet holds the global indexes (in the windows) of the chunks evaluated, as sorted,
	// disjoint, non-adjacent half-open ranges.
	ChunkSet []ChunkRange
	// FoldChunks is the fold group of the exact Hessians: the windows' chunks are taken in
	// groups [g·FoldChunks, (g+1)·FoldChunks), each group's Hessian summed in float64 and
	// rounded to the exact grid once (see Fixed). Shards begin and end on group boundaries, so
	// that they fold the same groups as one run. 1 without Hessians and in files of version 3
	// (each chunk folded on its own); 0 when unknown (older files, imatrix files).
	FoldChunks int
	// Acts is the activation mode the model ran in (kernels.ActMode's name; calibration.acts):
	// "" for the runtime's default (float32 activations for F32, F16 and BF16 weights), "quant"
	// for llama.cpp's arithmetic (bf16- or fp16-rounded activations, int8 blocks for quantized
	// weights), "float" for float32 with every weight type.
	Acts string
}

// OneFold reports whether the statistics cover one fold group (their chunks lie in one range
// of one group): each exact Hessian value is then one float64 partial rounded to the grid,
// which a float64 holds exactly, and the file stores it so (see the package comment).
func (m *Meta) OneFold() bool {
	if m.FoldChunks < 1 || len(m.ChunkSet) != 1 {
		return false
	}
	r := m.ChunkSet[0]
	return r.Start < r.End && r.Start/m.FoldChunks == (r.End-1)/m.FoldChunks
}

// ChunkRange is the chunks [Start, End) of the windows.
type ChunkRange struct{ Start, End int }

// ShardRange returns the chunks of shard i of n over m windows whose chunks fold in groups of
// fold (≥ 1; see Meta.FoldChunks): the ⌈m/fold⌉ groups are split into the contiguous ranges
// [⌊i·g/n⌋, ⌊(i+1)·g/n⌋) of groups (g of them), so that the shards cover every chunk once,
// begin and end on group boundaries (the last at m) and differ in size by at most one group.
// Shards hold no chunk when there are fewer groups than shards.
func ShardRange(i, n, m, fold int) ChunkRange {
	g := (int64(m) + int64(fold) - 1) / int64(fold)
	start := int64(i) * g / int64(n) * int64(fold)
	end := int64(i+1) * g / int64(n) * int64(fold)
	return ChunkRange{int(min(start, int64(m))), int(min(end, int64(m)))}
}

// Stats are the calibration statistics of one model.
type Stats struct {
	// Source names, for errors, the file the statistics were read from, or the model they
	// were computed on.
	Source string
	// Kind says where they come from: "gquant", "imatrix" (llama.cpp GGUF imatrix) or
	// "imatrix-dat" (legacy .dat, whose Sum2 holds mean·ncall and Count ncall).
	Kind string
	// Version is the file layout's (gquant statistics: 1 to 4; 0 for statistics collected by
	// this process or read from an imatrix).
	Version int
	Meta    Meta
	// Linear holds one entry per linear weight, in model order (in name order for an
	// imatrix file).
	Linear []*LinearStats
	// Acts holds one entry per activation tensor, in graph order (empty for an imatrix file).
	Acts []*ActStats

	linear map[string]*LinearStats
	acts   map[string]*ActStats

	// handOver lets TakeHessian hand in-memory Hessians over (HandOverHessians).
	handOver bool
}

// HandOverHessians lets TakeHessian give away the in-memory Hessian of a weight that is its
// input's only reader, instead of sharing it: for an owner, such as the layer-sequential
// calibration, whose Hessians are each used once (by one GPTQ plan) and then dropped.
func (s *Stats) HandOverHessians() { s.handOver = true }

// TakeHessian is Hessian for a caller that will overwrite it (GPTQ's plan, built in the
// Hessian's memory): owned says h is the caller's. A Hessian of a statistics file is read
// afresh (owned); an in-memory one is shared (not owned) unless HandOverHessians was called
// and weight is its input's only reader: it is then handed over, and asking for it again is
// an error (never a silent "no Hessian").
func (s *Stats) TakeHessian(weight string) (h []float64, n int, owned bool, err error) {
	ls := s.hessianOwner(weight)
	switch {
	case ls == nil:
		return nil, 0, false, nil
	case ls.taken:
		return nil, 0, false, takenErr(weight)
	case ls.Hessian == nil:
		h, n, err = s.Hessian(weight)
		return h, n, h != nil, err
	case !s.handOver || ls.Weight != weight:
		return ls.Hessian, ls.Cols, false, nil
	}
	for _, o := range s.Linear {
		if o.SharesInputOf == weight {
			return ls.Hessian, ls.Cols, false, nil
		}
	}
	h, ls.Hessian, ls.taken = ls.Hessian, nil, true
	return h, ls.Cols, true, nil
}

// takenErr is the error of a Hessian asked for after TakeHessian handed it over.
func takenErr(weight string) error {
	return fmt.Errorf("%s: the Hessian of its input was handed over to GPTQ and is gone", weight)
}

// Reindex rebuilds the lookups of LinearFor and Act after Linear or Acts were edited.
func (s *Stats) Reindex() { s.index() }

// index (re)builds the lookup maps.
func (s *Stats) index() {
	s.linear = make(map[string]*LinearStats, len(s.Linear))
	for _, l := range s.Linear {
		s.linear[l.Weight] = l
	}
	s.acts = make(map[string]*ActStats, len(s.Acts))
	for _, a := range s.Acts {
		s.acts[a.Name] = a
	}
}

// name is how errors refer to the statistics.
func (s *Stats) name() string {
	if s.Source != "" {
		return s.Source
	}
	return "calibration statistics"
}

// LinearFor returns the statistics of a weight's input, or nil.
func (s *Stats) LinearFor(weight string) *LinearStats {
	if s.linear == nil {
		s.index()
	}
	return s.linear[weight]
}

// Act returns the statistics of an activation tensor, or nil.
func (s *Stats) Act(name string) *ActStats {
	if s.acts == nil {
		s.index()
	}
	return s.acts[name]
}

// Importance returns what llama-quantize passes to the quantizers for a weight: Σx²/count per
// input column, in float32; nil when the weight has no statistics. A zero count gives 1s (as
// llama-quantize does for a GGUF imatrix).
func (s *Stats) Importance(weight string) []float32 {
	ls := s.LinearFor(weight)
	if ls == nil {
		return nil
	}
	out := make([]float32, ls.Cols)
	for j := range out {
		if ls.Count == 0 {
			out[j] = 1
			continue
		}
		// float32 sums divided in float32, exactly as llama-quantize does with an imatrix
		// file; for gquant's own stats too, so that converting with them gives the same bytes
		// as llama-quantize with the imatrix `gquant calibrate --imatrix` writes.
		out[j] = float32(ls.Sum2[j]) / float32(ls.Count)
	}
	return out
}

// hessianOwner returns the statistics that hold weight's Hessian (its own, or those of the
// weight whose input it shares), or nil when none was collected.
func (s *Stats) hessianOwner(weight string) *LinearStats {
	ls := s.LinearFor(weight)
	if ls == nil {
		return nil
	}
	if ls.Hessian == nil && ls.hessian == nil && !ls.taken && ls.SharesInputOf != "" {
		ls = s.LinearFor(ls.SharesInputOf)
	}
	if ls == nil || (ls.Hessian == nil && ls.hessian == nil && !ls.taken) {
		return nil
	}
	return ls
}

// HasHessian reports whether the Hessian of weight's input was collected.
func (s *Stats) HasHessian(weight string) bool { return s.hessianOwner(weight) != nil }

// Hessian returns Σ xᵀx of a weight's input (n × n, row-major; any positive factor is
// irrelevant to GPTQ); h is nil when it was not collected. A Hessian collected by this process
// is shared: do not modify it. Those of a statistics file are read from the file at each call
// and belong to the caller, so that only the ones in use take memory.
func (s *Stats) Hessian(weight string) (h []float64, n int, err error) {
	ls := s.hessianOwner(weight)
	switch {
	case ls == nil:
		return nil, 0, nil
	case ls.taken:
		return nil, 0, takenErr(weight)
	case ls.Hessian != nil:
		return ls.Hessian, ls.Cols, nil
	}
	h, err = ls.hessian.read(false)
	if err != nil {
		return nil, 0, err
	}
	return h, ls.hessian.cols, nil
}

// ActRange returns the observed minimum and maximum of an activation tensor; ok is false when
// it has no statistics.
func (s *Stats) ActRange(name string) (lo, hi float32, ok bool) {
	a := s.Act(name)
	if a == nil {
		return 0, 0, false
	}
	return a.Min, a.Max, true
}

// Finite reports whether every value is finite; bad is the first index that is not.
func Finite(v []float64) (bad int, ok bool) { return finite(v, false) }

// finite reports whether every value is finite (and ≥ 0 when nonNeg); bad is the first
// offending index.
func finite(v []float64, nonNeg bool) (bad int, ok bool) {
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) || (nonNeg && x < 0) {
			return i, false
		}
	}
	return 0, true
}
