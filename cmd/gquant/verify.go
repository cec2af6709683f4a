package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/runtime/kernels"
	"github.com/gquant/gquant/verify"
)

func init() { extraCommands = append(extraCommands, newVerifyCmd) }

type verifyOptions struct {
	ref, corpus        string
	ctx, chunks        int
	snr                bool
	jsonOut, plot      string
	html               string
	minSNR, maxKL      float64
	minTop1            float64
	prompts            string
	gen                int
	saveRef, refLogits string
	threads            int
	force              bool
	acts, refActs      string
}

func newVerifyCmd(g *globals) *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify ARTIFACT --ref MODEL_DIR --corpus FILE",
		Short: "Measure how far an artifact is from its reference (SNR, KL, top-1, greedy)",
		Long: "Verify runs the artifact and the reference model over a corpus in llama-perplexity's protocol\n" +
			"(windows of --ctx tokens, BOS first, the second half of each window scored) and reports the logits\n" +
			"SNR and peak SNR in dB, KL(ref‖test), same top-1, Δp, perplexities, greedy reproductions and the\n" +
			"artifact's bits per weight. With --min-snr, --max-kl or --min-top1 it exits with 3 when a limit fails.\n" +
			"--save-ref keeps the reference's log-probabilities (llama-perplexity's --kl-divergence-base format);\n" +
			"--ref-logits reads such a file (also llama.cpp's own) instead of running the reference.",
		Args: argsN(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error { return runVerify(cmd, g, o, args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.ref, "ref", "", "reference model (HuggingFace folder or any artifact the runtime loads)")
	f.StringVar(&o.corpus, "corpus", "", "evaluation text")
	f.IntVar(&o.ctx, "ctx", verify.DefaultCtx, "tokens per window (with --ref-logits: the file's)")
	f.IntVar(&o.chunks, "chunks", 0, "windows to score (0: all)")
	f.BoolVar(&o.snr, "snr", false, "also the SNR of the hidden state after every block")
	addJSONFlag(f, &o.jsonOut, "the report")
	f.StringVar(&o.plot, "plot", "", "write per-layer SNR bars and a KL histogram, with the thresholds, to FILE.png")
	f.StringVar(&o.html, "html", "", "write a self-contained HTML report (verdict, thresholds, metrics, plots, per-block table) to FILE")
	f.Float64Var(&o.minSNR, "min-snr", 0, "fail (exit 3) when the logits SNR is below DB")
	f.Float64Var(&o.maxKL, "max-kl", 0, "fail (exit 3) when the mean KL is above X")
	f.Float64Var(&o.minTop1, "min-top1", 0, "fail (exit 3) when the same-top-1 rate is below P percent (0–100, as the report shows it)")
	f.StringVar(&o.prompts, "prompts", "", "greedy prompts, one per line (default: 12 built-in prompts)")
	f.IntVar(&o.gen, "gen", 32, "tokens per greedy continuation (0: no greedy check)")
	f.StringVar(&o.saveRef, "save-ref", "", "store the reference's log-probabilities in FILE for later --ref-logits")
	f.StringVar(&o.refLogits, "ref-logits", "", "use stored reference log-probabilities (gquant --save-ref or llama-perplexity --kl-divergence-base)")
	addThreadsFlag(f, &o.threads)
	f.BoolVar(&o.force, "force", false, "overwrite existing output files")
	addActsFlag(cmd, &o.acts)
	f.StringVar(&o.refActs, "ref-acts", "default", "the reference's activation arithmetic, as --acts: default (float32 "+
		"activations for F32, F16 and BF16 weights), float, or quant (llama.cpp's: what llama-perplexity's base pass "+
		"computes, bf16-rounded activations for a BF16 reference, VDPBF16PS where the CPU has it)")
	return cmd
}

func runVerify(cmd *cobra.Command, g *globals, o *verifyOptions, artifact string) error {
	flags := cmd.Flags()
	if !(o.minTop1 >= 0 && o.minTop1 <= 100) {
		return usageErr("verify: --min-top1: %g is not a percentage in [0, 100]", o.minTop1)
	}
	if math.IsNaN(o.minSNR) {
		return usageErr("verify: --min-snr: NaN is not a number of dB")
	}
	if math.IsNaN(o.maxKL) || math.IsInf(o.maxKL, 0) {
		return usageErr("verify: --max-kl: %g is not a finite KL", o.maxKL)
	}
	if o.gen < 0 || o.chunks < 0 || o.ctx < 4 {
		return usageErr("verify: --gen and --chunks must not be negative, --ctx at least 4")
	}
	if err := checkThreads("verify", o.threads); err != nil {
		return err
	}
	mode, err := parseActs("verify", "--acts", o.acts)
	if err != nil {
		return err
	}
	refMode, err := parseActs("verify", "--ref-acts", o.refActs)
	if err != nil {
		return err
	}
	if refMode != kernels.ActDefault && o.refLogits != "" {
		return usageErr("verify: --ref-acts: the reference is not run with --ref-logits")
	}
	if o.refLogits == "" && (o.ref == "" || o.corpus == "") {
		return usageErr("verify: --ref MODEL and --corpus FILE are needed (or --ref-logits FILE, which holds the reference and the tokens)")
	}
	if o.plot == stdoutName || o.saveRef == stdoutName || o.html == stdoutName {
		return usageErr("verify: --plot, --html and --save-ref write files: - (standard output) is for --json")
	}
	if err := checkOutputs(o.force, []string{artifact, o.ref, o.corpus, o.refLogits, o.prompts},
		o.jsonOut, o.plot, o.html, o.saveRef); err != nil {
		return err
	}
	var limits verify.Limits
	if flags.Changed("min-snr") {
		limits.MinSNR = &o.minSNR
	}
	if flags.Changed("max-kl") {
		limits.MaxKL = &o.maxKL
	}
	if flags.Changed("min-top1") {
		top1 := o.minTop1 / 100
		limits.MinTop1 = &top1
	}
	vo := verify.Options{
		Artifact: artifact, Ref: o.ref, Corpus: o.corpus, RefLogits: o.refLogits, SaveRef: o.saveRef,
		Force: o.force, Chunks: o.chunks, LayerSNR: o.snr, NeedSNR: limits.MinSNR != nil,
		Gen: o.gen, PromptsFile: o.prompts, Threads: o.threads,
	}
	if flags.Changed("ctx") {
		vo.Ctx = o.ctx
	}
	vo.Open = func(path string, threads int) (verify.Model, error) { // the artifact
		return verify.OpenRuntimeMode(path, threads, mode)
	}
	vo.OpenRef = func(path string, threads int) (verify.Model, error) {
		return verify.OpenRuntimeMode(path, threads, refMode)
	}
	if o.prompts != "" {
		b, err := os.ReadFile(o.prompts)
		if err != nil {
			return err
		}
		if err := calibrate.CheckText(o.prompts, b); err != nil {
			return err
		}
		vo.Prompts = []string{}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimRight(line, "\r"); strings.TrimSpace(line) != "" {
				vo.Prompts = append(vo.Prompts, line)
			}
		}
		if len(vo.Prompts) == 0 {
			return fmt.Errorf("%s: no prompts (one per line)", o.prompts)
		}
	}
	stderr := cmd.ErrOrStderr()
	if !g.quiet && stderrIsTerminal() {
		vo.Progress = func(done, total int) {
			fmt.Fprintf(stderr, "\rverify: window %d/%d", done, total)
			if done == total {
				fmt.Fprintln(stderr)
			}
		}
	}
	rep, err := verify.Run(vo)
	if err != nil {
		return err
	}
	rep.Command = commandLine(cmd, artifact)
	rep.GquantVersion = version
	fails := rep.Apply(limits)
	text := cmd.OutOrStdout()
	if o.jsonOut == stdoutName { // standard output carries the JSON alone; the text goes to stderr
		text = io.Discard
		if !g.quiet {
			text = stderr
		}
	}
	if err := rep.WriteText(text); err != nil {
		return err
	}
	if o.jsonOut != "" {
		if err := writeJSON(cmd.OutOrStdout(), o.jsonOut, rep); err != nil {
			return err
		}
	}
	if o.plot != "" {
		if err := rep.WritePlot(o.plot); err != nil {
			return err
		}
	}
	if o.html != "" {
		if err := rep.WriteHTML(o.html); err != nil {
			return err
		}
	}
	if len(fails) > 0 {
		return &codedError{exitThreshold, fmt.Errorf("verify: %s: threshold failed: %s", artifact, strings.Join(fails, "; "))}
	}
	return nil
}

// commandLine rebuilds the command as run: the verb, the flags that were set and the artifact.
func commandLine(cmd *cobra.Command, artifact string) string {
	parts := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" && f.Value.String() == "true" {
			parts = append(parts, "--"+f.Name)
			return
		}
		parts = append(parts, "--"+f.Name, shellQuote(f.Value.String()))
	})
	return strings.Join(append(parts, shellQuote(artifact)), " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
