// Package calibrate runs a model over a calibration corpus with observers attached to the
// runtime's graph and keeps the statistics the quantizers need:
//
//   - per linear layer input (keyed by the weight's GGUF name, as llama.cpp's imatrix is):
//     Σx² and the number of rows summed (the importance matrix), Σx, max|x| per input column,
//     and on request the Hessian XᵀX for GPTQ; all accumulated in float64;
//   - per activation tensor of the graph (runtime.ActivationNames): min, max and a histogram.
//
// From these it derives llama.cpp's imatrix (formats/imatrix) and, for Qualcomm's w8a16,
// activation encodings (16-bit asymmetric, QNN convention) with a choice of range setting
// (min-max, percentile, SQNR-optimal clipping) plus 8-bit symmetric per-channel weight
// encodings, written as AIMET encodings JSON (1.0.0 or 0.6.1).
//
// # Corpus
//
// As llama-imatrix does (tools/imatrix/imatrix.cpp compute_imatrix): the whole corpus is
// tokenized once (without special tokens), a BOS is put in front when the tokenizer adds one,
// and the stream is cut into chunks of Ctx tokens whose first token is replaced by BOS. Each
// chunk is evaluated from an empty KV cache with the logits of every position, and a trailing
// partial chunk is dropped. Options.Tokens limits the total: the first Tokens tokens of the
// stream (the last chunk may then be shorter than Ctx). With Options.Seed ≠ 0 the chunks are
// instead a seeded random sample (without replacement, kept in corpus order) of all full
// chunks of the corpus; Seed only matters then. Same inputs, same bytes.
//
// # Stats file (GGUF)
//
// The statistics are stored in a GGUF file (formats/gguf), general.type "gquant.calibration".
// Metadata (all under "calibration."): version (u32, 1), model.name, model.family,
// model.hidden, model.intermediate, model.layers, model.heads, model.kv_heads, model.head_dim,
// model.vocab (u32), model.tensors_sha256 (the SHA-256 of the model's tensor list, one
// "name shape" line per tensor, which identifies the architecture and its dimensions),
// model.config_sha256 (of config.json, or "" for a GGUF model), corpus.name, corpus.sha256,
// tokens (u64, evaluated), ctx, chunks (u32), seed (u64), hessian (bool), shared_inputs
// (string array of "weight=leader": weights whose input is the leader's, whose Hessian is
// stored once, under the leader).
//
// Tensors, per linear weight W (GGUF name, e.g. blk.0.attn_q.weight), in model order:
//
//	W.in_sum2    F64 [cols]        Σx² per input column
//	W.in_sum     F64 [cols]        Σx
//	W.in_absmax  F32 [cols]        max|x|
//	W.count      F64 [1]           rows (tokens) summed
//	W.hessian    F64 [cols, cols]  Σ xᵀx, full symmetric (only with Options.Hessian, and only
//	                               for weights that are not listed in shared_inputs)
//
// and per activation tensor A (runtime.ActivationNames), in graph order:
//
//	A.min, A.max     F32 [1]
//	A.hist           F64 [bins]    counts of the histogram
//	A.hist_bounds    F64 [2]       left edge of the first bin, right edge of the last
//	A.fit_range      F32 [2]       min and max over the fit chunks (optional, with held_range)
//	A.held_range     F32 [2]       min and max over the held-out chunks (every HoldoutEvery-th)
//
// Files without fit_range and held_range (written before they existed, or from fewer than
// HoldoutEvery chunks) read with ActStats.Held false: RangeSQNR then does not widen ranges.
//
// ReadStats reads this file, and llama.cpp's imatrix files (GGUF and legacy .dat) too; those
// carry only Σx² and counts (Σx when present).
package calibrate
