// Package calibrate runs a model over a calibration corpus with observers attached to the
// runtime's graph and keeps the statistics the quantizers need:
//
//   - per linear layer input (keyed by the weight's GGUF name, as llama.cpp's imatrix is):
//     Σx² and the number of rows summed (the importance matrix), Σx, max|x| per input column,
//     and on request the Hessian XᵀX for GPTQ (kernels.AddGram); each chunk's sums accumulated
//     in float64 (its tokens in order), the Hessians over a fold group of chunks
//     (Options.FoldChunks, about 4,096 tokens), then rounded once to a 2⁻⁶⁴ grid and added as
//     128-bit integers (stats.Fixed), which makes the sums independent of how the chunks (the
//     fold groups) are split among shards;
//   - per point of the model's graph (runtime.ActivationNames: every tensor of the lowered
//     graph): min, max and a histogram.
//
// From these it derives llama.cpp's imatrix (formats/imatrix) and, for Qualcomm's w8a16,
// activation encodings (16-bit asymmetric, QNN convention) with a choice of range setting
// (min-max, percentile, SQNR-optimal clipping) plus 8-bit symmetric per-channel weight
// encodings, written as AIMET encodings JSON (1.0.0 or 0.6.1).
//
// # Corpus
//
// As llama-imatrix does (tools/imatrix/imatrix.cpp compute_imatrix): the corpus is tokenized
// as one text (without special tokens; ReadCorpus streams it, with the same tokens, and keeps
// only those it needs), a BOS is put in front when the tokenizer adds one,
// and the stream is cut into chunks of Ctx tokens whose first token is replaced by BOS. Each
// chunk is evaluated from an empty KV cache with the logits of every position, and a trailing
// partial chunk is dropped. Options.Tokens limits the total: the first Tokens tokens of the
// stream (the last chunk may then be shorter than Ctx). With Options.Seed ≠ 0 the chunks are
// instead a seeded random sample (without replacement, kept in corpus order) of all full
// chunks of the corpus; Seed only matters then. Same inputs, same bytes.
//
// # Shards
//
// Options.Shard evaluates the I-th of N contiguous, disjoint parts of the chunks, whole fold
// groups (Shard): the chunking is the same whatever the shard and each chunk keeps its global
// index, so that the shards' statistics, merged (stats.MergeFiles, gquant stats merge), are
// those of one run bit for bit, and the artifacts made from them too. The layer-sequential path (Sequential) runs
// in one process and keeps its Hessians in float64.
//
// The statistics are written in gquant's statistics file (formats/stats), which also reads
// llama.cpp's imatrix files; range setting and the activation encodings live in quantize.
package calibrate
