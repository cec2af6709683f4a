// Package kernels holds the compute kernels of gquant's CPU runtime: matrix × vector (decode) and
// matrix × matrix (prefill) products over weights stored as raw GGUF/ggml bytes or as gqf's
// packed integer groups, and the worker pool that splits them across threads.
//
// A Matrix wraps the bytes of one weight tensor (row-major, one ggml row per output feature;
// NewMatrix), or holds the packed form of a gqf integer tensor (NewGroupMatrix, below). The
// ggml types' names and sizes come from formats/gguf's table; Types lists those the kernels
// support. A ggml matrix's products come in two activation modes (ActMode):
//
//   - ActFloat: the weights are decoded to float32 and multiplied by float32 activations
//     (W4A16-style).
//   - ActQuant: the activations are first converted exactly as llama.cpp's CPU backend converts
//     them for that weight type (its vec_dot_type): Q8_0 blocks for Q4_0, Q5_0, Q8_0 and IQ4_NL;
//     Q8_1 blocks for Q4_1 and Q5_1; Q8_K super-blocks for Q4_K, Q5_K, Q6_K, Q2_K, Q3_K,
//     IQ4_XS, the i-quants on a grid (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and
//     the ternary types (TQ1_0, TQ2_0); fp16 or bf16 rounding for F16 and BF16 weights. The block products are then
//     integer dot products, so the result equals llama.cpp's up to the order of float
//     additions (W4A8-style).
//
// Each kernel has a generic Go implementation, always built and used as the reference, and on
// amd64 assembly (AVX-512 F/BW/VL + VNNI) for the hot paths, chosen once at start from the CPU
// features. Build with -tags purego, or set GQUANT_NOASM=1, to force the generic code;
// GQUANT_KERNELS=NAME picks another available implementation (say avx512vnni on an AMX CPU). Impl
// names the implementation in use; SetImpl switches it (for tests and benchmarks).
//
// Assembly ("avx512vnni", needs AVX-512 F/BW/VL and VNNI):
//
//   - ActQuant, quantized weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K):
//     VPDPBUSD over a repacked copy of the weights (16 blocks or sub-blocks interleaved so that
//     each 32-bit lane accumulates one of them, see pack.go); Matrix.Pack builds it. One token
//     runs a GEMV kernel; batches run GEMM kernels on tiles of 8 (then 4) tokens that unpack
//     each group of weights once for the whole tile, over blocks of rows that stay in L2. Both
//     do the same float operations for every (row, token) pair, so a token's result does not
//     depend on the batch it is in. Activations are quantized by assembly that writes ggml's
//     layout and the interleaved one in a single pass.
//   - ActFloat, the same quantized types: blocks decoded in registers from the ggml layout,
//     then FMA (W4A16-style).
//   - F32, F16, BF16 (either mode): widen + FMA; products of 4 or more tokens use a 4-row ×
//     4-token GEMM kernel. BF16 weights in ActQuant mode (activations rounded to bf16, as
//     llama.cpp does), 4 or more tokens, on a CPU with AVX512_BF16: VDPBF16PS, two exact bf16
//     products per float32 lane and instruction (BYTE-encoded: the Go assembler lacks it).
//   - The vector operations of the forward pass (vec.go): Softmax, SiLUMul (exponential by a
//     polynomial, relative error about 2e-7), RMSNorm, Add, and DotRows / AxpyRows (attention
//     row at a time); attention in tiles (attn.go): AttnScores (queries × blocks of keys
//     stored dimension-major, 4 queries × 4 blocks of 16 keys per FMA tile) and AttnValues
//     (4 queries × 64 columns of the value rows), each score and output one FMA chain in a
//     fixed order whatever the tile.
//
// Assembly ("amx", where the CPU has AMX-TILE and AMX-INT8 and Linux grants the tile state):
// the avx512vnni kernels, except that batched ActQuant products can run on AMX-INT8 tiles,
// with the float operations of the AVX-512 GEMV, so that the results are the same bits
// (amx_amd64.go): kernels exist for Q4_0, IQ4_NL, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K
// and IQ4_XS (B tiles built from the packed copy in assembly, amx_buildb_amd64.s), but by
// default only the batches for which the tiles measured faster than avx512vnni use them
// (amxTileTokens: Q4_0, IQ4_NL, Q5_0 and Q8_0 from 512 tokens; the K-quants never, their
// tiles being no faster; BenchmarkAMXSpeedup measures it); the i-quants and ternary types have
// no tile kernels and run avx512vnni's. The "amx" implementation is never meant to be slower
// than "avx512vnni" on a product it handles.
//
// Q2_K, Q3_K and IQ4_XS (llama.cpp's Q2_K, Q3_K_* and IQ4_XS files): generic Go ports of
// ggml's *_generic dot products, and AVX-512 GEMV and GEMM kernels in the K-quant layout (no
// float-activation assembly yet).
//
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0 and TQ2_0 (llama.cpp's i-quant
// and ternary files): generic Go ports of ggml's dequantize_row_* and
// ggml_vec_dot_*_q8_K_generic on formats/gguf's grids (iquant.go), and AVX-512 GEMV and GEMM
// kernels (gemv_iq_amd64.s, gemm_iq_amd64.s) over a packed copy whose grid points are decoded
// at Pack time into the K-quant lanes (pack.go): 2-bit codes plus one bit plane for IQ2_* and
// IQ1_* (116 bytes per 256 weights), a nibble per value for IQ3_* (148), 2-bit trits for TQ*_0
// (66, a TQ2_0 block's size). A step of 64 values is then a shift, a mask, a masked add from
// the bit plane and one VPSHUFB before VPDPBUSD; the per-lane integer sums, exact, are scaled
// as ggml's (sub-block scale 2s+1, IQ1's ±1/8 delta as an eighth), then d·d_a in float. No
// float-activation assembly for them (the runtime widens them to F32 in that mode where
// quantize can decode them). BenchmarkIQMatVec measures their decode beside Q4_K's.
//
// gqf integer weights (group.go): NewGroupMatrix packs gqf's int4 groups (G = 16 … 256,
// asymmetric with uint8 zero points or symmetric, LPBQ included once its scales are multiplied
// out) and int8 per-channel weights into 16-row interleaved blocks (Matrix.Data is that packed
// form; Matrix.Bytes its size; Matrix.GroupFormat the format; Matrix.Type a WType outside
// ggml's ids, named like "gqf-int4-g128-asym"). They are never widened to float32. Mode
// ActDefault or ActFloat multiplies with activations quantized to 16 bits per block (a16: the
// block is the group for int4; for int8 the largest divisor of the row ≤ 128 that is a multiple
// of 4 if one ≥ 32 exists, else the largest ≤ 512), ActQuant with 8 bits per token (a8,
// gqf's "int8 per token" linear inputs); the block sums are exact int32 and the float
// operations are fixed (group.go), so every implementation and batch size gives the same bits.
// A token with a NaN or an infinity among its activations gets NaN outputs. The generic Go
// code is the reference. Formats and shapes the packed layout cannot take are errors (the
// caller widens those to float32): int4 groups other than 16 … 256 (powers of two) or not
// dividing the row, zero points above 15, int8 that is asymmetric or grouped, int8 rows not a
// multiple of 4 long or longer than 131072. Each a16 activation is within 0.51·d of the float
// one (d = amax/32767 of its block), each a8 one within 0.51·d (d = amax/127 of its token),
// for d normal; TestGroupProducts holds the products to the bound that follows.
//
// Assembly for the gqf group matrices ("avx512vnni" and "amx"; gemm_group_amd64.s): the
// activations are quantized by AVX-512 code (quant_group_amd64.s, VDIVPS and round-to-even
// conversion: the Go quantizer's bits) into a chunk-major copy in the order the kernels read
// it; one token runs a GEMV kernel (VPDPWSSD for a16, VPDPBUSD for a8, the 16 lanes of a
// vector being 16 rows, software prefetch), batches run the same kernels on tiles of 8 and 4
// tokens that decode each 64-byte chunk of weights once for the whole tile. Under "amx",
// batches of 16 or more tokens (where the unit allows tiles: every int4 group, int8 blocks and
// rows that are multiples of 64) run on AMX-INT8 tiles (amx_group_amd64.s): B tiles of signed
// weights built per 16-row block from the packed codes, a16 activations split into high and
// low bytes (TDPBSSD + TDPBUSD), exact int32 sums, the same float operations in the same
// order: the same bits as avx512vnni, behind a self-check. BenchmarkGroupMatVec and
// BenchmarkGroupMatMul measure them beside the Q4_0 kernels of the same shape, implementation
// and batch in the same run (x_q4_0).
//
// AddGram (gram.go) adds the upper triangle of XᵀX, GPTQ's Hessian, of x rounded to bf16
// (as GPTQ's own implementations take it from a bf16 model's activations) to a float64 matrix
// as a blocked GEMM: tiles of 12 × 32 elements, each summed in float32 by one FMA per token in
// token order over blocks of 256 tokens, then added in float64; packed panels of x that stay
// in L2; the rows of tiles split among a Pool's workers by area. The operations are fixed, so
// every pool size and implementation gives the same bits: an AVX-512-BF16 kernel (VDPBF16PS
// over pairs of tokens, behind a self-check of the instruction's rounding order) under "amx"
// and "avx512vnni" where the CPU has AVX512_BF16, an AVX-512F kernel (12 × 32 in ZMM
// registers) where it does not, an AVX2 + FMA3 kernel (four 6 × 16 sub-tiles in YMM registers)
// under "generic" where the CPU has AVX2 and FMA3 (not with GQUANT_NOASM=1 or -tags purego),
// and generic Go code, exact in float64 for these operands, otherwise.
//
// The generic code always reads the ggml layout in Matrix.Data (and the packed layout of
// group matrices). For threads, Pool runs a product's row ranges on persistent workers (Run: one contiguous chunk per worker;
// RunDynamic: small chunks handed to whichever worker is free, which keeps a job going when
// another process takes a core); prepare the activations once (Matrix.Prepare, or
// Matrix.PrepareOn to spread the conversion of a batch over a pool) and call Matrix.MulActs
// from each worker.
package kernels
