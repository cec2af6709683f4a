// Package stats reads and writes gquant's calibration statistics (what calibrate collects and
// convert consumes) and llama.cpp's importance matrices, and checks them: on their own (Check)
// and against a model (Validate, with the model described by runtime/arch's StatsModel).
// It makes no decisions: range setting and encodings are quantize's, collection calibrate's.
//
// The statistics are stored in a GGUF file (formats/gguf), general.type "gquant.calibration".
// Metadata (all under "calibration."): version (u32, 4; versions 1 to 3 are read too, see
// below), model.name, model.family,
// model.hidden, model.intermediate, model.layers, model.heads, model.kv_heads, model.head_dim,
// model.vocab (u32), model.tensors_sha256 (the SHA-256 of the model's tensor list, one
// "name shape" line per tensor, which identifies the architecture and its dimensions),
// model.config_sha256 (of config.json, or "" for a GGUF model), model.weights_sha256 (of the
// token embedding's dtype, shape and first 64 KiB, for a HuggingFace model: two models of the
// same shapes differ there; absent in older files), corpus.name, corpus.sha256,
// tokens (u64, evaluated), ctx, chunks (u32, evaluated), seed (u64), hessian (bool), shared_inputs
// (string array of "weight=leader": weights whose input is the leader's, whose Hessian is
// stored once, under the leader); from version 3: exact (bool: the exact sums below are
// there), windows.chunks (u32) and windows.tokens (u64: the chunks the chunking cuts, of which
// a shard evaluates a part), shard.count (u32: the parts the windows were split into, 1 for
// an unsharded run, 0 unknown), shard.index (u32 array: the parts held, increasing) and
// chunk_set (u32 array of [start, end) pairs: the global indexes of the chunks evaluated,
// sorted, disjoint and not adjacent); from version 4: fold_chunks (u32: the fold group of the
// exact Hessians, Meta.FoldChunks; 1 without Hessians; version 3 files read as 1), on whose
// boundaries every range of chunk_set begins and ends (the last may end with the windows).
//
// Tensors, per linear weight W (GGUF name, e.g. blk.0.attn_q.weight), in model order:
//
//	W.in_sum2        F64 [cols]        Σx² per input column
//	W.in_sum         F64 [cols]        Σx
//	W.in_absmax      F32 [cols]        max|x|
//	W.count          F64 [1]           rows (tokens) summed
//	W.in_sum2_exact  I64 [2, cols]     Σx² exactly (with exact): per column a 128-bit
//	W.in_sum_exact   I64 [2, cols]     two's-complement integer of units of 2⁻⁶⁴, low
//	                                   word then high word (see Fixed); the F64 sums are
//	                                   their correctly rounded values
//	W.hessian_exact  I64 [2, c(c+1)/2] Σ xᵀx exactly, its upper triangle row by row (with
//	                                   exact and Options.Hessian, for weights not listed
//	                                   in shared_inputs); read mirrored, as float64
//	              or F64 [c(c+1)/2]    the same values as float64s, in statistics of one fold
//	                                   group (Meta.OneFold: every value is then one float64
//	                                   rounded to the grid, which a float64 holds exactly;
//	                                   half the size); the reader checks each is on the grid
//	W.hessian        F64 [cols, cols]  Σ xᵀx, full symmetric, instead, in files without exact
//
// and per activation tensor A (a point of the model's graph: arch.Graph.Points), in graph order:
//
//	A.min, A.max     F32 [1]
//	A.hist           F64 [bins]    counts of the histogram (Histogram: its bins depend only on
//	                               the range, so histograms merge exactly)
//	A.hist_bounds    F64 [2]       left edge of the first bin, right edge of the last
//	A.fit_range      F32 [2]       min and max over the fit chunks (when there were some)
//	A.held_range     F32 [2]       min and max over the held-out chunks (every HoldoutEvery-th
//	                               by global chunk index; when there were some)
//
// Files without fit_range and held_range (written before they existed, or from fewer than
// HoldoutEvery chunks) read with ActStats.Held false: RangeSQNR then does not widen ranges.
// Before version 3 the two go together; from version 3 each is written when its kind of chunk
// was seen (a shard may hold one kind only, whose range is then the activation's).
//
// Exact sums make statistics mergeable (MergeFiles, gquant stats merge): calibrate rounds each
// chunk's float64 partial Σx² and Σx, and each fold group's float64 partial Hessian (the sum of
// fold_chunks consecutive chunks' Gram matrices, groups aligned on the windows' chunk indexes),
// to the 2⁻⁶⁴ grid once and adds integers, so the statistics of disjoint shards of one
// calibration (whole fold groups each) add up to those of one run, bit for bit, in any order.
// Version 3 folded every chunk's Hessian (fold_chunks 1); its files read and merge with
// statistics of the same fold group. Files of versions 1 and 2 (float64 sums only) still read
// as they always did, but cannot be merged: the merge refuses them, naming
// calibration.version. A Stats without exact sums (built by hand, or read from an older file)
// is written with version 4's layout but exact false.
//
// Read reads this file, and llama.cpp's imatrix files (GGUF and legacy .dat) too; those
// carry only Σx² and counts (Σx when present). They merge among themselves as llama-imatrix
// --in-file merges them (imatrix.Merge).
package stats
