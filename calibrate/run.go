package calibrate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/atomicfile"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// DefaultCtx is the default chunk length (capped at the model's context length).
const DefaultCtx = 512

// DefaultHessianMemory bounds the Hessians held at once when they are streamed to a file.
const DefaultHessianMemory = 4 << 30

// DefaultFoldTokens sets the default fold group of exact Hessians: ⌈DefaultFoldTokens/ctx⌉
// chunks (see Options.FoldChunks). Folding costs about what summing a Hessian over a few
// hundred tokens does (it streams the c × c partial and the 16-byte exact triangle through
// memory, where the GEMM computes), so once per 4,096 tokens it is a small part of the
// collection; a 4,096-token calibration (8 chunks of 512) folds once, as its file is written.
const DefaultFoldTokens = 4096

// Options tune Calibrate.
type Options struct {
	// Corpus is the path of the calibration text (UTF-8).
	Corpus string
	// Ctx is the chunk length (0: DefaultCtx, capped at the model's context length; a larger
	// explicit value is an error). Tokens and Seed: see Chunking.
	Ctx    int
	Tokens int
	Seed   uint64
	// Threads is the number of workers (0: one per CPU).
	Threads int
	// Acts is the activation arithmetic of the model's products (runtime.Options.Mode):
	// kernels.ActDefault runs F32, F16 and BF16 weights with float32 activations;
	// kernels.ActQuant as llama.cpp (and llama-imatrix) does, activations rounded to bf16 for
	// BF16 weights (VDPBF16PS where the CPU has it: 1.6 times the speed of --imatrix on this
	// project's reference machine: docs/runtime.md). Recorded in the statistics (Meta.Acts).
	Acts kernels.ActMode
	// Hessian collects XᵀX of every linear layer's input.
	Hessian bool
	// FoldChunks is the fold group of the Hessians (stats.Meta.FoldChunks): the chunks
	// [g·FoldChunks, (g+1)·FoldChunks) of the windows have their Hessians summed in float64,
	// then rounded to the exact grid once and added as integers. 0: ⌈DefaultFoldTokens/ctx⌉
	// chunks with Hessians, 1 without (each chunk's Σx² and Σx are folded on their own
	// anyway). Shards begin and end on groups, and statistics merge only with those of the
	// same group.
	FoldChunks int
	// LinearOnly collects the linear layers' input statistics only, as llama-imatrix does:
	// no activation ranges or histograms (so no QNN encodings from them), and the logits are
	// not computed.
	LinearOnly bool
	// Output, when set, is where the statistics are written (see WriteStats); Hessians are
	// then streamed to it, at most HessianMemory bytes of them at a time (0:
	// DefaultHessianMemory), with one pass over the corpus per batch, and are not kept in the
	// returned Stats. Without Output every Hessian stays in memory, as its exact triangle
	// (ExactSums.Hessian, which stats.Write writes) and as a float64 matrix. While it is
	// collected, a Hessian of c columns takes its c × c float64 group partial, 8·c² bytes,
	// and, when a pass covers more than one fold group, its exact triangle too, 8·c·(c+1)
	// bytes more; HessianMemory counts both.
	Output        string
	HessianMemory int64
	// Format names the model file's format where its name does not say it (runtime.Options).
	Format string
	// Progress, when set, is called after each chunk with the tokens done and to do (over
	// every pass).
	Progress func(done, total int)
	// Shard, when its Count is set, evaluates only part Index of Count of the chunks that the
	// chunking cuts (see Shard).
	Shard Shard
}

// Shard selects part Index (from 0) of Count disjoint parts of the calibration chunks: the
// chunking (Corpus, Ctx, Tokens, Seed) cuts the same windows whatever the shard, and shard i
// evaluates the contiguous range stats.ShardRange(i, Count, windows, fold group) of them, whole
// fold groups (Options.FoldChunks), each chunk keeping its global index (for
// stats.HoldoutEvery). The statistics of all shards, merged (stats.MergeFiles), equal those of
// one unsharded run bit for bit.
//
// Contiguous rather than strided ranges: the shard's chunk set is one range, recorded as such
// and checked for overlap as ranges; every shard holds fit and held-out chunks in the same
// proportion as a whole run (with strided shards and Count a multiple of HoldoutEvery, each
// shard would hold one kind only), so one shard's statistics are useful on their own; the
// shards differ in size by at most one fold group either way.
type Shard struct{ Index, Count int }

// String is "I/N".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// ParseShard reads "I/N" (0 ≤ I < N); errors are usage errors (problems.Usage).
func ParseShard(v string) (Shard, error) {
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, problems.Usage(fmt.Errorf("--shard: %q is not I/N (the I-th of N parts, from 0)", v))
	}
	sh := Shard{i, n}
	if n < 1 {
		return Shard{}, problems.Usage(fmt.Errorf("--shard: %s: want I/N with 0 ≤ I < N", sh))
	}
	return sh, sh.check()
}

