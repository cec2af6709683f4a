//go:build amd64 && !purego

#include "textflag.h"
#include "bf16_amd64.h"
#include "gemm_amd64.h"

// Gram micro-kernel (AVX-512F) for AddGram: one tile of 12 rows × 32 columns of h,
//
//	h[r·ldh + j] += float64(Σ_{t<k} a[12·t + r]·b[t·ldb + j])   for r < rows, j < 32 with mask bit j,
//
// the sum over t in float32, one FMA per t, in order from t = 0 (lane j of accumulator r is
// acc = fma(a, b, acc)); gramTileGo does the same operations. a is the packed 12-column slice
// of the tokens (the broadcast side, zero-padded rows), b the 32 columns of x (row stride ldb
// elements, masked loads), h float64 with row stride ldh elements. k ≥ 1, rows ≤ 12.
//
// The token loop prefetches b 8 tokens ahead (b streams from L2: AddGram packs it per panel);
// it measured 8 % faster than without. (Prefetching h for the epilogue measured nothing.)
//
// Registers: Z0-Z23 the 24 accumulators (row r: Z(2r) columns 0-15, Z(2r+1) columns 16-31),
// Z24-Z25 the token's 32 b values, Z26-Z27 the broadcast a values, Z28-Z30 the epilogue;
// K1/K2 the float32 column masks, K3-K6 the float64 ones (8 columns each).
//
// func gramTile12x32(h *float64, ldh int, a *float32, b *float32, ldb int, k int, rows int, mask int)

#define ROW(off, acc0, acc1, bc) \
	VBROADCASTSS off(SI), bc  \
	VFMADD231PS  Z24, bc, acc0 \
	VFMADD231PS  Z25, bc, acc1

// STORE8(src, off, kmask): h[off bytes + 0..7] += float64(src's 8 floats) (src a Y register).
#define STORE8(src, off, kmask) \
	VCVTPS2PD src, Z28            \
	VMOVUPD.Z off(R8), kmask, Z29 \
	VADDPD    Z29, Z28, Z28       \
	VMOVUPD   Z28, kmask, off(R8)

// STORE_ROW(acc0, acc0y, acc1, acc1y): adds one row of accumulators to h at R8, then R8 += ldh.
#define STORE_ROW(acc0, acc0y, acc1, acc1y) \
	STORE8(acc0y, 0, K3)            \
	VEXTRACTF64X4 $1, acc0, Y30     \
	STORE8(Y30, 64, K4)             \
	STORE8(acc1y, 128, K5)          \
	VEXTRACTF64X4 $1, acc1, Y30     \
	STORE8(Y30, 192, K6)            \
	ADDQ R9, R8

// GRAM_ARGS loads a tile kernel's arguments (h, ldh, a, b, ldb, k, rows, mask: the same frame
// for both kernels) and sets the column masks: K1/K2 the float32 (or pair) masks of columns
// 0-15 and 16-31, K3-K6 the float64 ones (8 columns each).
#define GRAM_ARGS \
	MOVQ h+0(FP), R8 \
	MOVQ ldh+8(FP), R9 \
	SHLQ $3, R9 \
	MOVQ a+16(FP), SI \
	MOVQ b+24(FP), DI \
	MOVQ ldb+32(FP), DX \
	SHLQ $2, DX \
	MOVQ k+40(FP), CX \
	MOVQ rows+48(FP), R10 \
	MOVQ mask+56(FP), BX \
	KMOVW BX, K1 \
	MOVL  BX, AX \
	ANDL  $0xff, AX \
	KMOVW AX, K3 \
	MOVL  BX, AX \
	SHRL  $8, AX \
	ANDL  $0xff, AX \
	KMOVW AX, K4 \
	MOVL  BX, AX \
	SHRL  $16, AX \
	KMOVW AX, K2 \
	ANDL  $0xff, AX \
	KMOVW AX, K5 \
	MOVL  BX, AX \
	SHRL  $24, AX \
	KMOVW AX, K6

// GRAM_PREFETCH_H starts loading the tile's 12 rows of h (4 cache lines of 8 float64s each;
// R12 scratch) into L1 before the loop, which hides GRAM_STORE's misses behind the tile's
// multiply-adds: h of a large matrix comes from memory, 3 KiB a tile of a few hundred ns of
// arithmetic (BenchmarkAddGram, two workers, c = 3072: +3-4 %). Rows past rows and columns
// past the mask are prefetched too; a prefetch never faults.
#define PREFETCH_HROW \
	PREFETCHT0 (R12) \
	PREFETCHT0 64(R12) \
	PREFETCHT0 128(R12) \
	PREFETCHT0 192(R12) \
	ADDQ       R9, R12

