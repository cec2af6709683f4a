// Package runtime is gquant's CPU inference engine for the model families of runtime/arch
// (Llama, Mistral, Qwen2, Qwen3): the transformer graph (token embedding, RMSNorm, RoPE in
// both pairings, grouped-query attention over a KV cache, SwiGLU MLP, tied or untied output),
// loaders for HuggingFace folders (safetensors, weights kept in their bf16/f16/f32 dtype and
// read through the file mapping) and GGUF files (single or split, every type the kernels
// multiply, other types widened at load), hooks for calibration and activation-quantization
// experiments, and a small text generator.
//
// Activations are float32. Every weight matrix is a kernels.Matrix over the mapped bytes, so
// how the weights meet the activations is the kernels' business (Options.Mode). Prefill runs
// matrix × matrix products over all new tokens at once; decode runs matrix × vector. The work
// of each product is spread over one persistent kernels.Pool per Model, in small chunks that
// idle workers take (one pool job per group of products sharing an input: q, k and v; gate
// and up). Attention runs head by head over the pool; the elementwise steps between the
// products (norms, RoPE, residuals, SwiGLU) run as per-token pool jobs, fused into one pass
// each when no Activation hook needs the tensors in between (tokops.go). A decode step
// allocates nothing but its logits. Model.EvalBatch decodes several sequences (States) in one
// step: their new tokens go through the weight matrices together, which reads the weights once
// for all of them, and each attends to its own cache.
//
// A Model may be shared by goroutines, but its evaluations are serialised (one pool per
// model): use one Model per goroutine for parallel work. A State belongs to one Model and one
// goroutine.
package runtime
