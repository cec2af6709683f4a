// Package stats reads and writes gquant's calibration statistics (what calibrate collects and
// convert consumes) and llama.cpp's importance matrices, and checks them: on their own (Check)
// and against a model (Validate, with the model described by runtime/arch's StatsModel).
// It makes no decisions: range setting and encodings are quantize's, collection calibrate's.
//
// The statistics are stored in a GGUF file (formats/gguf), general.type "gquant.calibration".
// Metadata (all under "calibration."): version (u32, 2; version 1 files, whose activations are a subset of the points, are read too), model.name, model.family,
// model.hidden, model.intermediate, model.layers, model.heads, model.kv_heads, model.head_dim,
// model.vocab (u32), model.tensors_sha256 (the SHA-256 of the model's tensor list, one
// "name shape" line per tensor, which identifies the architecture and its dimensions),
// model.config_sha256 (of config.json, or "" for a GGUF model), model.weights_sha256 (of the
// token embedding's dtype, shape and first 64 KiB, for a HuggingFace model: two models of the
// same shapes differ there; absent in older files), corpus.name, corpus.sha256,
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
// and per activation tensor A (a point of the model's graph: arch.Graph.Points), in graph order:
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
// Read reads this file, and llama.cpp's imatrix files (GGUF and legacy .dat) too; those
// carry only Σx² and counts (Σx when present).
package stats
