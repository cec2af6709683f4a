package runtime

import (
	"fmt"

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
}

// Hooks are called from inside Eval, on the goroutine that called it, with slices of the
// model's working buffers: they must not keep them after returning.
type Hooks struct {
	// LinearInput receives the input of every linear layer before the product: nTok rows of
	// cols values. weight is the GGUF name of the weight ("blk.3.attn_q.weight",
	// "output.weight"); layers that share an input (q, k and v; gate and up) get one call each.
	// x must not be modified (use Activation for that).
	LinearInput func(weight string, x []float32, nTok, cols int)
	// Activation receives every named activation tensor of the graph (see ActivationNames):
	// nTok rows of dim values, row-major. It may modify x in place; the graph goes on with the
	// modified values.
	Activation func(name string, x []float32, nTok, dim int)
}

// ActivationNames lists, in graph order, the names Hooks.Activation is called with for a
// model of this spec, and documents them. Per layer N:
//
//	blk.N.attn_norm   RMSNorm of the residual stream (input of attn_q/k/v), hidden wide
//	blk.N.q           query projection output, bias added (Qwen2), heads·head_dim wide
//	blk.N.k           key projection output, bias added, kv_heads·head_dim wide
//	blk.N.v           value projection output, bias added, kv_heads·head_dim wide
//	blk.N.q_norm      (Qwen3) queries after the per-head RMSNorm
//	blk.N.k_norm      (Qwen3) keys after the per-head RMSNorm
//	blk.N.q_rope      queries after RoPE (what attention reads)
//	blk.N.k_rope      keys after RoPE (what the KV cache stores)
//	blk.N.kqv_out     attention output, heads concatenated (input of attn_output)
//	blk.N.attn_out    attn_output projection output, hidden wide
//	blk.N.ffn_inp     residual stream after attention (x + attn_out)
//	blk.N.ffn_norm    RMSNorm of ffn_inp (input of ffn_gate and ffn_up)
//	blk.N.ffn_gate    gate projection output, intermediate wide
//	blk.N.ffn_up      up projection output, intermediate wide
//	blk.N.ffn_act     silu(ffn_gate)·ffn_up (input of ffn_down)
//	blk.N.ffn_out     ffn_down projection output, hidden wide
//	blk.N.out         residual stream after the block (ffn_inp + ffn_out)
//
// and around the layers: token_embd (the embedding rows of the new tokens) first, then
// output_norm (final RMSNorm, input of output) and logits (vocab wide) last. Eval with
// allLogits false passes only the last position through output_norm and logits (nTok = 1
// there).
func ActivationNames(spec *arch.Spec) []string {
	names := []string{"token_embd"}
	for l := 0; l < spec.Layers; l++ {
		for _, s := range layerActivations(spec) {
			names = append(names, fmt.Sprintf("blk.%d.%s", l, s))
		}
	}
	return append(names, "output_norm", "logits")
}

// layerActivations lists the per-layer activation suffixes of ActivationNames.
func layerActivations(spec *arch.Spec) []string {
	s := []string{"attn_norm", "q", "k", "v"}
	if spec.QKNorm {
		s = append(s, "q_norm", "k_norm")
	}
	return append(s, "q_rope", "k_rope", "kqv_out", "attn_out", "ffn_inp", "ffn_norm",
		"ffn_gate", "ffn_up", "ffn_act", "ffn_out", "out")
}
