package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/kernels"
)

func init() { extraCommands = append(extraCommands, newBenchCmd) }

// benchOptions are the flags of gquant bench.
type benchOptions struct {
	prompt  int
	gen     int
	reps    int
	threads int
	jsonOut string
	kernels string
	acts    string
	force   bool
}

func newBenchCmd(g *globals) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench MODEL",
		Short: "Measure prefill and decode speed (tokens per second), as llama-bench does",
		Long: "bench loads MODEL and measures prompt processing (one batch of -p tokens, ppN) and text\n" +
			"generation (-n tokens one at a time, tgN), each from an empty context, after a warm-up run;\n" +
			"figures are the mean ± standard deviation over -r repetitions.",
		Args: argsN(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.prompt < 0 || o.gen < 0 || o.prompt+o.gen == 0 {
				return usageErr("bench: -p and -n must not be negative, and not both 0")
			}
			if err := checkThreads("bench", o.threads); err != nil {
				return err
			}
			if o.jsonOut != "" && o.jsonOut != stdoutName {
				if err := checkOutputs(o.force, []string{args[0]}, o.jsonOut); err != nil {
					return err
				}
			}
			if o.reps < 1 {
				return usageErr("bench: -r: must be at least 1, got %d", o.reps)
			}
			if _, err := parseActs("bench", "--acts", o.acts); err != nil {
				return err
			}
			if o.kernels != "" {
				restore, err := kernels.SetImpl(o.kernels)
				if err != nil {
					return usageErr("bench: --kernels: %q is not available here (have %s)", o.kernels, strings.Join(kernels.Impls(), ", "))
				}
				defer restore()
			}
			return runBench(cmd.OutOrStdout(), o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.prompt, "p", "p", 512, "prompt tokens (prefill test; 0: skip)")
	f.IntVarP(&o.gen, "n", "n", 128, "generated tokens (decode test; 0: skip)")
	f.IntVarP(&o.reps, "r", "r", 3, "repetitions of each test")
	addThreadsFlag(f, &o.threads)
	addJSONFlag(f, &o.jsonOut, "the measurements")
	f.BoolVar(&o.force, "force", false, "overwrite an existing --json file")
	addActsFlag(cmd, &o.acts)
	f.StringVar(&o.kernels, "kernels", "", "kernel implementation to measure (default: the best this CPU runs; one of "+strings.Join(kernels.Impls(), ", ")+")")
	return cmd
}

// benchResult is what bench --json prints.
type benchResult struct {
	Model       string  `json:"model"`
	Threads     int     `json:"threads"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	PrefillSD   float64 `json:"prefill_tok_s_sd"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	DecodeSD    float64 `json:"decode_tok_s_sd"`
	// BytesPerToken is the weight bytes a decoded token read (measured over the decode
	// runs: a mixture of experts reads its routed experts' only); WeightBytes all the model's.
	BytesPerToken int64   `json:"bytes_per_token"`
	WeightBytes   int64   `json:"weight_bytes"`
	PromptTokens  int     `json:"prompt_tokens"`
	GenTokens     int     `json:"gen_tokens"`
	Repetitions   int     `json:"repetitions"`
	BPW           float64 `json:"bpw"`
	Kernels       string  `json:"kernels"`
	Acts          string  `json:"acts"`
}

func runBench(stdout io.Writer, o *benchOptions, model string) error {
	mode, err := parseActs("bench", "--acts", o.acts)
	if err != nil {
		return err
	}
	m, err := runtime.Load(model, runtime.Options{Threads: o.threads, Mode: mode})
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.CheckContext(0, max(o.prompt, o.gen)); err != nil {
		return fmt.Errorf("%w (-p %d, -n %d)", err, o.prompt, o.gen)
	}
	ids := benchTokens(m.Vocab(), max(o.prompt, 1))
	st := m.NewState(max(o.prompt, o.gen, 8))

	prefill := func() error {
		st.Reset()
		_, err := m.Eval(st, ids[:o.prompt], false)
		return err
	}
	// The weight bytes the decode runs read (State.BytesRead): every token reads the dense
	// weights and, of a mixture of experts, the experts it is routed to only.
	var decodeRead, decodeTokens int64
	decode := func(n int) error {
		st.Reset()
		read := st.BytesRead()
		id := ids[0]
		for i := 0; i < n; i++ {
			l, err := m.Eval(st, []int{id}, false)
			if err != nil {
				return err
			}
			id = runtime.Argmax(l)
		}
		decodeRead += st.BytesRead() - read
		decodeTokens += int64(n)
		return nil
	}
	// Warm-up: page the weights in, let the pool and buffers settle.
	if o.prompt > 0 {
		if err := prefill(); err != nil {
			return err
		}
	}
	if err := decode(min(max(o.gen, 1), 8)); err != nil {
		return err
	}

	res := benchResult{Model: model, Threads: m.Threads(), BytesPerToken: decodeRead / decodeTokens, WeightBytes: m.Bytes(),
		PromptTokens: o.prompt, GenTokens: o.gen, Repetitions: o.reps, Kernels: kernels.Impl(), Acts: o.acts}
	res.BPW, _ = m.BPW()
	if o.prompt > 0 {
		res.PrefillTokS, res.PrefillSD, err = timeRuns(o.reps, o.prompt, prefill)
		if err != nil {
			return err
		}
	}
	if o.gen > 0 {
		res.DecodeTokS, res.DecodeSD, err = timeRuns(o.reps, o.gen, func() error { return decode(o.gen) })
		if err != nil {
			return err
		}
	}
	if o.jsonOut != "" {
		if err := writeJSON(stdout, o.jsonOut, res); err != nil || o.jsonOut == stdoutName {
			return err
		}
	}
	fmt.Fprintf(stdout, "model: %s (%.2f bpw, %.2f MB read per token of %.2f MB of weights, %d threads, kernels %s)\n",
		model, res.BPW, float64(res.BytesPerToken)/1e6, float64(res.WeightBytes)/1e6, res.Threads, res.Kernels)
	if o.prompt > 0 {
		fmt.Fprintf(stdout, "pp%-5d %10.2f ± %.2f tok/s\n", o.prompt, res.PrefillTokS, res.PrefillSD)
	}
	if o.gen > 0 {
		fmt.Fprintf(stdout, "tg%-5d %10.2f ± %.2f tok/s  (%.2f GB/s of weights)\n", o.gen, res.DecodeTokS, res.DecodeSD,
			res.DecodeTokS*float64(res.BytesPerToken)/1e9)
	}
	return nil
}

// timeRuns runs f reps times and returns the mean and standard deviation of tokens/seconds.
func timeRuns(reps, tokens int, f func() error) (mean, sd float64, err error) {
	rates := make([]float64, reps)
	for i := range rates {
		start := time.Now()
		if err := f(); err != nil {
			return 0, 0, err
		}
		rates[i] = float64(tokens) / time.Since(start).Seconds()
		mean += rates[i]
	}
	mean /= float64(reps)
	if reps > 1 {
		for _, r := range rates {
			sd += (r - mean) * (r - mean)
		}
		sd = math.Sqrt(sd / float64(reps-1))
	}
	return mean, sd, nil
}

// benchTokens returns n deterministic pseudo-random token ids below vocab (as llama-bench
// feeds random tokens).
func benchTokens(vocab, n int) []int {
	ids := make([]int, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range ids {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		ids[i] = int(x % uint64(vocab))
	}
	return ids
}
