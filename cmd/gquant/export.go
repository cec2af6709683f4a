package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gquant/gquant/convert/export"
	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
)

func init() { extraCommands = append(extraCommands, newExportCmd) }

// exportOptions are the flags of gquant export.
type exportOptions struct {
	to           string
	out          string
	qdq          bool
	ar, ctx      int
	parts        int
	aimetVersion string
	force        bool
}

func newExportCmd(g *globals) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export FILE.gqf --to onnx|onnx-kv|aimet-json -o OUT",
		Short: "Export a gqf file as ONNX graphs (float or QDQ) or as AIMET encodings JSON",
		Long: "Export the decoder of a gqf file for Qualcomm's and ONNX Runtime's tools (standard ONNX ops, opset 21):\n" +
			"  --to onnx        one graph, input_ids int64 [batch, max_len] -> logits, no KV cache; weights over\n" +
			"                   1 GiB go to OUT.data (ONNX external data)\n" +
			"  --to onnx-kv     a folder (-o DIR) of deployment graphs over a KV cache, Qualcomm AI Hub's I/O:\n" +
			"                   prompt.onnx (--ar new positions per run, default 128) and token.onnx (one), over\n" +
			"                   a context of --ctx positions (default the model's, at most 4096); with --parts K,\n" +
			"                   K graphs per mode of consecutive layers (prompt_part1_of_K.onnx, ...); weights in\n" +
			"                   external data shared by the prompt and token graphs; metadata.json (shapes,\n" +
			"                   rope_inv_freq, mask value, token ids) and, for a file with activation encodings,\n" +
			"                   encodings.json (AIMET). docs/npu.md has the I/O contract\n" +
			"  --to aimet-json  the encodings keyed by the float ONNX export's tensor names (with --ar/--ctx: the\n" +
			"                   onnx-kv graphs' names), for qairt-converter --quantization_overrides (AIMET 1.0.0,\n" +
			"                   or 0.6.1 with --encodings-version 0.6.1)\n" +
			"With --qdq the graphs are quantized: QuantizeLinear/DequantizeLinear around every activation and\n" +
			"integer weights behind DequantizeLinear; the file needs static activation encodings (the QNN\n" +
			"schemes w8a16, w4a16-qnn = w4a16-lpbq, w4a8-qnn; w4a16 and w4a8 are CPU schemes with float\n" +
			"activations: export them without --qdq).",
		Args: argsN(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(o, args[0], cmd, g.quiet)
		},
	}
	cmd.Flags().StringVar(&o.to, "to", "", "output kind: onnx, onnx-kv or aimet-json")
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "output file (a folder for onnx-kv)")
	cmd.Flags().BoolVar(&o.qdq, "qdq", false, "ONNX in QDQ form (quantized activations and weights)")
	cmd.Flags().IntVar(&o.ar, "ar", 0, "onnx-kv, aimet-json: new positions per run of the prompt graph (default 128)")
	cmd.Flags().IntVar(&o.ctx, "ctx", 0, "onnx-kv, aimet-json: context length of the KV cache (default the model's, at most 4096)")
	cmd.Flags().IntVar(&o.parts, "parts", 1, "onnx-kv: split each graph into this many consecutive ranges of layers")
	cmd.Flags().StringVar(&o.aimetVersion, "encodings-version", encodings.V1, "AIMET encodings version: 1.0.0 or 0.6.1")
	// The flag's old name, kept for existing scripts.
	cmd.Flags().StringVar(&o.aimetVersion, "aimet-version", encodings.V1, "")
	cmd.Flags().MarkDeprecated("aimet-version", "use --encodings-version")
	cmd.Flags().BoolVar(&o.force, "force", false, "overwrite an existing output")
	return cmd
}

