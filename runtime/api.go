package runtime

import (
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// Options tune Load.
type Options struct {
	// Threads is the number of workers of the model's pool, the caller included
	// (0: one per CPU).
	Threads int
	// Mode is the activation mode of every weight matrix (kernels.ActDefault: integer products
	// with llama.cpp's activation quantization for block-quantized weights, float32 for float
	// weights).
	Mode kernels.ActMode
	// Hooks observe (and may modify) the graph's tensors; nil costs nothing.
	Hooks *Hooks
	// Format names the file's format ("gguf", "gqf") where its name does not say it (a
	// temporary file); "" goes by the name.
	Format string
	// Widen decodes a gqf file's integer weights to float32 at load, with the file's
	// decoding rules, instead of packing them for the kernels: exact float32 products at 4
	// bytes per weight, the reference the packed arithmetic is checked against.
	Widen bool
	// Blocks prepares the model for EvalBlocks, ReplaceLinear and ReleaseBlock (blocks.go):
	// no step of the plan spans two blocks, at the cost of a few more steps per evaluation.
	Blocks bool
}

// Hooks are called from inside Eval, on the goroutine that called it, with slices of the
// model's working buffers: they must not keep them after returning.
type Hooks struct {
	// LinearInput receives the input of every linear layer before the product: nTok rows of
	// cols values. weight is the GGUF name of the weight ("blk.3.attn_q.weight",
	// "output.weight"); layers that share an input (q, k and v; gate and up) get one call each.
	// x must not be modified (use Activation for that).
	LinearInput func(weight string, x []float32, nTok, cols int)
	// Activation receives every point of the graph (ActivationNames: every tensor the lowered
	// graph computes, see arch.Node.Points), in graph order: nTok rows of dim values, row-major
	// (the attention scores: one row per token holding every query head's scores over the KV
	// positions, and in several calls of consecutive tokens when they are many). It may modify
	// a node's value in place (the last point of a node, the names of arch.Graph's values);
	// the graph goes on with the modified values. So it does with a linear's NAME_fc and
	// rope's X_cos and X_sin, which the node's value is computed from in any case. Changes to
	// attention's and swiglu's other points are ignored, unless Modifies says the hook changes
	// them: those are computed on the side, so that observing changes no result.
	Activation func(name string, x []float32, nTok, dim int)
	// Points, when set, limits Activation to the points it reports (nil: every point); the
	// others are not computed on the side, and nodes without an observed point keep the fast
	// fused path.
	Points func(point string) bool
	// Modifies, when set, reports the points whose changes by Activation must flow on: a node
	// with such a point before its value runs in the primitive form of the lowered graph
	// (arch.Lower), in which each of its points is a tensor the rest is computed from.
	Modifies func(point string) bool
}

// ActivationNames lists, in graph order, the names Hooks.Activation is called with for a
// model of this spec: the points of its graph (arch.ModelGraph(spec).Points()). Eval with
// allLogits false passes only the last position through output_norm and logits (nTok = 1
// there).
func ActivationNames(spec *arch.Spec) []string { return arch.ModelGraph(spec).Points() }
