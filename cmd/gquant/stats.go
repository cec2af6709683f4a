package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gquant/gquant/formats/stats"
)

func init() { extraCommands = append(extraCommands, newStatsCmd) }

// statsMergeOptions are the flags of gquant stats merge.
type statsMergeOptions struct {
	out            string
	force, partial bool
}

func newStatsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Work on calibration statistics files",
		Args:  argsN(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErr("stats: a subcommand is required (gquant stats merge STATS... -o OUT)")
		},
	}
	cmd.AddCommand(newStatsMergeCmd(g))
	return cmd
}

func newStatsMergeCmd(g *globals) *cobra.Command {
	o := &statsMergeOptions{}
	cmd := &cobra.Command{
		Use:   "merge STATS... -o OUT",
		Short: "Add up statistics of calibration shards (or llama.cpp imatrix files)",
		Long: "merge adds up statistics files into one: gquant statistics of the shards of one calibration\n" +
			"(gquant calibrate --shard I/N: the same model, corpus and chunking, no chunk twice), exactly,\n" +
			"so that merging every shard gives the statistics of one unsharded run, bit for bit; or\n" +
			"llama.cpp imatrix files (GGUF or legacy .dat), as llama-imatrix --in-file does (OUT ending in\n" +
			".dat is written in the legacy format). An incomplete set of shards is refused unless\n" +
			"--partial is given; its result merges later with the missing shards.",
		Args: argsN(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatsMerge(cmd.ErrOrStderr(), g, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "output", "o", "", "the merged statistics file")
	f.BoolVar(&o.partial, "partial", false, "merge shards that do not cover every chunk")
	f.BoolVar(&o.force, "force", false, "overwrite an existing output")
	return cmd
}

func runStatsMerge(stderr io.Writer, g *globals, o *statsMergeOptions, inputs []string) error {
	if o.out == "" {
		return usageErr("stats merge: -o OUT is required")
	}
	if err := checkOutputs(o.force, inputs, o.out); err != nil {
		return err
	}
	res, err := stats.MergeFiles(inputs, o.out, stats.MergeOptions{Partial: o.partial})
	if err != nil {
		return err
	}
	if !g.quiet {
		switch {
		case res.Kind != "gquant":
			fmt.Fprintf(stderr, "merged %d imatrix files (%d chunks)\n", len(inputs), res.Chunks)
		case res.Complete:
			fmt.Fprintf(stderr, "merged %d files: all %d chunks, as one run\n", len(inputs), res.Chunks)
		default:
			fmt.Fprintf(stderr, "merged %d files: %d of %d chunks (shards %v missing)\n", len(inputs), res.Chunks, res.WindowChunks, res.Missing)
		}
		fmt.Fprintf(stderr, "wrote %s\n", o.out)
	}
	return nil
}
