package main

import (
	"github.com/spf13/cobra"

	"github.com/gquant/gquant/runtime/kernels"
)

// actsUsage is the help of --acts, shared by the commands that run a model.
const actsUsage = "how activations meet the weights: default (int8 blocks for quantized weights, as llama.cpp; " +
	"float32 for F32, F16 and BF16 weights), float (float32 for every type, W4A16-style) or quant (as llama.cpp " +
	"for every type: F16 and BF16 weights also get f16/bf16-rounded activations, VDPBF16PS where the CPU has it)"

// addActsFlag registers --acts on cmd.
func addActsFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "acts", "default", actsUsage)
}

// parseActs turns --acts (or verify's --ref-acts: flag) into an activation mode; verb names
// the command in the error.
func parseActs(verb, flag, s string) (kernels.ActMode, error) {
	switch s {
	case "default":
		return kernels.ActDefault, nil
	case "float":
		return kernels.ActFloat, nil
	case "quant":
		return kernels.ActQuant, nil
	}
	return 0, usageErr("%s: %s: %q is not default, float or quant", verb, flag, s)
}
