package stats

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/imatrix"
)

// MergeOptions tune MergeFiles.
type MergeOptions struct {
	// Partial allows gquant statistics whose chunks do not cover every window (some shards
	// missing). The result records the shards and chunks it holds and can be merged later
	// with the rest; without Partial an incomplete set is refused, so that a lost shard is
	// not mistaken for a whole calibration.
	Partial bool
}

// MergeResult describes a merge.
type MergeResult struct {
	// Kind is the inputs' kind: "gquant", or "imatrix" (llama.cpp's files, GGUF or .dat).
	Kind string
	// Chunks and WindowChunks: the chunks merged and the windows (gquant statistics); Complete
	// reports whether they are all of them, the result then being recorded as one unsharded run.
	Chunks, WindowChunks int
	Complete             bool
	// Missing lists the shards absent from an incomplete set.
	Missing []int
}

// MergeFiles adds up statistics files into out (temporary file, then rename): gquant
// statistics (version 3 or later, with exact sums) of one model, corpus, chunking and fold
// group (Meta.FoldChunks), from disjoint shards, or llama.cpp imatrix files (as llama-imatrix
// --in-file does: see imatrix.Merge; the output is a GGUF imatrix, or a legacy one when out
// ends in ".dat"). Kinds do not mix.
//
// gquant statistics add exactly: counts, the exact Σx², Σx and Hessians (integers), max|x|,
// activation extremes (fit and held-out apart) and histograms (re-binned exactly to the
// geometry of the merged range), so that merged shards equal the statistics of one run over
// all their chunks, bit for bit; when the shards cover every window the result is written as
// that run would be (one shard of one). Hessians are streamed a block at a time. Names (the
// model's folder, the corpus file) are not compared: the first input's are kept.
func MergeFiles(inputs []string, out string, o MergeOptions) (*MergeResult, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%s: nothing to merge", out)
	}
	kinds := make([]string, len(inputs))
	for i, p := range inputs {
		k, err := fileKind(p)
		if err != nil {
			return nil, err
		}
		kinds[i] = k
		if family(k) != family(kinds[0]) {
			return nil, fmt.Errorf("%s: general.type: %s, but %s holds %s: statistics of different kinds do not merge", p, kindName(k), inputs[0], kindName(kinds[0]))
		}
	}
	if family(kinds[0]) == "imatrix" {
		return mergeImatrixFiles(inputs, out)
	}
	ss := make([]*Stats, len(inputs))
	for i, p := range inputs {
		s, err := Read(p)
		if err != nil {
			return nil, err
		}
		if err := s.Mergeable(); err != nil {
			return nil, err
		}
		ss[i] = s
	}
	merged, res, err := Merge(ss, o)
	if err != nil {
		return nil, err
	}
	if err := writeMerged(out, merged, ss); err != nil {
		return nil, err
	}
	return res, nil
}

// fileKind returns the kind of a statistics file as Read would take it: "gquant", "imatrix"
// or "imatrix-dat".
func fileKind(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	head := make([]byte, 4)
	n, _ := f.Read(head)
	f.Close()
	if n < 4 || !bytes.Equal(head, []byte(gguf.Magic)) {
		// A legacy imatrix, or nothing statistics: say which before comparing kinds.
		if _, err := imatrix.Read(path); err != nil {
			return "", err
		}
		return "imatrix-dat", nil
	}
	gf, err := gguf.Open(path)
	if err != nil {
		return "", err
	}
	defer gf.Close()
	typ, err := gf.String("general.type")
	if err != nil {
		return "", fmt.Errorf("%s: general.type: missing or not a string: not a statistics or imatrix file", path)
	}
	switch typ {
	case imatrix.TypeImatrix:
		return "imatrix", nil
	case Type:
		return "gquant", nil
	}
	return "", fmt.Errorf("%s: general.type: %q is neither %q nor %q", path, typ, Type, imatrix.TypeImatrix)
}

// family groups kinds that merge together: llama.cpp's two imatrix formats do.
func family(kind string) string {
	if strings.HasPrefix(kind, "imatrix") {
		return "imatrix"
	}
	return kind
}

// kindName describes a kind in errors.
func kindName(kind string) string {
	switch kind {
	case "gquant":
		return "gquant statistics"
	case "imatrix":
		return "a llama.cpp imatrix"
	case "imatrix-dat":
		return "a legacy llama.cpp imatrix (.dat)"
	}
	return kind
}