#define GRAM_PREFETCH_H \
	MOVQ R8, R12 \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW \
	PREFETCH_HROW

// GRAM_ZERO zeroes the 24 accumulators Z0-Z23.
#define GRAM_ZERO \
	ZERO4(Z0, Z1, Z2, Z3) \
	ZERO4(Z4, Z5, Z6, Z7) \
	ZERO4(Z8, Z9, Z10, Z11) \
	ZERO4(Z12, Z13, Z14, Z15) \
	ZERO4(Z16, Z17, Z18, Z19) \
	ZERO4(Z20, Z21, Z22, Z23)

// GRAM_STORE adds the accumulators' rows r < rows (R10) to h at R8 (row stride R9 bytes) and
// jumps to done.
#define GRAM_STORE \
	STORE_ROW(Z0, Y0, Z1, Y1) \
	CMPQ R10, $1 \
	JLE  done \
	STORE_ROW(Z2, Y2, Z3, Y3) \
	CMPQ R10, $2 \
	JLE  done \
	STORE_ROW(Z4, Y4, Z5, Y5) \
	CMPQ R10, $3 \
	JLE  done \
	STORE_ROW(Z6, Y6, Z7, Y7) \
	CMPQ R10, $4 \
	JLE  done \
	STORE_ROW(Z8, Y8, Z9, Y9) \
	CMPQ R10, $5 \
	JLE  done \
	STORE_ROW(Z10, Y10, Z11, Y11) \
	CMPQ R10, $6 \
	JLE  done \
	STORE_ROW(Z12, Y12, Z13, Y13) \
	CMPQ R10, $7 \
	JLE  done \
	STORE_ROW(Z14, Y14, Z15, Y15) \
	CMPQ R10, $8 \
	JLE  done \
	STORE_ROW(Z16, Y16, Z17, Y17) \
	CMPQ R10, $9 \
	JLE  done \
	STORE_ROW(Z18, Y18, Z19, Y19) \
	CMPQ R10, $10 \
	JLE  done \
	STORE_ROW(Z20, Y20, Z21, Y21) \
	CMPQ R10, $11 \
	JLE  done \
	STORE_ROW(Z22, Y22, Z23, Y23) \
	JMP done

TEXT ·gramTile12x32(SB), NOSPLIT, $0-64
	GRAM_ARGS
	GRAM_ZERO

	LEAQ (DI)(DX*8), R11 // b, 8 tokens ahead
	GRAM_PREFETCH_H

loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	VMOVUPS.Z (DI), K1, Z24
	VMOVUPS.Z 64(DI), K2, Z25
	ROW(0, Z0, Z1, Z26)
	ROW(4, Z2, Z3, Z27)
	ROW(8, Z4, Z5, Z26)
	ROW(12, Z6, Z7, Z27)
	ROW(16, Z8, Z9, Z26)
	ROW(20, Z10, Z11, Z27)
	ROW(24, Z12, Z13, Z26)
	ROW(28, Z14, Z15, Z27)
	ROW(32, Z16, Z17, Z26)
	ROW(36, Z18, Z19, Z27)
	ROW(40, Z20, Z21, Z26)
	ROW(44, Z22, Z23, Z27)
	ADDQ $48, SI
	ADDQ DX, DI
	ADDQ DX, R11
	DECQ CX
	JNZ  loop

	GRAM_STORE
done:
	VZEROUPPER
	RET

// The AVX-512-BF16 tile kernel: the same tile, with VDPBF16PS over pairs of tokens. a and b
// hold dwords (a pair of bf16 each: the pair's first token in the high half, its second in the
// low half; gramPackPairs), k counts pairs, ldb is in dwords. VDPBF16PS adds the high halves'
// product and then the low halves' (rounding each time: Intel's definition, which gramPairsOK
// checks on this CPU), so each lane gets one float32 FMA per token in token order, the
// operations of gramTile12x32 on the bf16 values. Its products are exact, and AddGram's
// rounding (gramBF16: no value below 2⁻⁵⁰) keeps every product and partial sum out of the
// subnormal range that VDPBF16PS flushes.
//
// The Go assembler rejects AVX512_BF16: each VDPBF16PS is BYTE-encoded with fixed registers
// (bytes from GNU as; TestBF16DotEncodings checks them against objdump). Registers as in
// gramTile12x32: Z0-Z23 the accumulators, Z24-Z25 the pair's 32 columns, Z26-Z27 the
// broadcast pairs of the tile's rows.
//
// func gramTile12x32BF16(h *float64, ldh int, a *uint32, b *uint32, ldb int, k int, rows int, mask int)

