package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/convert/gqfconv"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/verify"
)

type convertOptions struct {
	out          string
	scheme       string
	format       string
	tensorTypes  []string
	pre          string
	name         string
	dryRun       bool
	jsonOut      string
	force        bool
	threads      int
	splitMaxSize string
	method       string
	stats        string
	encodings    string
	corpus       string
	maxLen       int
	// gqf only
	groupSize  int
	sym        bool
	keep       string
	rangeMode  string
	percentile float64
	smooth     float64
	actOrder   bool
	damp       float64
	// layer-sequential GPTQ and AWQ
	ctx, tokens int
	seed        uint64
	kv          []string
	// llama-quantize's mix controls (GGUF)
	pure                     bool
	leaveOutput              bool
	outputType, tokenEmbType string
	// --target-bpw / --target-size
	targetBPW   float64
	targetSize  string
	sensitivity string
	chunks      int
}

func newConvertCmd(g *globals) *cobra.Command {
	o := &convertOptions{}
	cmd := &cobra.Command{
		Use:   "convert MODEL_DIR|MODEL.gguf -o OUT --scheme SCHEME",
		Short: "Convert a HuggingFace checkpoint to GGUF or gqf, or requantize an F32/F16/BF16 GGUF",
		Long: "Convert reads a HuggingFace model folder (config.json, tokenizer.json, *.safetensors), plans every\n" +
			"output tensor (name, transform, encoding, fallbacks), and streams the weights into a GGUF file.\n" +
			"Given a GGUF file of F32, F16 or BF16 weights (one file, or the first part of a split model) it\n" +
			"requantizes it as llama-quantize does: every metadata key carried over, general.file_type set,\n" +
			"and, with --stats, llama-quantize's quantize.imatrix.* keys (a bf16 GGUF gives the same bytes as\n" +
			"its HF folder). --kv KEY=TYPE:VALUE sets a key (llama-quantize --override-kv).\n" +
			"Schemes: " + fmt.Sprint(convert.SchemeNames()) + "\n\n" +
			"--format gqf schemes (gquant's runtime; the QNN ones export to ONNX QDQ):\n" + gqfconv.SchemeHelp() +
			"w4a16 and w4a8 are the CPU runtime's schemes (float activations; int8 linear inputs quantized\n" +
			"per token at run time). w8a16, w4a16-qnn and w4a8-qnn are Qualcomm QNN's: every activation of\n" +
			"the graph (the KV cache tensors included) gets a calibrated static encoding, from --encodings\n" +
			"(gquant calibrate --scheme S --encodings, with the same scheme), --stats (gquant calibrate -o)\n" +
			"or a calibration run of the converted weights on --corpus.",
		Args: argsN(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error { return runConvert(cmd, g, o, args[0]) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "output", "o", "", "output file (.gguf; .gqf with --format gqf)")
	f.StringVar(&o.scheme, "scheme", "f16", "quantization scheme")
	f.StringVar(&o.format, "format", "gguf", "output format: gguf or gqf (gqf schemes: "+strings.Join(gqfconv.Schemes(), ", ")+")")
	f.StringVar(&o.encodings, "encodings", "", "gqf: AIMET encodings JSON with the activation encodings (w8a16, w4a16-qnn, w4a8-qnn: 16, 16 and 8 bits)")
	f.StringVar(&o.corpus, "corpus", "", "calibration text: --method gptq or awq without --stats runs it through the model one layer at a time (layer-sequential GPTQ or AWQ); gqf: the activation encodings when --encodings is not given")
	f.IntVar(&o.ctx, "ctx", 0, fmt.Sprintf("layer-sequential GPTQ and AWQ: chunk length in tokens (0: %d, capped at the model's context)", calibrate.DefaultCtx))
	f.IntVar(&o.tokens, "tokens", 0, "layer-sequential GPTQ and AWQ: calibration tokens (0: every full chunk of the corpus)")
	f.Uint64Var(&o.seed, "seed", 0, "layer-sequential GPTQ and AWQ: sample chunks at random with this seed (0: the head of the corpus)")
	f.IntVar(&o.maxLen, "max-len", 0, "gqf: the graph's fixed sequence length (default: the context, at most 128)")
	f.IntVar(&o.groupSize, "group-size", 128, "gqf w4a16/w4a8: int4 group size (16, 32, 64, 128, 256)")
	f.BoolVar(&o.sym, "sym", false, "gqf w4a16: symmetric int4 groups (no zero points)")
	f.StringVar(&o.keep, "keep", "", "gqf 4-bit schemes: regexp of tensor names kept at 8 bits (default: token_embd and output; \"none\": nothing)")
	f.StringVar(&o.rangeMode, "range", string(quantize.RangeSQNR), "gqf: activation range setting from --stats: minmax, percentile or sqnr")
	f.Float64Var(&o.percentile, "percentile", quantize.DefaultPercentile, "gqf: percentile for --range percentile")
	f.Float64Var(&o.smooth, "smooth", 0, "gqf w4a8: SmoothQuant migration strength α in (0, 1] from --stats (0: none)")
	f.BoolVar(&o.actOrder, "act-order", true, "--method gptq: process columns by decreasing Hessian diagonal (with static groups; GGUF blocks other than Q4_0 always run in column order)")
	f.Float64Var(&o.damp, "damp", 0.01, "--method gptq: damping, as a fraction of the mean Hessian diagonal")
	f.StringArrayVar(&o.tensorTypes, "tensor-type", nil, "override the type of tensors matching REGEX (REGEX=TYPE, repeatable)")
	f.BoolVar(&o.pure, "pure", false, "GGUF: every quantized tensor of the scheme's base type, without the scheme's mix rules (llama-quantize --pure; --tensor-type still applies)")
	f.BoolVar(&o.leaveOutput, "leave-output-tensor", false, "GGUF: keep output.weight as stored (llama-quantize --leave-output-tensor)")
	f.StringVar(&o.outputType, "output-tensor-type", "", "GGUF: the type of output.weight (and of a tied token_embd), e.g. q8_0 (llama-quantize --output-tensor-type)")
	f.StringVar(&o.tokenEmbType, "token-embedding-type", "", "GGUF: the type of token_embd.weight, e.g. q8_0 (llama-quantize --token-embedding-type)")
	f.StringVar(&o.pre, "pre", "", "tokenizer.ggml.pre value, when the pre-tokenizer is not recognised")
	f.StringVar(&o.name, "name", "", "general.name (default: the folder's name)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the plan and write nothing")
	addJSONFlag(f, &o.jsonOut, "the plan")
	f.BoolVar(&o.force, "force", false, "overwrite an existing output")
	addThreadsFlag(f, &o.threads)
	f.StringVar(&o.method, "method", "", "rtn, imatrix, gptq or awq (gqf; GGUF: gptq into the blocks of q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, iq4_xs and the K-quant mixes q2_k … q6_k; awq into q4_0; default: imatrix when --stats is given)")
	f.StringVar(&o.stats, "stats", "", "importance matrix: gquant calibrate stats, or llama-imatrix output (GGUF or .dat)")
	f.StringArrayVar(&o.kv, "kv", nil, "GGUF: set a metadata key, KEY=TYPE:VALUE with TYPE int (written as uint32), float, bool or str (repeatable; llama-quantize --override-kv)")
	f.Float64Var(&o.targetBPW, "target-bpw", 0, "GGUF: instead of --scheme, choose each linear weight's type (Q2_K … Q8_0, IQ4_XS; GPTQ with Hessians) to minimise the predicted KL at most this many bits per weight over the linear layers (needs --stats; sensitivities from --sensitivity or measured on --corpus)")
	f.StringVar(&o.targetSize, "target-size", "", "GGUF: as --target-bpw, for a file of at most this size (4.5G: powers of 1000; 512MiB)")
	f.StringVar(&o.sensitivity, "sensitivity", "", "the per-weight sensitivities --target-bpw/--target-size allocate from: read when the file exists (it must match the model, --stats and the settings), else measured on --corpus and written (also with --dry-run); with --scheme, the plan shows their predicted KL")
	f.IntVar(&o.chunks, "chunks", 16, "sensitivities: windows of --ctx tokens of --corpus to measure them on")
	f.StringVar(&o.splitMaxSize, "split-max-size", "", "split the output into files of at most this size (500M, 2G: powers of 1000, as llama-gguf-split; 512MiB)")
	return cmd
}

func runConvert(cmd *cobra.Command, g *globals, o *convertOptions, dir string) error {
	if o.out == "" && !o.dryRun {
		return usageErr("convert: -o OUT is required (or --dry-run)")
	}
	if o.out == stdoutName {
		return usageErr("convert: -o: a model is written to a file, not standard output")
	}
	if err := checkThreads("convert", o.threads); err != nil {
		return err
	}
	if o.groupSize <= 0 { // the flag's default is 128: 0 is asked for, not "the default"
		return usageErr("convert: --group-size: %d is not 16, 32, 64, 128 or 256", o.groupSize)
	}
	if o.maxLen < 0 {
		return usageErr("convert: --max-len: %d is negative (0: the context, at most 128)", o.maxLen)
	}
	if o.threads == 0 {
		o.threads = runtime.NumCPU()
	}
	target := o.targetBPW != 0 || o.targetSize != ""
	sequential := (o.method == convert.MethodGPTQ || o.method == convert.MethodAWQ) && o.stats == "" && o.corpus != "" && !target
	switch {
	case target && o.format != "gguf":
		return usageErr("convert: --target-bpw and --target-size write GGUF")
	case o.targetBPW != 0 && o.targetSize != "":
		return usageErr("convert: --target-bpw and --target-size exclude each other")
	case target && cmd.Flags().Changed("scheme"):
		return usageErr("convert: --target-bpw and --target-size choose the types: drop --scheme")
	case o.targetBPW < 0 || math.IsNaN(o.targetBPW) || math.IsInf(o.targetBPW, 0):
		return usageErr("convert: --target-bpw: %v is not a positive number of bits", o.targetBPW)
	case target && (cmd.Flags().Changed("tokens") || cmd.Flags().Changed("seed")):
		return usageErr("convert: --target-bpw and --target-size measure on --chunks windows of --ctx tokens (not --tokens, --seed)")
	case !target && o.sensitivity == "" && cmd.Flags().Changed("chunks"):
		return usageErr("convert: --chunks applies to --target-bpw, --target-size and --sensitivity")
	case o.sensitivity != "" && o.format != "gguf":
		return usageErr("convert: --sensitivity applies to GGUF output")
	case o.chunks < 1:
		return usageErr("convert: --chunks: %d windows (at least 1)", o.chunks)
	}
	switch {
	case o.method == convert.MethodGPTQ && o.stats == "" && o.corpus == "":
		return usageErr("convert: --method gptq needs --stats FILE (gquant calibrate --hessian) or --corpus FILE (layer-sequential)")
	case o.method == convert.MethodAWQ && o.stats == "" && o.corpus == "":
		return usageErr("convert: --method awq needs --stats FILE (gquant calibrate --hessian) or --corpus FILE (layer-sequential)")
	case !sequential && !target && (cmd.Flags().Changed("ctx") || cmd.Flags().Changed("tokens") || cmd.Flags().Changed("seed")):
		return usageErr("convert: --ctx, --tokens and --seed apply to layer-sequential GPTQ and AWQ (--method gptq|awq --corpus FILE, no --stats)")
	case o.ctx < 0 || o.tokens < 0:
		return usageErr("convert: --ctx and --tokens must not be negative")
	}
	var kvs []convert.KVOverride
	for _, s := range o.kv {
		kv, err := convert.ParseKVOverride(s)
		if err != nil {
			return usageErr("convert: --kv %v", err)
		}
		kvs = append(kvs, kv)
	}
	out := o.out
	if o.dryRun {
		out = ""
	}
	if err := checkOutputs(o.force, []string{dir, o.stats, o.encodings, o.corpus, o.sensitivity}, out, o.jsonOut); err != nil {
		return err
	}
	if o.format == "gqf" && len(o.kv) > 0 {
		return usageErr("convert: --kv applies to GGUF output")
	}
	if o.format == "gqf" && (o.pure || o.leaveOutput || o.outputType != "" || o.tokenEmbType != "") {
		return usageErr("convert: --pure, --leave-output-tensor, --output-tensor-type and --token-embedding-type apply to GGUF output (gqf: use --keep)")
	}
	switch o.format {
	case "gguf":
	case "gqf":
		return runConvertGQF(cmd, g, o, dir)
	default:
		return usageErr("convert: --format: unsupported format %q (supported: gguf, gqf)", o.format)
	}
	var overrides []convert.Override
	for _, s := range o.tensorTypes {
		ov, err := convert.ParseOverride(s)
		if err != nil {
			return usageErr("convert: %v", err)
		}
		overrides = append(overrides, ov)
	}
	if _, err := convert.PresetByName(o.scheme); err != nil && !target {
		return usageErr("convert: %v", err)
	}
	targetSize, err := parseSize(o.targetSize)
	if err != nil {
		return usageErr("convert: --target-size: %v", err)
	}
	split, err := parseSize(o.splitMaxSize)
	if err != nil {
		return usageErr("convert: --split-max-size: %v", err)
	}
	if split > 0 && split < 1e6 {
		return usageErr("convert: --split-max-size: %s is below 1M, the smallest part gguf-split makes", o.splitMaxSize)
	}
	opts := convert.Options{
		Scheme: o.scheme, Overrides: overrides, Pre: o.pre, Name: o.name,
		Threads: o.threads, Force: o.force, SplitMaxSize: split, DryRun: o.dryRun,
		Method: o.method, Stats: o.stats, KV: kvs, Pure: o.pure, LeaveOutput: o.leaveOutput,
		TargetBPW: o.targetBPW, TargetSize: targetSize, Sensitivity: o.sensitivity,
	}
	if o.leaveOutput && o.outputType != "" {
		return usageErr("convert: --leave-output-tensor and --output-tensor-type ask for two things: give one")
	}
	for _, tf := range []struct {
		flag, val string
		dst       **gguf.Type
	}{{"--output-tensor-type", o.outputType, &opts.OutputType}, {"--token-embedding-type", o.tokenEmbType, &opts.TokenEmbdType}} {
		if tf.val == "" {
			continue
		}
		t, err := convert.ParseTensorType(tf.val)
		if err != nil {
			return usageErr("convert: %s: %v", tf.flag, err)
		}
		*tf.dst = &t
	}
	if target || o.sensitivity != "" {
		opts.GPTQ = quantize.GPTQOptions{Damp: o.damp, ActOrder: o.actOrder, StaticGroups: o.actOrder}
		if o.corpus != "" && !sequential {
			threads := o.threads
			opts.Probe = &convert.ProbeConfig{Corpus: o.corpus, Ctx: o.ctx, Chunks: o.chunks,
				Open: func(corpus string, ctx, chunks int) (convert.Prober, error) {
					return verify.NewProbe(dir, verify.ProbeOptions{Corpus: corpus, Ctx: ctx, Chunks: chunks, Threads: threads})
				}}
		}
		if !g.quiet {
			stderr := cmd.ErrOrStderr()
			opts.MeasureProgress = func(done, total int) {
				if done == 1 || done == total || stderrIsTerminal() {
					fmt.Fprintf(stderr, "measured the sensitivities of %d of %d weights\n", done, total)
				}
			}
		}
	}
	if !g.quiet && !o.dryRun && stderrIsTerminal() {
		bar := newBar("converting")
		opts.Progress = bar.update
		defer bar.finish()
	}
	if o.method == convert.MethodGPTQ || o.method == convert.MethodAWQ {
		if o.splitMaxSize != "" {
			return usageErr("convert: --method %s: --split-max-size is not supported", o.method)
		}
		opts.GPTQ = quantize.GPTQOptions{Damp: o.damp, ActOrder: o.actOrder, StaticGroups: o.actOrder}
	}
	if sequential && !o.dryRun {
		seq, err := openSequence(cmd, g, o, dir)
		if err != nil {
			return optionErr("convert", err)
		}
		defer seq.Close()
		opts.Sequence = seq
	}
	plan, err := convert.Convert(dir, o.out, opts)
	if err != nil {
		return optionErr("convert", err)
	}
	if o.jsonOut != "" {
		if err := writeJSON(cmd.OutOrStdout(), o.jsonOut, plan); err != nil {
			return err
		}
	}
	switch {
	case o.dryRun && o.jsonOut != stdoutName:
		fmt.Fprint(cmd.OutOrStdout(), plan.Text())
	case !g.quiet && !o.dryRun:
		stderr := cmd.ErrOrStderr()
		wrote := o.out
		if n := len(plan.Parts); n > 0 {
			wrote = fmt.Sprintf("%s ... %s (%d parts)", plan.Parts[0].Path, plan.Parts[n-1].Path, n)
		}
		fmt.Fprintf(stderr, "wrote %s: %d tensors, %.2f MB, %.4f bpw (linear %.4f), %d fallbacks\n",
			wrote, len(plan.Tensors), float64(plan.OutputBytes)/1e6, plan.BPW, plan.BPWLinear, plan.Fallbacks)
		if tg := plan.Target; tg != nil {
			fmt.Fprintf(stderr, "target: %d weights chosen, predicted KL %.6g, other tensors as %s\n", tg.Weights, plan.PredictedKL, tg.Rules)
		}
		for _, p := range plan.Parts {
			if p.OverLimit {
				fmt.Fprintf(stderr, "warning: %s holds %.2f MB, over --split-max-size %s: one tensor is larger than the limit\n",
					p.Path, float64(p.Bytes)/1e6, o.splitMaxSize)
			}
		}
	}
	return nil
}

// runConvertGQF writes gquant's own format (gqfconv.Schemes).
func runConvertGQF(cmd *cobra.Command, g *globals, o *convertOptions, dir string) error {
	opts := gqfconv.Options{
		Scheme: o.scheme, Method: o.method, GroupSize: o.groupSize, Sym: o.sym, Keep: o.keep,
		Range:  quantize.RangeOptions{Mode: quantize.RangeMode(o.rangeMode), Percentile: o.percentile},
		Smooth: o.smooth, GPTQ: quantize.GPTQOptions{Damp: o.damp, ActOrder: o.actOrder, StaticGroups: o.actOrder},
		Threads: o.threads, MaxLen: o.maxLen, Encodings: o.encodings, Corpus: o.corpus,
		Force: o.force, DryRun: o.dryRun, Version: version,
		Command: recordedCommand(os.Args[1:]),
	}
	if len(o.tensorTypes) > 0 {
		return usageErr("convert: --tensor-type applies to GGUF output (gqf: use --keep)")
	}
	if !g.quiet && !o.dryRun && stderrIsTerminal() {
		bar := newBar("converting")
		opts.Progress = bar.update
		defer bar.finish()
	}
	if o.stats != "" {
		st, err := stats.Read(o.stats)
		if err != nil {
			return err
		}
		opts.Stats, opts.StatsPath = st, o.stats
	}
	if (o.method == convert.MethodGPTQ || o.method == convert.MethodAWQ) && o.stats == "" && !o.dryRun {
		seq, err := openSequence(cmd, g, o, dir)
		if err != nil {
			return optionErr("convert", err)
		}
		defer seq.Close()
		opts.Sequence = seq
	}
	plan, err := gqfconv.Convert(dir, o.out, opts)
	if err != nil {
		return optionErr("convert", err)
	}
	if o.jsonOut != "" {
		if err := writeJSON(cmd.OutOrStdout(), o.jsonOut, plan); err != nil {
			return err
		}
	}
	switch {
	case o.dryRun && o.jsonOut != stdoutName:
		fmt.Fprint(cmd.OutOrStdout(), plan.Text())
	case !g.quiet && !o.dryRun:
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %s (%s), %d tensors, %.2f MB, %.4f bpw (linear %.4f), %d fallbacks, in %.2f s\n",
			o.out, plan.Scheme, plan.Method, len(plan.Tensors), float64(plan.OutputBytes)/1e6, plan.BPW, plan.BPWLinear, plan.Fallbacks, plan.Seconds)
	}
	return nil
}

// recordedCommand is the command line a gqf file records: the arguments, without those that
// change no byte of the output (--threads, --force, --quiet), so that the same conversion on
// another machine or thread count gives the same file.
func recordedCommand(args []string) string {
	out := []string{"gquant"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--force" || a == "-q" || a == "--quiet":
			continue
		case a == "--threads":
			i++ // and its value
			continue
		case strings.HasPrefix(a, "--threads=") || strings.HasPrefix(a, "--force=") || strings.HasPrefix(a, "--quiet="):
			continue
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}

// sequenceGCPercent is the garbage collector's target for layer-sequential runs (unless GOGC
// is set): each GPTQ plan allocates its 0.5–1.6 GB of float64 scratch afresh (on an 8B
// model), and at Go's default, the heap grows to twice what is live before a collection. At
// 50, a 2-layer Llama-3-8B-shaped model peaked at 4.10 GB of anonymous memory instead of 4.78,
// in the same time (354 s against 352; docs/scale.md).
const sequenceGCPercent = 50

// openSequence loads the model for layer-sequential GPTQ or AWQ over --corpus
// (calibrate.Sequential).
func openSequence(cmd *cobra.Command, g *globals, o *convertOptions, dir string) (*calibrate.Sequential, error) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(sequenceGCPercent)
	}
	seq, err := calibrate.NewSequential(dir, calibrate.Options{Corpus: o.corpus, Ctx: o.ctx, Tokens: o.tokens, Seed: o.seed, Threads: o.threads})
	if err != nil {
		return nil, err
	}
	if !g.quiet {
		stderr := cmd.ErrOrStderr()
		fmt.Fprintf(stderr, "layer-sequential %s: %d calibration tokens through %d layers\n", strings.ToUpper(o.method), seq.Tokens(), seq.Layers())
	}
	return seq, nil
}