// Mergeable reports why statistics cannot be merged, or nil: they must be gquant's, of
// version 3 or later with exact sums, and record their windows and shard.
func (s *Stats) Mergeable() error {
	switch {
	case s.Kind != "gquant":
		return fmt.Errorf("%s: %s: only gquant statistics merge this way", s.name(), kindName(s.Kind))
	case s.Version != 0 && s.Version < 3:
		return fmt.Errorf("%s: %s: version %d statistics hold no exact sums and cannot be merged (calibrate again with this gquant)", s.name(), keyVer, s.Version)
	case !s.exactForm():
		return fmt.Errorf("%s: %s: the statistics hold float64 sums only (rewritten from older ones?) and cannot be merged", s.name(), keyExact)
	case s.Meta.Shards < 1 || s.Meta.WindowChunks < 1 || len(s.Meta.ChunkSet) == 0:
		return fmt.Errorf("%s: %s: the statistics do not record their windows and shard, which merging needs", s.name(), keyShards)
	}
	return nil
}

// checkShards checks a Meta's windows, shard and chunk set, returning a problem or "".
func checkShards(m *Meta) string {
	if m.Shards == 0 {
		if len(m.ShardIndex) != 0 || len(m.ChunkSet) != 0 {
			return fmt.Sprintf("%s: 0 (unknown) with shards or chunks listed", keyShards)
		}
		return ""
	}
	for k, i := range m.ShardIndex {
		if i >= m.Shards || (k > 0 && i <= m.ShardIndex[k-1]) {
			return fmt.Sprintf("%s: %v is not an increasing list of shards below %d", keyShardIndex, m.ShardIndex, m.Shards)
		}
	}
	if len(m.ShardIndex) == 0 {
		return fmt.Sprintf("%s: empty", keyShardIndex)
	}
	if m.FoldChunks < 1 {
		return fmt.Sprintf("%s: %d, want a group of at least one chunk", keyFoldChunks, m.FoldChunks)
	}
	n := 0
	for k, r := range m.ChunkSet {
		if r.Start >= r.End || r.End > m.WindowChunks || (k > 0 && r.Start <= m.ChunkSet[k-1].End) {
			return fmt.Sprintf("%s: %v is not a sorted set of disjoint ranges of the %d windows", keyChunkSet, m.ChunkSet, m.WindowChunks)
		}
		if f := m.FoldChunks; r.Start%f != 0 || (r.End%f != 0 && r.End != m.WindowChunks) {
			return fmt.Sprintf("%s: %v does not begin and end on the fold groups of %d chunks (%s)", keyChunkSet, m.ChunkSet, f, keyFoldChunks)
		}
		n += r.End - r.Start
	}
	if n != m.Chunks {
		return fmt.Sprintf("%s: %d chunks, but %schunks is %d", keyChunkSet, n, keyPrefix, m.Chunks)
	}
	return ""
}

// describeRanges writes chunk ranges for errors: "4–7, 12".
func describeRanges(rs []ChunkRange) string {
	var parts []string
	for _, r := range rs {
		if r.End-r.Start == 1 {
			parts = append(parts, fmt.Sprint(r.Start))
		} else {
			parts = append(parts, fmt.Sprintf("%d–%d", r.Start, r.End-1))
		}
	}
	return strings.Join(parts, ", ")
}

// short cuts a digest for an error.
func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	if s == "" {
		return `""`
	}
	return s
}