#define DPBF16_Z0_Z24_Z26 BYTE $0x62; BYTE $0x92; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xC2
#define DPBF16_Z1_Z25_Z26 BYTE $0x62; BYTE $0x92; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xCA
#define DPBF16_Z2_Z24_Z27 BYTE $0x62; BYTE $0x92; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xD3
#define DPBF16_Z3_Z25_Z27 BYTE $0x62; BYTE $0x92; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xDB
#define DPBF16_Z4_Z24_Z26 BYTE $0x62; BYTE $0x92; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xE2
#define DPBF16_Z5_Z25_Z26 BYTE $0x62; BYTE $0x92; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xEA
#define DPBF16_Z6_Z24_Z27 BYTE $0x62; BYTE $0x92; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xF3
#define DPBF16_Z7_Z25_Z27 BYTE $0x62; BYTE $0x92; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xFB
#define DPBF16_Z8_Z24_Z26 BYTE $0x62; BYTE $0x12; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xC2
#define DPBF16_Z9_Z25_Z26 BYTE $0x62; BYTE $0x12; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xCA
#define DPBF16_Z10_Z24_Z27 BYTE $0x62; BYTE $0x12; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xD3
#define DPBF16_Z11_Z25_Z27 BYTE $0x62; BYTE $0x12; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xDB
#define DPBF16_Z12_Z24_Z26 BYTE $0x62; BYTE $0x12; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xE2
#define DPBF16_Z13_Z25_Z26 BYTE $0x62; BYTE $0x12; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xEA
#define DPBF16_Z14_Z24_Z27 BYTE $0x62; BYTE $0x12; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xF3
#define DPBF16_Z15_Z25_Z27 BYTE $0x62; BYTE $0x12; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xFB
#define DPBF16_Z16_Z24_Z26 BYTE $0x62; BYTE $0x82; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xC2
#define DPBF16_Z17_Z25_Z26 BYTE $0x62; BYTE $0x82; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xCA
#define DPBF16_Z18_Z24_Z27 BYTE $0x62; BYTE $0x82; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xD3
#define DPBF16_Z19_Z25_Z27 BYTE $0x62; BYTE $0x82; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xDB
#define DPBF16_Z20_Z24_Z26 BYTE $0x62; BYTE $0x82; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xE2
#define DPBF16_Z21_Z25_Z26 BYTE $0x62; BYTE $0x82; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xEA
#define DPBF16_Z22_Z24_Z27 BYTE $0x62; BYTE $0x82; BYTE $0x3E; BYTE $0x40; BYTE $0x52; BYTE $0xF3
#define DPBF16_Z23_Z25_Z27 BYTE $0x62; BYTE $0x82; BYTE $0x36; BYTE $0x40; BYTE $0x52; BYTE $0xFB

// ROW_BF16(off, dp0, dp1, bc): row r's pair (at off bytes of SI) broadcast, times the 32 columns.
#define ROW_BF16(off, dp0, dp1, bc) \
	VPBROADCASTD off(SI), bc \
	dp0 \
	dp1

TEXT ·gramTile12x32BF16(SB), NOSPLIT, $0-64
	GRAM_ARGS
	GRAM_ZERO

	LEAQ (DI)(DX*8), R11 // b, 8 pairs ahead
	GRAM_PREFETCH_H

loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	VMOVDQU32.Z (DI), K1, Z24
	VMOVDQU32.Z 64(DI), K2, Z25
	ROW_BF16(0, DPBF16_Z0_Z24_Z26, DPBF16_Z1_Z25_Z26, Z26)
	ROW_BF16(4, DPBF16_Z2_Z24_Z27, DPBF16_Z3_Z25_Z27, Z27)
	ROW_BF16(8, DPBF16_Z4_Z24_Z26, DPBF16_Z5_Z25_Z26, Z26)
	ROW_BF16(12, DPBF16_Z6_Z24_Z27, DPBF16_Z7_Z25_Z27, Z27)
	ROW_BF16(16, DPBF16_Z8_Z24_Z26, DPBF16_Z9_Z25_Z26, Z26)
	ROW_BF16(20, DPBF16_Z10_Z24_Z27, DPBF16_Z11_Z25_Z27, Z27)
	ROW_BF16(24, DPBF16_Z12_Z24_Z26, DPBF16_Z13_Z25_Z26, Z26)
	ROW_BF16(28, DPBF16_Z14_Z24_Z27, DPBF16_Z15_Z25_Z27, Z27)
	ROW_BF16(32, DPBF16_Z16_Z24_Z26, DPBF16_Z17_Z25_Z26, Z26)
	ROW_BF16(36, DPBF16_Z18_Z24_Z27, DPBF16_Z19_Z25_Z27, Z27)
	ROW_BF16(40, DPBF16_Z20_Z24_Z26, DPBF16_Z21_Z25_Z26, Z26)
	ROW_BF16(44, DPBF16_Z22_Z24_Z27, DPBF16_Z23_Z25_Z27, Z27)
	ADDQ $48, SI
	ADDQ DX, DI
	ADDQ DX, R11
	DECQ CX
	JNZ  loop

	GRAM_STORE