func runExport(o *exportOptions, path string, cmd *cobra.Command, quiet bool) error {
	if o.out == "" {
		return usageErr("export: -o OUT is required")
	}
	kvFlags := cmd.Flags().Changed("ar") || cmd.Flags().Changed("ctx")
	switch o.to {
	case "onnx":
		if kvFlags || cmd.Flags().Changed("parts") {
			return usageErr("export: --ar, --ctx and --parts apply to --to onnx-kv (and --ar, --ctx to aimet-json)")
		}
	case "onnx-kv":
	case "aimet-json":
		if cmd.Flags().Changed("parts") {
			return usageErr("export: --parts applies to --to onnx-kv")
		}
	default:
		return usageErr("export: --to %q: want onnx, onnx-kv or aimet-json", o.to)
	}
	switch {
	case o.qdq && o.to == "aimet-json":
		return usageErr("export: --qdq applies to --to onnx and onnx-kv")
	case o.ar < 0 || o.ctx < 0:
		return usageErr("export: --ar and --ctx must be positive")
	case o.parts < 1:
		return usageErr("export: --parts %d: want at least 1", o.parts)
	case o.aimetVersion != encodings.V1 && o.aimetVersion != encodings.V061:
		return usageErr("export: --encodings-version %q: want %s or %s", o.aimetVersion, encodings.V1, encodings.V061)
	case o.out == stdoutName:
		return usageErr("export: -o: the export is written to a file, not standard output")
	}
	if o.to != "onnx-kv" {
		if err := checkOutputs(o.force, []string{path}, o.out); err != nil {
			return err
		}
	}
	f, err := gqf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	stderr := cmd.ErrOrStderr()
	if quiet {
		stderr = io.Discard
	}
	var written []export.Written
	switch {
	case o.to == "onnx":
		if written, err = export.WriteONNX(o.out, f, export.Options{QDQ: o.qdq, Version: version}, o.force); err != nil {
			return err
		}
	case o.to == "onnx-kv":
		if written, err = export.WriteKV(o.out, f, export.KVOptions{QDQ: o.qdq, AR: o.ar, Ctx: o.ctx, Parts: o.parts, Version: version, Force: o.force}); err != nil {
			return err
		}
	case kvFlags:
		if err := export.WriteAIMETKV(o.out, f, o.ar, o.ctx, o.aimetVersion, o.force); err != nil {
			return err
		}
	default:
		if err := export.WriteAIMET(o.out, f, o.aimetVersion, o.force); err != nil {
			return err
		}
	}
	printWritten(stderr, o, f, written)
	return nil
}

// printWritten says what export wrote: each file with its size, and for ONNX the graphs.
func printWritten(w io.Writer, o *exportOptions, f *gqf.File, written []export.Written) {
	form := "float"
	if o.qdq {
		form = "QDQ"
	}
	switch o.to {
	case "aimet-json":
		fmt.Fprintf(w, "wrote %s: AIMET encodings %s of %s (scheme %s)\n", o.out, o.aimetVersion, filepath.Base(f.Path), f.Manifest.Scheme)
		return
	case "onnx":
		fmt.Fprintf(w, "wrote %s: %s ONNX graph of %s (scheme %s), input_ids [batch, %d] -> logits\n", o.out, form, filepath.Base(f.Path), f.Manifest.Scheme, f.Manifest.Graph.GetMaxLen())
	case "onnx-kv":
		var graphs []string
		for _, x := range written {
			if strings.HasSuffix(x.Path, ".onnx") {
				graphs = append(graphs, strings.TrimSuffix(filepath.Base(x.Path), ".onnx"))
			}
		}
		fmt.Fprintf(w, "wrote %s: %s deployment graphs of %s (scheme %s): %s\n", o.out, form, filepath.Base(f.Path), f.Manifest.Scheme, strings.Join(graphs, ", "))
	}
	var total int64
	width := len("total")
	for _, x := range written {
		width = max(width, len(x.Path))
	}
	for _, x := range written {
		fmt.Fprintf(w, "  %-*s %10.2f MB\n", width, x.Path, float64(x.Size)/1e6)
		total += x.Size
	}
	if len(written) > 1 {
		fmt.Fprintf(w, "  %-*s %10.2f MB\n", width, "total", float64(total)/1e6)
	}
}