// Merge adds up statistics (each Mergeable) into new statistics; their Hessians stay in the
// inputs' files (writeMerged adds them while writing). See MergeFiles for what is refused and
// how sums add.
func Merge(ss []*Stats, o MergeOptions) (*Stats, *MergeResult, error) {
	a := ss[0]
	for _, b := range ss[1:] {
		if err := compatible(a, b); err != nil {
			return nil, nil, err
		}
	}
	// Chunks: no chunk twice.
	type owned struct {
		r ChunkRange
		s *Stats
	}
	var all []owned
	for _, s := range ss {
		for _, r := range s.Meta.ChunkSet {
			all = append(all, owned{r, s})
		}
	}
	slices.SortStableFunc(all, func(x, y owned) int { return x.r.Start - y.r.Start })
	var set []ChunkRange
	for k, x := range all {
		if k > 0 {
			if p := all[k-1]; x.r.Start < p.r.End {
				both := ChunkRange{x.r.Start, min(x.r.End, p.r.End)}
				first, second := p.s, x.s
				if slices.Index(ss, second) < slices.Index(ss, first) {
					first, second = second, first
				}
				return nil, nil, fmt.Errorf("%s: %s: chunks %s are also in %s (the same shard twice?): shards must be disjoint", second.name(), keyChunkSet, describeRanges([]ChunkRange{both}), first.name())
			}
		}
		if n := len(set); n > 0 && set[n-1].End == x.r.Start {
			set[n-1].End = x.r.End
		} else {
			set = append(set, x.r)
		}
	}
	m := a.Meta
	res := &MergeResult{Kind: "gquant", WindowChunks: m.WindowChunks}
	var shards []int
	m.Tokens, m.Chunks = 0, 0
	for _, s := range ss {
		m.Tokens += s.Meta.Tokens
		m.Chunks += s.Meta.Chunks
		shards = append(shards, s.Meta.ShardIndex...)
	}
	slices.Sort(shards)
	shards = slices.Compact(shards)
	res.Chunks = m.Chunks
	res.Complete = len(set) == 1 && set[0] == ChunkRange{0, m.WindowChunks}
	if !res.Complete {
		for i := 0; i < m.Shards; i++ {
			if !slices.Contains(shards, i) {
				res.Missing = append(res.Missing, i)
			}
		}
		if !o.Partial {
			missing := complement(set, m.WindowChunks)
			what := fmt.Sprintf("chunks %s", describeRanges(missing))
			if len(res.Missing) > 0 {
				var ids []string
				for _, i := range res.Missing {
					ids = append(ids, fmt.Sprint(i))
				}
				what = fmt.Sprintf("shard %s of %d (chunks %s)", strings.Join(ids, ", "), m.Shards, describeRanges(missing))
			}
			return nil, nil, fmt.Errorf("%s: %s: the inputs hold %d of the %d chunks, %s missing: give every shard, or --partial to merge an incomplete set", a.name(), keyChunkSet, m.Chunks, m.WindowChunks, what)
		}
	}
	m.ChunkSet, m.ShardIndex = set, shards
	if res.Complete {
		// Every window: exactly what one unsharded run records.
		m.Shards, m.ShardIndex = 1, []int{0}
	}
	out := &Stats{Kind: "gquant", Meta: m}

	for wi, la := range a.Linear {
		ls := &LinearStats{Weight: la.Weight, Cols: la.Cols, SharesInputOf: la.SharesInputOf,
			AbsMax: make([]float32, la.Cols), Exact: &ExactSums{Sum2: make([]Fixed, la.Cols), Sum: make([]Fixed, la.Cols)}}
		for _, s := range ss {
			lb := s.Linear[wi]
			ls.Count += lb.Count
			if j, ok := AddFixed(ls.Exact.Sum2, lb.Exact.Sum2); !ok {
				return nil, nil, fmt.Errorf("%s: %s%s[%d]: the merged sum is %s", s.name(), lb.Weight, sufSum2Exact, j, errFixedRange)
			}
			if j, ok := AddFixed(ls.Exact.Sum, lb.Exact.Sum); !ok {
				return nil, nil, fmt.Errorf("%s: %s%s[%d]: the merged sum is %s", s.name(), lb.Weight, sufSumExact, j, errFixedRange)
			}
			for j, v := range lb.AbsMax {
				ls.AbsMax[j] = max(ls.AbsMax[j], v)
			}
		}
		ls.Round()
		out.Linear = append(out.Linear, ls)
	}
	for ai, aa := range a.Acts {
		act := &ActStats{Name: aa.Name}
		for k, s := range ss {
			b := s.Acts[ai]
			if !b.Hist.canonical(float64(b.Min), float64(b.Max)) {
				return nil, nil, fmt.Errorf("%s: %s%s: the histogram's bins are not those of its range [%g, %g], which an exact merge needs", s.name(), b.Name, sufHistBounds, b.Min, b.Max)
			}
			if k == 0 {
				act.Min, act.Max = b.Min, b.Max
			} else {
				act.Min, act.Max = min(act.Min, b.Min), max(act.Max, b.Max)
			}
			if b.fitSeen {
				act.addExtremes(b.FitMin, b.FitMax, false)
			}
			if b.heldSeen {
				act.addExtremes(b.HeldMin, b.HeldMax, true)
			}
		}
		act.Finish()
		act.Hist.fit(float64(act.Min), float64(act.Max))
		for _, s := range ss {
			if !act.Hist.addRebinned(&s.Acts[ai].Hist) {
				return nil, nil, fmt.Errorf("%s: %s%s: the histogram does not fit the merged range", s.name(), aa.Name, sufHist)
			}
		}
		out.Acts = append(out.Acts, act)
	}
	out.index()
	if err := out.Check(); err != nil {
		return nil, nil, err
	}
	return out, res, nil
}

