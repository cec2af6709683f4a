// Package verify measures how far a quantized artifact is from its reference (bf16) model.
//
// Both models run in gquant's runtime over a corpus in llama-perplexity's protocol: the corpus is
// tokenized once, cut into windows of Ctx tokens (the tail shorter than a window is dropped), the
// first token of every window is replaced by BOS, and only the second half of each window is scored
// (positions Ctx/2 … Ctx−2, each predicting the next token). Per scored position verify computes
// KL(ref‖test), whether the argmaxes agree, Δp = p_test(next) − p_ref(next) and both negative
// log-likelihoods; over all positions it sums the energies for the logits SNR (and, optionally, the
// SNR of the hidden state after every block). Greedy continuations of a few prompts are compared token
// by token.
//
// The reference's log-probabilities can be stored in llama-perplexity's --kl-divergence-base file
// format (kldfile.go) and read back, so a sweep over many artifacts runs the reference once; files
// written by llama.cpp itself are read too. gquant appends an optional trailer to the files it writes
// (the reference logits as fp16 and its greedy continuations) that llama.cpp ignores.
//
// The result is a Report: versioned JSON (schema "gquant.verify/v1"), a text rendering and a PNG plot.
package verify
