package calibrate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"time"

	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
)

// DefaultCtx is the default chunk length (capped at the model's context length).
const DefaultCtx = 512

// DefaultHessianMemory bounds the Hessians held at once when they are streamed to a file.
const DefaultHessianMemory = 4 << 30

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
	// Hessian collects XᵀX of every linear layer's input.
	Hessian bool
	// Output, when set, is where the statistics are written (see WriteStats); Hessians are
	// then streamed to it, at most HessianMemory bytes of them at a time (0:
	// DefaultHessianMemory), with one pass over the corpus per batch, and are not kept in the
	// returned Stats. Without Output every Hessian stays in memory.
	Output        string
	HessianMemory int64
	// Format names the model file's format where its name does not say it (runtime.Options).
	Format string
	// Progress, when set, is called after each chunk with the tokens done and to do (over
	// every pass).
	Progress func(done, total int)
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
	col := &collector{}
	threads := o.Threads
	if threads <= 0 {
		threads = goruntime.NumCPU()
	}
	m, err := runtime.Load(path, runtime.Options{Threads: threads, Hooks: col.hooks(), Format: o.Format})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	spec := m.Spec()

	ctx := o.Ctx
	switch {
	case ctx == 0:
		ctx = min(DefaultCtx, spec.Context)
	case ctx < 0:
		return nil, fmt.Errorf("%s: ctx: %d is negative", o.Corpus, ctx)
	case ctx > spec.Context:
		return nil, fmt.Errorf("%s: ctx: %d is longer than the model's context of %d tokens", path, ctx, spec.Context)
	}
	tok := m.Tokenizer()
	bos := -1
	if tok.AddBOS() {
		bos = tok.BOS()
	}
	corp, err := ReadCorpus(o.Corpus, tok, Chunking{Ctx: ctx, Tokens: o.Tokens, Seed: o.Seed}, bos)
	if err != nil {
		return nil, err
	}
	chunks := corp.Chunks
	ntok := 0
	for _, c := range chunks {
		ntok += len(c)
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
		Tokens: ntok, Ctx: ctx, Chunks: len(chunks), Seed: o.Seed, Hessian: o.Hessian,
	}
	if err := col.init(model, o.Hessian, threads); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	// Hessian batches: everything at once in memory, or bounded batches when streaming.
	batches := [][]*stats.LinearStats{nil}
	if o.Hessian {
		budget := int64(-1)
		if o.Output != "" {
			budget = o.HessianMemory
			if budget <= 0 {
				budget = DefaultHessianMemory
			}
		}
		batches = col.hessianBatches(budget)
	}

	var sink *stats.Writer
	defer func() {
		if sink != nil {
			sink.Abort()
		}
	}()
	res := &Result{Spec: spec, Tokens: ntok, Passes: len(batches)}
	st := m.NewState(ctx)
	total := ntok * len(batches)
	done := 0
	start := time.Now()
	for p, batch := range batches {
		col.startPass(p == 0, batch)
		for ci, chunk := range chunks {
			col.held = ci%stats.HoldoutEvery == stats.HoldoutEvery-1
			st.Reset()
			if _, err := m.Eval(st, chunk, true); err != nil {
				return nil, err
			}
			if col.err != nil {
				return nil, fmt.Errorf("%s: chunk %d: %w", path, ci, col.err)
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
		for _, ls := range batch {
			finishHessian(ls.Hessian, ls.Cols)
			// Pass 0's Hessians were all scanned by Check above, and mirroring the triangle
			// only copies checked values; later passes' Hessians were not checked.
			if p == 0 {
				continue
			}
			if i, ok := stats.Finite(ls.Hessian); !ok {
				return nil, fmt.Errorf("%s: %s: Hessian element %d is not finite", path, ls.Weight, i)
			}
		}
		if o.Output == "" {
			continue
		}
		if sink == nil {
			if sink, err = stats.Create(o.Output, res.Stats); err != nil {
				return nil, err
			}
		}
		for _, ls := range batch {
			if err := sink.WriteHessian(ls.Weight, ls.Hessian); err != nil {
				return nil, err
			}
			ls.Hessian = nil // streamed: free it
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
