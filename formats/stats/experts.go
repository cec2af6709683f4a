package stats

import (
	"strconv"
	"strings"
)

// Mixtures of experts: each expert's matrix in a stack of expert matrices (llama.cpp's 3-D
// ffn_{gate,up,down}_exps tensors) has statistics of its own, over the tokens routed to that
// expert, keyed by ExpertWeight. A llama.cpp imatrix holds a stack as one entry of one
// matrix per expert, each with its own count; Imatrix and the imatrix reader convert
// between the two forms.

// ExpertWeight names the statistics of expert e's matrix in the stack of expert matrices
// stack (the stack's GGUF name): "blk.0.ffn_up_exps.weight#3".
func ExpertWeight(stack string, e int) string { return stack + "#" + strconv.Itoa(e) }

// SplitExpert undoes ExpertWeight: the stack and the expert of an expert matrix's name; ok is
// false for any other name.
func SplitExpert(name string) (stack string, e int, ok bool) {
	i := strings.LastIndexByte(name, '#')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != name[i+1:] {
		return "", 0, false
	}
	return name[:i], n, true
}