// check refuses a shard outside 0 ≤ Index < Count (Count 0: none).
func (s Shard) check() error {
	if s == (Shard{}) {
		return nil
	}
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return problems.Usage(fmt.Errorf("--shard: %s: want I/N with 0 ≤ I < N", s))
	}
	return nil
}

// Result is what Calibrate returns.
type Result struct {
	Stats *stats.Stats
	// Spec is the model's.
	Spec *arch.Spec
	// Tokens is the number of tokens per pass; Passes the passes over the corpus (more than
	// one when Hessians did not fit in memory at once).
	Tokens, Passes int
	// Seconds is the wall time of the evaluations (tokenization and writing excluded);
	// TokensPerSecond is Tokens·Passes / Seconds.
	Seconds, TokensPerSecond float64
}

// Calibrate runs the model at path (a HuggingFace folder or a GGUF file) over the corpus with
// observers and returns the statistics, also writing them to o.Output when set.
func Calibrate(path string, o Options) (*Result, error) {
	// A corpus that cannot be opened fails before the model loads (ReadCorpus reads it below).
	f, err := os.Open(o.Corpus)
	if err != nil {
		return nil, err
	}
	f.Close()
	if err := o.Shard.check(); err != nil {
		return nil, err
	}
	col := &collector{exactHessians: true}
	defer col.close()
	threads := o.Threads
	if threads <= 0 {
		threads = goruntime.NumCPU()
	}
	hooks := col.hooks()
	if o.LinearOnly {
		hooks.Activation = nil // no graph point is observed: the fused fast path everywhere
	}
	m, err := runtime.Load(path, runtime.Options{Threads: threads, Hooks: hooks, Format: o.Format, Mode: o.Acts})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	spec := m.Spec()

	ctx, corp, err := readWindows(path, m, o)
	if err != nil {
		return nil, err
	}
	chunks := corp.Chunks
	windowTokens := 0
	for _, c := range chunks {
		windowTokens += len(c)
	}
	shard := o.Shard
	if shard.Count == 0 {
		shard = Shard{0, 1}
	}
	fold, err := foldChunks(o, ctx)
	if err != nil {
		return nil, err
	}
	if len(chunks) < shard.Count {
		return nil, fmt.Errorf("%s: --shard %s: the corpus gives %d chunks of %d tokens, fewer than %d shards", o.Corpus, shard, len(chunks), ctx, shard.Count)
	}
	if groups := (len(chunks) + fold - 1) / fold; groups < shard.Count {
		return nil, fmt.Errorf("%s: --shard %s: the corpus gives %d chunks of %d tokens, whose Hessians fold in %d groups of %d chunks, fewer than %d shards", o.Corpus, shard, len(chunks), ctx, groups, fold, shard.Count)
	}
	part := stats.ShardRange(shard.Index, shard.Count, len(chunks), fold)
	ntok := 0
	for i := range chunks {
		if i < part.Start || i >= part.End {
			chunks[i] = nil // another shard's
			continue
		}
		ntok += len(chunks[i])
	}

	model, err := arch.StatsModel(filepath.Base(filepath.Clean(path)), spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg, err := os.ReadFile(filepath.Join(path, "config.json")); err == nil {
		model.ID.ConfigSHA256 = sha256Hex(cfg)
	}
	model.ID.WeightsSHA256 = WeightsDigest(path, spec)
	meta := stats.Meta{
		Model: model.ID, CorpusName: filepath.Base(o.Corpus), CorpusSHA256: corp.SHA256,
		Tokens: ntok, Ctx: ctx, Chunks: part.End - part.Start, Seed: o.Seed, Hessian: o.Hessian,
		WindowChunks: len(chunks), WindowTokens: windowTokens,
		Shards: shard.Count, ShardIndex: []int{shard.Index}, ChunkSet: []stats.ChunkRange{part},
		FoldChunks: fold,
	}
	if o.Acts != kernels.ActDefault {
		meta.Acts = o.Acts.String()
	}
	if o.LinearOnly {
		model.Points = nil
	}
	if err := col.init(model, o.Hessian, threads); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The fold groups that the part covers (it begins on one).
	col.foldGroups = (part.End - part.Start + fold - 1) / fold

	// Hessian batches: everything at once in memory, or bounded batches when streaming, whose
	// exact triangles may go to a scratch file beside the output.
	batches, spill := [][]*stats.LinearStats{nil}, []bool{false}
	if o.Hessian {
		budget := int64(-1)
		if o.Output != "" {
			budget = o.HessianMemory
			if budget <= 0 {
				budget = DefaultHessianMemory
			}
		}
		batches, spill = col.hessianBatches(budget)
	}

	var sink *stats.Writer
	var scratch *os.File
	defer func() {
		if sink != nil {
			sink.Abort()
		}
		if scratch != nil {
			atomicfile.DropScratch(scratch)
		}
	}()
	res := &Result{Spec: spec, Tokens: ntok, Passes: len(batches)}
	st := m.NewState(ctx)
	st.SkipLogits(o.LinearOnly) // the output layer's input is observed; its product is not needed
	total := ntok * len(batches)
	done := 0
	start := time.Now()
	for p, batch := range batches {
		col.startPass(p == 0, batch)
		if spill[p] {
			if scratch, col.spill, err = spillFile(o.Output, batch); err != nil {
				return nil, err
			}
		}
		for ci := part.Start; ci < part.End; ci++ {
			chunk := chunks[ci] // ci is the chunk's index in the windows, whatever the shard
			col.held = ci%stats.HoldoutEvery == stats.HoldoutEvery-1
			st.Reset()
			if _, err := m.Eval(st, chunk, true); err != nil {
				return nil, err
			}
			if col.err != nil {
				return nil, fmt.Errorf("%s: chunk %d: %w", path, ci, col.err)
			}
			if err := col.endChunk(ci, part.End, fold); err != nil {
				return nil, fmt.Errorf("%s: chunks %d–%d: %w", path, ci+1-fold, ci, err)
			}
			done += len(chunk)
			if o.Progress != nil {
				o.Progress(done, total)
			}
		}
		if p == 0 {
			res.Stats = col.stats(meta)
			res.Stats.Source = path
			if err := res.Stats.Check(); err != nil {
				return nil, err
			}
		}
		// The last fold group's partials are added as the Hessians leave the pass: in memory,
		// into the exact triangles, also kept as float64 matrices for the caller; streamed, as
		// they are written to the file, and freed.
		if len(batch) == 0 {
			continue
		}
		if o.Output == "" {
			if err := col.finishExact(batch); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			continue
		}
		if sink == nil {
			if sink, err = stats.Create(o.Output, res.Stats); err != nil {
				return nil, err
			}
		}
		if err := col.writeExact(sink, batch); err != nil {
			return nil, err
		}
		if scratch != nil {
			atomicfile.DropScratch(scratch)
			scratch, col.spill = nil, nil
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.TokensPerSecond = float64(total) / res.Seconds
	}
	if o.Output != "" {
		if sink == nil {
			if sink, err = stats.Create(o.Output, res.Stats); err != nil {
				return nil, err
			}
		}
		err := sink.Commit()
		sink = nil
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// spillFile creates a scratch file beside the statistics file out for the exact triangles of
// a batch of Hessians.
func spillFile(out string, batch []*stats.LinearStats) (*os.File, *stats.TriangleFile, error) {
	f, err := atomicfile.CreateScratch(filepath.Dir(out), "."+filepath.Base(out)+".exact-*")
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var cols []int
	for _, ls := range batch {
		names, cols = append(names, ls.Weight), append(cols, ls.Cols)
	}
	t, err := stats.NewTriangleFile(f, names, cols)
	if err != nil {
		atomicfile.DropScratch(f)
		return nil, nil, err
	}
	return f, t, nil
}

// foldChunks returns the fold group of o's Hessians for chunks of ctx tokens (see
// Options.FoldChunks).
func foldChunks(o Options, ctx int) (int, error) {
	switch {
	case o.FoldChunks < 0:
		return 0, fmt.Errorf("%s: fold group: %d chunks is negative", o.Corpus, o.FoldChunks)
	case o.FoldChunks > 0:
		return o.FoldChunks, nil
	case !o.Hessian:
		return 1, nil
	}
	return max(1, (DefaultFoldTokens+ctx-1)/ctx), nil
}

// readWindows reads the corpus windows that o selects for model m (at path): their length
// (o.Ctx, 0: DefaultCtx capped at the model's context) and the tokenized corpus.
func readWindows(path string, m *runtime.Model, o Options) (int, *Corpus, error) {
	spec := m.Spec()
	ctx := o.Ctx
	switch {
	case ctx == 0:
		ctx = min(DefaultCtx, spec.Context)
	case ctx < 0:
		return 0, nil, fmt.Errorf("%s: ctx: %d is negative", o.Corpus, ctx)
	case ctx > spec.Context:
		return 0, nil, fmt.Errorf("%s: ctx: %d is longer than the model's context of %d tokens", path, ctx, spec.Context)
	}
	tok := m.Tokenizer()
	bos := -1
	if tok.AddBOS() {
		bos = tok.BOS()
	}
	corp, err := ReadCorpus(o.Corpus, tok, Chunking{Ctx: ctx, Tokens: o.Tokens, Seed: o.Seed}, bos)
	return ctx, corp, err
}

// sha256Hex is the hex SHA-256 of b.
func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// WeightsDigest is arch.WeightsDigest of the model at path when it is a HuggingFace folder, ""
// otherwise (a GGUF model's statistics are then not tied to its weights).
func WeightsDigest(path string, spec *arch.Spec) string {
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		return ""
	}
	m, err := hf.Open(path)
	if err != nil {
		return ""
	}
	defer m.Close()
	return arch.WeightsDigest(spec, m)
}
