package main

import (
	"fmt"

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
	aimetVersion string
	force        bool
}

func newExportCmd(g *globals) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export FILE.gqf --to onnx|aimet-json -o OUT",
		Short: "Export a gqf file as ONNX (float or QDQ) or as AIMET encodings JSON",
		Long: "Export the decoder graph of a gqf file for Qualcomm's and ONNX Runtime's tools:\n" +
			"  --to onnx        the decoder as ONNX (opset 21): input_ids int64 [batch, max_len] -> logits;\n" +
			"                   float weights, or with --qdq QuantizeLinear/DequantizeLinear around every\n" +
			"                   activation and integer weights (needs activation encodings: w8a16, w4a16, w4a8)\n" +
			"  --to aimet-json  the encodings keyed by the float ONNX model's tensor names (AIMET 1.0.0, or\n" +
			"                   0.6.1 with --encodings-version 0.6.1), for qairt-converter --quantization_overrides",
		Args: argsN(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runExport(o, args[0]); err != nil {
				return err
			}
			if !g.quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", o.out)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.to, "to", "", "output kind: onnx or aimet-json")
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "output file")
	cmd.Flags().BoolVar(&o.qdq, "qdq", false, "ONNX in QDQ form (quantized activations and weights)")
	cmd.Flags().StringVar(&o.aimetVersion, "encodings-version", encodings.V1, "AIMET encodings version: 1.0.0 or 0.6.1")
	// The flag's old name, kept for existing scripts.
	cmd.Flags().StringVar(&o.aimetVersion, "aimet-version", encodings.V1, "")
	cmd.Flags().MarkDeprecated("aimet-version", "use --encodings-version")
	cmd.Flags().BoolVar(&o.force, "force", false, "overwrite an existing output")
	return cmd
}

func runExport(o *exportOptions, path string) error {
	if o.out == "" {
		return usageErr("export: -o OUT is required")
	}
	switch o.to {
	case "onnx", "aimet-json":
	default:
		return usageErr("export: --to %q: want onnx or aimet-json", o.to)
	}
	if o.qdq && o.to != "onnx" {
		return usageErr("export: --qdq applies to --to onnx only")
	}
	if o.aimetVersion != encodings.V1 && o.aimetVersion != encodings.V061 {
		return usageErr("export: --encodings-version %q: want %s or %s", o.aimetVersion, encodings.V1, encodings.V061)
	}
	if o.out == stdoutName {
		return usageErr("export: -o: the export is written to a file, not standard output")
	}
	if err := checkOutputs(o.force, []string{path}, o.out); err != nil {
		return err
	}
	f, err := gqf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if o.to == "onnx" {
		return export.WriteONNX(o.out, f, export.Options{QDQ: o.qdq, Version: version}, o.force)
	}
	if err := export.WriteAIMET(o.out, f, o.aimetVersion, o.force); err != nil {
		return fmt.Errorf("%w", err)
	}
	return nil
}