// complement returns the windows [0, n) that set (sorted, coalesced) lacks.
func complement(set []ChunkRange, n int) []ChunkRange {
	var out []ChunkRange
	at := 0
	for _, r := range set {
		if r.Start > at {
			out = append(out, ChunkRange{at, r.Start})
		}
		at = r.End
	}
	if at < n {
		out = append(out, ChunkRange{at, n})
	}
	return out
}

// compatible checks that b can be merged with a: one model, corpus and chunking, the same
// shards, the same statistics. The error names b and the first key that differs.
func compatible(a, b *Stats) error {
	ma, mb := a.Meta, b.Meta
	ia, ib := ma.Model, mb.Model
	type key struct {
		name   string
		va, vb any
	}
	keys := []key{
		{"model.family", ia.Family, ib.Family},
		{"model.hidden", ia.Hidden, ib.Hidden},
		{"model.intermediate", ia.Intermediate, ib.Intermediate},
		{"model.layers", ia.Layers, ib.Layers},
		{"model.heads", ia.Heads, ib.Heads},
		{"model.kv_heads", ia.KVHeads, ib.KVHeads},
		{"model.head_dim", ia.HeadDim, ib.HeadDim},
		{"model.vocab", ia.Vocab, ib.Vocab},
		{"model.tensors_sha256", short(ia.TensorsSHA256), short(ib.TensorsSHA256)},
		{"model.weights_sha256", short(ia.WeightsSHA256), short(ib.WeightsSHA256)},
		{"model.config_sha256", short(ia.ConfigSHA256), short(ib.ConfigSHA256)},
		{"corpus.sha256", short(ma.CorpusSHA256), short(mb.CorpusSHA256)},
		{"ctx", ma.Ctx, mb.Ctx},
		{"seed", ma.Seed, mb.Seed},
		{"windows.chunks", ma.WindowChunks, mb.WindowChunks},
		{"windows.tokens", ma.WindowTokens, mb.WindowTokens},
		{"shard.count", ma.Shards, mb.Shards},
		{"hessian", ma.Hessian, mb.Hessian},
		{"fold_chunks", ma.FoldChunks, mb.FoldChunks},
		{"acts", actsName(ma.Acts), actsName(mb.Acts)},
	}
	for _, k := range keys {
		if k.va != k.vb {
			what := "statistics of different models"
			switch {
			case strings.HasPrefix(k.name, "corpus"):
				what = "statistics of different corpora"
			case k.name == "ctx" || k.name == "seed" || strings.HasPrefix(k.name, "windows"):
				what = "statistics of different chunkings"
			case k.name == "shard.count":
				what = "shards of different splits"
			case k.name == "hessian":
				what = "statistics with and without Hessians"
			case k.name == "fold_chunks":
				what = "Hessians folded in different groups of chunks"
			case k.name == "acts":
				what = "statistics of different activation arithmetic"
			}
			return fmt.Errorf("%s: %s%s: %v, but %v in %s: %s do not merge", b.name(), keyPrefix, k.name, k.vb, k.va, a.name(), what)
		}
	}
	if len(a.Linear) == len(b.Linear) && (len(a.Acts) == 0) != (len(b.Acts) == 0) {
		return fmt.Errorf("%s: %d activations, but %d in %s: statistics of the linear inputs only (calibrate --linear-only) and of every activation do not merge", b.name(), len(b.Acts), len(a.Acts), a.name())
	}
	if len(a.Linear) != len(b.Linear) || len(a.Acts) != len(b.Acts) {
		return fmt.Errorf("%s: %d linear inputs and %d activations, but %d and %d in %s: statistics of different models do not merge", b.name(), len(b.Linear), len(b.Acts), len(a.Linear), len(a.Acts), a.name())
	}
	for i, la := range a.Linear {
		lb := b.Linear[i]
		if la.Weight != lb.Weight || la.Cols != lb.Cols || la.SharesInputOf != lb.SharesInputOf {
			return fmt.Errorf("%s: %s: %d columns (input of %q), but %s has %s of %d (%q) there: statistics of different models do not merge", b.name(), lb.Weight, lb.Cols, lb.SharesInputOf, a.name(), la.Weight, la.Cols, la.SharesInputOf)
		}
	}
	for i, aa := range a.Acts {
		if ab := b.Acts[i]; aa.Name != ab.Name {
			return fmt.Errorf("%s: activation %s, but %s has %s there: statistics of different models do not merge", b.name(), ab.Name, a.name(), aa.Name)
		}
	}
	return nil
}

