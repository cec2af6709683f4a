package main

import (
	"bufio"
	"fmt"
	"io"
	"math"

	"github.com/spf13/cobra"

	"github.com/gquant/gquant/runtime"
)

func init() { extraCommands = append(extraCommands, newRunCmd) }

// runOptions are the flags of gquant run.
type runOptions struct {
	n         int
	temp      float64
	topK      int
	topP      float64
	seed      uint64
	threads   int
	ignoreEOS bool
	acts      string
}

func newRunCmd(g *globals) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run MODEL PROMPT",
		Short: "Generate text from a prompt (greedy unless --temp is set)",
		Long: "run loads MODEL (a HuggingFace folder or a GGUF file), evaluates PROMPT and streams the prompt\n" +
			"and its continuation to stdout. Without --temp the continuation is greedy.",
		Args: argsN(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.n < 0 {
				return usageErr("run: -n: must not be negative, got %d", o.n)
			}
			if err := checkThreads("run", o.threads); err != nil {
				return err
			}
			if o.topK < 0 {
				return usageErr("run: --top-k: must not be negative, got %d", o.topK)
			}
			if !(o.topP >= 0 && o.topP <= 1) {
				return usageErr("run: --top-p: %g is not a probability in [0, 1]", o.topP)
			}
			if !(o.temp >= 0) || math.IsInf(o.temp, 1) {
				return usageErr("run: --temp: must be a finite number ≥ 0, got %g", o.temp)
			}
			if _, err := parseActs("run", "--acts", o.acts); err != nil {
				return err
			}
			return runRun(cmd.OutOrStdout(), o, args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.n, "n", "n", 128, "number of tokens to generate")
	f.Float64Var(&o.temp, "temp", 0, "sampling temperature (0: greedy)")
	f.IntVar(&o.topK, "top-k", 0, "sample from the K most likely tokens only (0: all)")
	f.Float64Var(&o.topP, "top-p", 0, "sample from the smallest set of tokens reaching this probability (0: all)")
	f.Uint64Var(&o.seed, "seed", 0, "random seed for sampling")
	addThreadsFlag(f, &o.threads)
	f.BoolVar(&o.ignoreEOS, "ignore-eos", false, "keep generating after an end-of-sequence token")
	addActsFlag(cmd, &o.acts)
	return cmd
}

// runRun generates and streams text.
func runRun(stdout io.Writer, o *runOptions, model, prompt string) error {
	mode, err := parseActs("run", "--acts", o.acts)
	if err != nil {
		return err
	}
	m, err := runtime.Load(model, runtime.Options{Threads: o.threads, Mode: mode})
	if err != nil {
		return err
	}
	defer m.Close()
	tok := m.Tokenizer()
	ids := tok.Encode(prompt, true)
	if len(ids) == 0 {
		return fmt.Errorf("%s: prompt: encodes to no tokens", model)
	}
	if err := m.CheckContext(0, len(ids)+o.n); err != nil {
		return fmt.Errorf("%w (a prompt of %d tokens, then -n %d)", err, len(ids), o.n)
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	fmt.Fprint(w, prompt)
	w.Flush()
	// The stream decodes the continuation in the context of the prompt, so that the first
	// new token keeps its leading space.
	stream := tok.NewStream()
	for _, id := range ids {
		if !tok.IsSpecial(id) {
			stream.Add(id)
		}
	}
	stream.Flush()
	var werr error
	err = m.Generate(ids, o.n, runtime.Sampler{
		Temperature: o.temp, TopK: o.topK, TopP: o.topP, Seed: o.seed, IgnoreEOS: o.ignoreEOS,
	}, func(id int) bool {
		if _, werr = io.WriteString(w, stream.Add(id)); werr == nil {
			werr = w.Flush()
		}
		return werr == nil
	})
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	fmt.Fprintln(w, stream.Flush())
	return w.Flush()
}
