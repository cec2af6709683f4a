package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
)

func init() { extraCommands = append(extraCommands, newCalibrateCmd) }

// calibrateOptions are the flags of gquant calibrate.
type calibrateOptions struct {
	corpus, out, imatrix, encodings, stats string
	shard, acts                            string
	tokens, ctx, threads                   int
	seed                                   uint64
	hessian, processOutput, w8a16, force   bool
	linearOnly                             bool
	hessianMem                             string
	rangeMode, encVersion, scheme          string
	percentile                             float64
}

func newCalibrateCmd(g *globals) *cobra.Command {
	o := &calibrateOptions{}
	cmd := &cobra.Command{
		Use:   "calibrate MODEL_DIR --corpus FILE (-o STATS | --imatrix OUT.gguf | (--w8a16 | --scheme QNN_SCHEME) --encodings OUT.json)",
		Short: "Collect activation statistics (imatrix, Hessians, ranges) and QNN encodings (w8a16, w4a16-qnn, w4a8-qnn)",
		Long: "calibrate runs MODEL_DIR (a HuggingFace folder or a GGUF file) over a text corpus, cut into\n" +
			"chunks of --ctx tokens as llama-imatrix does, and records per linear layer input Σx², Σx,\n" +
			"max|x| and the row count (with --hessian also XᵀX), and per activation tensor of the graph\n" +
			"its min, max and histogram. -o writes them as a gquant statistics file (GGUF); --imatrix\n" +
			"as llama.cpp's GGUF imatrix (llama-quantize --imatrix reads it). --scheme S --encodings writes\n" +
			"AIMET encodings JSON for Qualcomm QNN scheme S: an asymmetric per-tensor encoding of every\n" +
			"activation of the graph (range set by --range) and the weight encodings: w8a16 (--w8a16):\n" +
			"16-bit activations, 8-bit symmetric per-channel weights; w4a16-qnn (also w4a16-lpbq):\n" +
			"16-bit activations, int4 LPBQ weights in blocks of 64 (the embedding, the output and rows\n" +
			"that fit no block 8-bit per channel); w4a8-qnn: the same weights, 8-bit activations.\n" +
			"gquant convert --format gqf --scheme S --encodings takes the file. --stats reuses statistics from a\n" +
			"file (gquant's, or llama.cpp's imatrix) instead of running the model. --shard I/N evaluates\n" +
			"the I-th of N disjoint parts of the chunks (the same chunks whatever the shard); gquant stats\n" +
			"merge adds the parts' statistics up to those of one run, bit for bit.",
		Args: argsN(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCalibrate(cmd.ErrOrStderr(), g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.corpus, "corpus", "", "calibration text file (UTF-8)")
	f.StringVarP(&o.out, "output", "o", "", "write the statistics (gquant GGUF statistics file)")
	f.StringVar(&o.imatrix, "imatrix", "", "write llama.cpp's GGUF imatrix")
	f.BoolVar(&o.processOutput, "process-output", false, "include output.weight in the imatrix (as llama-imatrix --process-output)")
	f.IntVar(&o.tokens, "tokens", 0, "tokens to evaluate (0: every full chunk of the corpus)")
	f.IntVar(&o.ctx, "ctx", 0, fmt.Sprintf("chunk length in tokens (0: %d, capped at the model's context)", calibrate.DefaultCtx))
	f.Uint64Var(&o.seed, "seed", 0, "sample chunks at random with this seed (0: take the head of the corpus)")
	f.BoolVar(&o.hessian, "hessian", false, "also collect the Hessian XᵀX of every linear layer input (for GPTQ)")
	f.BoolVar(&o.linearOnly, "linear-only", false, "-o: record the linear layers' input statistics only (Σx², and with --hessian XᵀX: what imatrix, GPTQ and AWQ read), not the activation ranges of every graph point that gqf's QNN schemes need; the pass costs about what --imatrix does")
	f.StringVar(&o.hessianMem, "hessian-mem", "4G", "memory for Hessians at once with -o; more passes over the corpus when they do not fit")
	f.IntVar(&o.threads, "threads", 0, "worker threads (0: one per CPU)")
	addActsFlag(cmd, &o.acts)
	f.BoolVar(&o.w8a16, "w8a16", false, "compute QNN w8a16 encodings (--scheme w8a16; needs --encodings)")
	f.StringVar(&o.scheme, "scheme", "", "compute the encodings of this QNN scheme: "+strings.Join(calibrate.QNNSchemes(), ", ")+" (needs --encodings)")
	f.StringVar(&o.encodings, "encodings", "", "write AIMET encodings JSON (with --w8a16 or --scheme)")
	f.StringVar(&o.rangeMode, "range", string(quantize.RangeSQNR), "activation range setting: minmax, percentile or sqnr")
	f.Float64Var(&o.percentile, "percentile", quantize.DefaultPercentile, "percentile for --range percentile")
	f.StringVar(&o.encVersion, "encodings-version", encodings.V1, "AIMET encodings version: 1.0.0 or 0.6.1")
	f.StringVar(&o.shard, "shard", "", "evaluate part I of N of the corpus chunks (I/N, from 0); merge the parts with gquant stats merge")
	f.StringVar(&o.stats, "stats", "", "use statistics from this file (gquant's or llama.cpp's imatrix) instead of running the model")
	f.BoolVar(&o.force, "force", false, "overwrite existing outputs")
	return cmd
}

// checkUsage validates flag combinations.
func (o *calibrateOptions) checkUsage() error {
	switch {
	case o.out == "" && o.imatrix == "" && o.encodings == "":
		return usageErr("calibrate: nothing to write: give -o STATS, --imatrix OUT.gguf or --w8a16 (--scheme QNN_SCHEME) --encodings OUT.json")
	case o.w8a16 && o.scheme != "" && o.scheme != "w8a16":
		return usageErr("calibrate: --w8a16 and --scheme %s name two schemes", o.scheme)
	case o.encodings != "" && !o.w8a16 && o.scheme == "":
		return usageErr("calibrate: --encodings needs --w8a16 or --scheme QNN_SCHEME")
	case o.w8a16 && o.encodings == "":
		return usageErr("calibrate: --w8a16 needs --encodings OUT.json")
	case o.scheme != "" && o.encodings == "":
		return usageErr("calibrate: --scheme needs --encodings OUT.json")
	case o.corpus == "" && o.stats == "":
		return usageErr("calibrate: --corpus FILE is required")
	case o.corpus != "" && o.stats != "":
		return usageErr("calibrate: --corpus and --stats exclude each other")
	case o.tokens < 0:
		return usageErr("calibrate: --tokens: must not be negative, got %d", o.tokens)
	case o.ctx < 0:
		return usageErr("calibrate: --ctx: must not be negative, got %d", o.ctx)
	case o.stats != "" && o.hessian:
		return usageErr("calibrate: --hessian needs a run over a corpus, not --stats")
	case o.hessian && o.out == "":
		return usageErr("calibrate: --hessian: the Hessians are written to -o STATS only; give -o (--imatrix and --encodings do not hold them)")
	case o.stats != "" && o.shard != "":
		return usageErr("calibrate: --shard needs a run over a corpus, not --stats")
	case o.linearOnly && o.encodings != "":
		return usageErr("calibrate: --linear-only records no activation ranges, which --encodings needs")
	case o.acts != "default" && o.stats != "":
		return usageErr("calibrate: --acts applies to a run over a corpus, not --stats")
	case o.linearOnly && o.stats != "":
		return usageErr("calibrate: --linear-only applies to a run over a corpus, not --stats")
	case o.encVersion != encodings.V1 && o.encVersion != encodings.V061:
		return usageErr("calibrate: --encodings-version: %q is not %s or %s", o.encVersion, encodings.V1, encodings.V061)
	}
	if o.scheme != "" {
		if _, err := calibrate.QNNSchemeByName(o.scheme); err != nil {
			return usageErr("calibrate: --%v", err)
		}
	}
	if _, err := (quantize.RangeOptions{Mode: quantize.RangeMode(o.rangeMode), Percentile: o.percentile}).Normalize(); err != nil {
		return usageErr("calibrate: --%v", err)
	}
	if err := checkThreads("calibrate", o.threads); err != nil {
		return err
	}
	outs := map[string]string{}
	for flag, p := range map[string]string{"-o": o.out, "--imatrix": o.imatrix, "--encodings": o.encodings} {
		if p == "" {
			continue
		}
		if other, dup := outs[p]; dup {
			return usageErr("calibrate: %s and %s name the same file %s", other, flag, p)
		}
		outs[p] = flag
	}
	return nil
}

func runCalibrate(stderr io.Writer, g *globals, o *calibrateOptions, model string) error {
	if err := o.checkUsage(); err != nil {
		return err
	}
	hmem, err := parseSize(o.hessianMem)
	if err != nil {
		return usageErr("calibrate: --hessian-mem: %v", err)
	}
	acts, err := parseActs("calibrate", "--acts", o.acts)
	if err != nil {
		return err
	}
	var shard calibrate.Shard
	if o.shard != "" {
		if shard, err = calibrate.ParseShard(o.shard); err != nil {
			return optionErr("calibrate", err)
		}
	}
	if err := checkOutputs(o.force, []string{model, o.corpus, o.stats}, o.out, o.imatrix, o.encodings); err != nil {
		return err
	}

	var st *stats.Stats
	var spec *arch.Spec
	statsWritten := false
	if o.stats != "" {
		if st, err = stats.Read(o.stats); err != nil {
			return err
		}
		m, err := runtime.Load(model, runtime.Options{Threads: 1})
		if err != nil {
			return err
		}
		spec = m.Spec()
		m.Close()
		if err := arch.ValidateStats(st, spec, calibrate.WeightsDigest(model, spec)); err != nil {
			return err
		}
	} else {
		opts := calibrate.Options{
			Corpus: o.corpus, Ctx: o.ctx, Tokens: o.tokens, Seed: o.seed, Threads: o.threads,
			Hessian: o.hessian, HessianMemory: hmem, Shard: shard, Acts: acts,
			// Only an imatrix wanted, or asked for: the linear inputs are all it needs.
			LinearOnly: o.linearOnly || o.out == "" && o.encodings == "",
		}
		// Hessians are streamed to the statistics file as they are done; without them the file
		// is written last, once everything else has been computed.
		if o.hessian && o.out != "" {
			opts.Output = o.out
			statsWritten = true
		}
		if !g.quiet && stderrIsTerminal() {
			p := newTokenBar()
			opts.Progress = p.update
			defer p.finish()
		}
		res, err := calibrate.Calibrate(model, opts)
		if err != nil {
			return err
		}
		st, spec = res.Stats, res.Spec
		if !g.quiet {
			m := st.Meta
			if o.shard != "" {
				r := m.ChunkSet[0]
				fmt.Fprintf(stderr, "shard %s: chunks %d–%d of %d\n", shard, r.Start, r.End-1, m.WindowChunks)
			}
			fmt.Fprintf(stderr, "calibrated on %d tokens (%d chunks of ≤ %d, %d pass(es)) in %.2f s: %.0f tokens/s\n",
				res.Tokens, m.Chunks, m.Ctx, res.Passes, res.Seconds, res.TokensPerSecond)
			if un := st.UnreachedExperts(); len(un) > 0 {
				fmt.Fprintf(stderr, "%d expert matrices saw no calibration token (count 0: llama-quantize and convert weight their columns equally): %s\n",
					len(un), strings.Join(problems.First(un, 6), ", "))
			}
		}
	}

	var set *encodings.File
	if o.w8a16 && o.scheme == "" {
		o.scheme = "w8a16"
	}
	if o.scheme != "" {
		set, err = calibrate.QNN(st, model, spec, o.scheme, quantize.RangeOptions{
			Mode: quantize.RangeMode(o.rangeMode), Percentile: o.percentile,
		})
		if err != nil {
			return err
		}
	}
	if o.out != "" && !statsWritten {
		if o.stats != "" && st.Kind != "gquant" {
			return fmt.Errorf("%s: -o: statistics from a llama.cpp imatrix cannot be rewritten as a gquant statistics file", o.stats)
		}
		if err := stats.Write(o.out, st); err != nil {
			return err
		}
	}
	if o.imatrix != "" {
		if err := st.WriteImatrix(o.imatrix, o.processOutput); err != nil {
			return err
		}
	}
	if set != nil {
		if err := calibrate.WriteEncodings(o.encodings, set, o.encVersion); err != nil {
			return err
		}
	}
	if !g.quiet {
		for _, p := range []string{o.out, o.imatrix, o.encodings} {
			if p != "" {
				fmt.Fprintf(stderr, "wrote %s\n", p)
			}
		}
	}
	return nil
}

// tokenBar is a progress bar over tokens on stderr.
type tokenBar struct {
	mu sync.Mutex
	pb *progressbar.ProgressBar
}

func newTokenBar() *tokenBar { return &tokenBar{} }

func (b *tokenBar) update(done, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pb == nil {
		b.pb = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("calibrating"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("tok"),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100_000_000),
			progressbar.OptionClearOnFinish())
	}
	_ = b.pb.Set(done)
}

func (b *tokenBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}