// writeMerged writes merged statistics to out, adding the inputs' exact Hessians block by block.
func writeMerged(out string, merged *Stats, ss []*Stats) error {
	w, err := Create(out, merged)
	if err != nil {
		return err
	}
	defer w.Abort()
	if !w.exact {
		return fmt.Errorf("%s: the merged statistics lost their exact form", out)
	}
	if merged.Meta.Hessian {
		for wi, ls := range merged.Linear {
			if ls.SharesInputOf != "" {
				continue
			}
			if err := w.addHessians(ls, wi, ss); err != nil {
				return err
			}
		}
	}
	return w.Commit()
}

// addHessians writes the sum of the inputs' exact Hessians of weight wi, a block at a time.
func (sw *Writer) addHessians(ls *LinearStats, wi int, ss []*Stats) error {
	n := TriangleLen(ls.Cols)
	type src struct {
		f   *os.File
		ref *hessianRef
		s   *Stats
	}
	srcs := make([]src, len(ss))
	defer func() {
		for _, s := range srcs {
			if s.f != nil {
				s.f.Close()
			}
		}
	}()
	for k, s := range ss {
		ref := s.Linear[wi].hessian
		if ref == nil || !ref.exact || ref.n != n {
			return fmt.Errorf("%s: %s%s: missing", s.name(), ls.Weight, sufHessianExact)
		}
		f, err := os.Open(ref.path)
		if err != nil {
			return err
		}
		srcs[k] = src{f, ref, s}
		if st, err := statStamp(ref.path); err != nil || st != ref.stamp {
			return fmt.Errorf("%s: %s: the file changed since it was read", ref.path, ref.tensor)
		}
	}
	i := sw.hessIdx[ls.Weight]
	acc := make([]Fixed, min(n, fixedBlock))
	part := make([]Fixed, len(acc))
	var buf []byte
	for off := 0; off < n; off += len(acc) {
		m := min(n-off, fixedBlock)
		for k, s := range srcs {
			var err error
			if k == 0 {
				buf, err = s.ref.readFixed(s.f, off, acc[:m], buf)
				if err != nil {
					return err
				}
				continue
			}
			if buf, err = s.ref.readFixed(s.f, off, part[:m], buf); err != nil {
				return err
			}
			if j, ok := AddFixed(acc[:m], part[:m]); !ok {
				return fmt.Errorf("%s: %s[%d]: the merged sum is %s", s.s.name(), s.ref.tensor, off+j, errFixedRange)
			}
		}
		if err := sw.writeFixedPart(ls.Weight, i, off, acc[:m]); err != nil {
			return err
		}
	}
	return nil
}

// mergeImatrixFiles merges llama.cpp imatrix files (imatrix.Merge) into out: a legacy file when
// out ends in ".dat", a GGUF imatrix otherwise.
func mergeImatrixFiles(inputs []string, out string) (*MergeResult, error) {
	ms := make([]*imatrix.Matrix, len(inputs))
	for i, p := range inputs {
		m, err := imatrix.Read(p)
		if err != nil {
			return nil, err
		}
		ms[i] = m
	}
	m, err := imatrix.Merge(ms, inputs)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(filepath.Ext(out), ".dat") {
		err = imatrix.WriteDat(out, m)
	} else {
		err = imatrix.WriteGGUF(out, m)
	}
	if err != nil {
		return nil, err
	}
	return &MergeResult{Kind: "imatrix", Chunks: m.ChunkCount}, nil
}

// actsName names Meta.Acts in messages ("" is the runtime's default).
func actsName(a string) string {
	if a == "" {
		return "default"
	}
	return a
}