done:
	VZEROUPPER
	RET

// Packing for AddGram: k rows of up to 32 floats from src (row stride lds elements) to dst
// (row stride ldd elements), dst[t·ldd + j] = src[t·lds + j] for the columns j of lmask and
// 0 for the other columns of smask; only the columns of smask are written. k ≥ 1.
//
// func gramPack(dst *float32, ldd int, src *float32, lds int, k int, lmask, smask int)
TEXT ·gramPack(SB), NOSPLIT, $0-56
	MOVQ  dst+0(FP), DI
	MOVQ  ldd+8(FP), DX
	SHLQ  $2, DX
	MOVQ  src+16(FP), SI
	MOVQ  lds+24(FP), R8
	SHLQ  $2, R8
	MOVQ  k+32(FP), CX
	MOVQ  lmask+40(FP), AX
	KMOVW AX, K1
	SHRL  $16, AX
	KMOVW AX, K2
	MOVQ  smask+48(FP), AX
	KMOVW AX, K3
	SHRL  $16, AX
	KMOVW AX, K4

pack:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z 64(SI), K2, Z1
	VMOVUPS   Z0, K3, (DI)
	VMOVUPS   Z1, K4, 64(DI)
	ADDQ      R8, SI
	ADDQ      DX, DI
	DECQ      CX
	JNZ       pack
	VZEROUPPER
	RET

// Packing for the AVX-512-BF16 kernel: k rows of up to 32 floats from src (row stride lds
// elements) to (k+1)/2 rows of dwords at dst (row stride ldd dwords), row p the tokens 2p (high
// half) and 2p+1 (low half; 0 past k) rounded by gramBF16: nearest even (ggml's fp32-to-bf16),
// NaN quieted, |x| < 2⁻⁵⁰ to 0. Columns as gramPack: those of lmask read, those of smask
// written (0 where not read). k ≥ 1.
//
// BF16R(z) rounds z's 16 floats so, the bf16 in the low half of each dword (0 above): BF16_RNE
// (bf16_amd64.h), then 0 where |u| < 2⁻⁵⁰ (Z26 its bits; NaN lanes kept). Z4-Z6, K5, K6 scratch.
//
// func gramPackPairs(dst *uint32, ldd int, src *float32, lds int, k int, lmask, smask int)

#define BF16R(z) \
	BF16_RNE(z, Z4, Z5, Z6, K6) \
	VPCMPUD     $5, Z26, Z4, K5 \
	VMOVDQU32.Z Z6, K5, z

TEXT ·gramPackPairs(SB), NOSPLIT, $0-56
	MOVQ  dst+0(FP), DI
	MOVQ  ldd+8(FP), DX
	SHLQ  $2, DX
	MOVQ  src+16(FP), SI
	MOVQ  lds+24(FP), R8
	SHLQ  $2, R8
	MOVQ  k+32(FP), CX
	MOVQ  lmask+40(FP), AX
	KMOVW AX, K1
	SHRL  $16, AX
	KMOVW AX, K2
	MOVQ  smask+48(FP), AX
	KMOVW AX, K3
	SHRL  $16, AX
	KMOVW AX, K4

	BF16_CONSTS
	MOVL $0x26800000, AX
	VPBROADCASTD AX, Z26

pairs:
	VMOVDQU32.Z (SI), K1, Z0
	VMOVDQU32.Z 64(SI), K2, Z1
	VPXORD      Z2, Z2, Z2
	VPXORD      Z3, Z3, Z3
	CMPQ        CX, $1
	JEQ         last
	VMOVDQU32.Z (SI)(R8*1), K1, Z2
	VMOVDQU32.Z 64(SI)(R8*1), K2, Z3

last:
	BF16R(Z0)
	BF16R(Z1)
	BF16R(Z2)
	BF16R(Z3)
	VPSLLD    $16, Z0, Z0
	VPORD     Z2, Z0, Z0
	VPSLLD    $16, Z1, Z1
	VPORD     Z3, Z1, Z1
	VMOVDQU32 Z0, K3, (DI)
	VMOVDQU32 Z1, K4, 64(DI)
	LEAQ      (SI)(R8*2), SI
	ADDQ      DX, DI
	SUBQ      $2, CX
	JG        pairs
	VZEROUPPER
	RET
