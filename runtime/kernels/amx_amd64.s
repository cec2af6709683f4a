//go:build amd64 && !purego

#include "textflag.h"
#include "amx_amd64.h"

// AMX-INT8 GEMM tiles for the 32-element block types (Q4_0, IQ4_NL, Q5_0, Q8_0) against Q8_0
// activations and for the K-quants (Q4_K, Q5_K, Q6_K) against Q8_K activations; see
// amx_amd64.go for the tile layout and why the float operations are those of the AVX-512 GEMV
// kernels (gemv_q8_amd64.s, gemv_k_amd64.s), bit for bit.
//
// The Go assembler knows no AMX instruction, so each is written as BYTE encodings (VEX, map
// 0F38, W0, L0; Intel SDM vol. 2). Only legacy registers appear in them (no REX bits); the
// encodings are checked by TestAMXEncodings against GNU objdump's disassembly.
//
//	LDTILECFG  (CX)              C4 E2 78 49 01
//	TILERELEASE                  C4 E2 78 49 C0
//	TILEZERO   tmm0              C4 E2 7B 49 C0
//	TILELOADD  tmm1, (SI)(DX*1)  C4 E2 7B 4B 0C 16
//	TILELOADD  tmm2, (BX)(AX*1)  C4 E2 7B 4B 14 03
//	TDPBSSD    tmm0, tmm1, tmm2  C4 E2 6B 5E C1   (tmm0 += tmm1 · tmm2, signed × signed)
//	TILESTORED (DI)(AX*1), tmm0  C4 E2 7A 4B 04 07
//	TILEZERO   tmm3              C4 E2 7B 49 D8
//	TILELOADD  tmm4, d(SI)(DX*1) C4 E2 7B 4B A4 16 d32
//	TILELOADD  tmm5, d(BX)(AX*1) C4 E2 7B 4B AC 03 d32
//	TDPBSSD    tmm3, tmm4, tmm5  C4 E2 53 5E DC
//	TILESTORED (CX)(AX*1), tmm3  C4 E2 7A 4B 1C 01

// LDTILECFG_CX, TILERELEASE, TILEZERO_T0: amx_amd64.h.
#define TILELOADD_T1_SI_DX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x0C; BYTE $0x16
#define TILELOADD_T2_BX_AX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x14; BYTE $0x03
#define TDPBSSD_T0_T1_T2 BYTE $0xC4; BYTE $0xE2; BYTE $0x6B; BYTE $0x5E; BYTE $0xC1
#define TILESTORED_DI_AX_T0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x07

// The second tile set (tmm3 = C, tmm4 = A, tmm5 = B) of the next step of a lane, 16 steps
// further on: A and B addressed with a 32-bit displacement (the little-endian bytes d0-d3).
#define TILEZERO_T3      BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD8
#define TILELOADD_T4_SI_DX_D32(d0, d1, d2, d3) BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xA4; BYTE $0x16; BYTE d0; BYTE d1; BYTE d2; BYTE d3
#define TILELOADD_T5_BX_AX_D32(d0, d1, d2, d3) BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xAC; BYTE $0x03; BYTE d0; BYTE d1; BYTE d2; BYTE d3
#define TDPBSSD_T3_T4_T5 BYTE $0xC4; BYTE $0xE2; BYTE $0x53; BYTE $0x5E; BYTE $0xDC
#define TILESTORED_CX_AX_T3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x1C; BYTE $0x01

// REDUCE_STORE adds each token's 16 lane accumulators (acc, 1 KB per token) as HSUM_STORE
// does (hsum_amd64.h), with the 16 rows side by side in the vectors: a_i = l_i + l_(i+8),
// b_i = a_i + a_(i+4), c_i = b_i + b_(i+2), sum = c_0 + c_1; it stores the rows set in mask
// at y + t·ldy. The functions below share the argument offsets it reads.
#define REDUCE_STORE \
	MOVQ  mask+96(FP), AX      \
	KMOVW AX, K1               \
	MOVQ  acc+8(FP), R8        \
	MOVQ  y+80(FP), DI         \
	MOVQ  ldy+88(FP), R15      \
	SHLQ  $2, R15              \
	MOVQ  nt+72(FP), CX        \
kreduce:                       \
	VMOVUPS (0*64)(R8), Z0     \
	VMOVUPS (1*64)(R8), Z1     \
	VMOVUPS (2*64)(R8), Z2     \
	VMOVUPS (3*64)(R8), Z3     \
	VMOVUPS (4*64)(R8), Z4     \
	VMOVUPS (5*64)(R8), Z5     \
	VMOVUPS (6*64)(R8), Z6     \
	VMOVUPS (7*64)(R8), Z7     \
	VADDPS  (8*64)(R8), Z0, Z0 \
	VADDPS  (9*64)(R8), Z1, Z1 \
	VADDPS  (10*64)(R8), Z2, Z2 \
	VADDPS  (11*64)(R8), Z3, Z3 \
	VADDPS  (12*64)(R8), Z4, Z4 \
	VADDPS  (13*64)(R8), Z5, Z5 \
	VADDPS  (14*64)(R8), Z6, Z6 \
	VADDPS  (15*64)(R8), Z7, Z7 \
	VADDPS  Z4, Z0, Z0         \
	VADDPS  Z5, Z1, Z1         \
	VADDPS  Z6, Z2, Z2         \
	VADDPS  Z7, Z3, Z3         \
	VADDPS  Z2, Z0, Z0         \
	VADDPS  Z3, Z1, Z1         \
	VADDPS  Z1, Z0, Z0         \
	VMOVUPS Z0, K1, (DI)       \
	ADDQ    $1024, R8          \
	ADDQ    R15, DI            \
	DECQ    CX                 \
	JNE     kreduce

// The tile kernels. Each computes, for nt ≤ 16 tokens and nr ≤ 16 weight rows (the tile
// shapes in cfg: tmm0 and tmm3 = C, nt rows × 4·nr bytes; tmm1 and tmm4 = A, nt rows × 32 or
// 16 bytes; tmm2 and tmm5 = B, 8 or 4 rows × 4·nr bytes), the products of every step (a
// block, or a K-quant lane): one TDPBSSD gives the exact int32 sums of the step for all
// (token, row) pairs, stored to cbuf (16 × 16 int32); the sums are then scaled and
// accumulated per lane ℓ = step mod 16 exactly as the AVX-512 GEMV kernels accumulate their
// 16 lanes. The steps are taken lane by lane (ℓ, ℓ+16, ℓ+32, … in increasing order, the
// GEMV's order within a lane), so that the 16 tokens' accumulators of the lane stay in
// Z0-Z15; they are stored to acc (token t, lane ℓ at acc + 1024t + 64ℓ), and REDUCE_STORE
// adds the lanes and writes y. Two steps of a lane are multiplied at a time, on the two tile
// sets, into the two halves of cbuf (16 × 16 int32 each), so that one product's latency
// hides behind the other and behind the float work. tk must hold 16 tokens' factors (zeros
// past nt: C rows past nt are stale and must count for nothing).
//
// Registers: AX 64 (B and cbuf row stride), DX lda, SI A, BX B, DI cbuf, CX cbuf + 1 KB,
// R8 acc of the lane, R9 kw, R10 tk of token 0, R11 tk step per token, R12 lane, R14 steps
// left, R15 tk of the token, R13 scratch; Z0-Z15 the accumulators, Z26-Z31 scratch.

// Per-token float work (token at byte off of the C rows at c, accumulator acc; R15 its
// factors in tk) and the per-step factor loads of each kernel.
#define Q8TOK(off, acc, c) \
	VCVTDQ2PS   off(c), Z29     \
	VMULPS.BCST (R15), Z30, Z31 \
	VFMADD231PS Z31, Z29, acc
#define Q8LOAD(o) VMOVUPS o(R9), Z30

#define Q4KTOK(off, acc, c) \
	VCVTDQ2PS    off(c), Z26      \
	VMULPS.BCST  4(R15), Z28, Z27 \
	VFMADD231PS  Z27, Z26, acc    \
	VBROADCASTSS (R15), Z26       \
	VMULPS.BCST  4(R15), Z29, Z27 \
	VFNMADD231PS Z27, Z26, acc
#define Q4KLOAD(o) \
	VMOVUPS o(R9), Z28    \
	VMOVUPS o+64(R9), Z29

#define Q6KTOK(off, acc, c) \
	VPMULLD     off(c), Z28, Z26 \
	VCVTDQ2PS   Z26, Z26         \
	VMULPS.BCST 4(R15), Z29, Z27 \
	VFMADD231PS Z27, Z26, acc
#define Q6KLOAD(o) \
	VMOVDQU32 o(R9), Z28    \
	VMOVUPS   o+64(R9), Z29

// POST16(TOK, c): the float work of all 16 tokens of one step, from C rows at c.
#define POST16(TOK, c) \
	TOK(0, Z0, c)    \
	ADDQ R11, R15    \
	TOK(64, Z1, c)   \
	ADDQ R11, R15    \
	TOK(128, Z2, c)  \
	ADDQ R11, R15    \
	TOK(192, Z3, c)  \
	ADDQ R11, R15    \
	TOK(256, Z4, c)  \
	ADDQ R11, R15    \
	TOK(320, Z5, c)  \
	ADDQ R11, R15    \
	TOK(384, Z6, c)  \
	ADDQ R11, R15    \
	TOK(448, Z7, c)  \
	ADDQ R11, R15    \
	TOK(512, Z8, c)  \
	ADDQ R11, R15    \
	TOK(576, Z9, c)  \
	ADDQ R11, R15    \
	TOK(640, Z10, c) \
	ADDQ R11, R15    \
	TOK(704, Z11, c) \
	ADDQ R11, R15    \
	TOK(768, Z12, c) \
	ADDQ R11, R15    \
	TOK(832, Z13, c) \
	ADDQ R11, R15    \
	TOK(896, Z14, c) \
	ADDQ R11, R15    \
	TOK(960, Z15, c)

#define STORE16 \
	VMOVUPS Z0, (0)(R8)      \
	VMOVUPS Z1, (1024)(R8)   \
	VMOVUPS Z2, (2048)(R8)   \
	VMOVUPS Z3, (3072)(R8)   \
	VMOVUPS Z4, (4096)(R8)   \
	VMOVUPS Z5, (5120)(R8)   \
	VMOVUPS Z6, (6144)(R8)   \
	VMOVUPS Z7, (7168)(R8)   \
	VMOVUPS Z8, (8192)(R8)   \
	VMOVUPS Z9, (9216)(R8)   \
	VMOVUPS Z10, (10240)(R8) \
	VMOVUPS Z11, (11264)(R8) \
	VMOVUPS Z12, (12288)(R8) \
	VMOVUPS Z13, (13312)(R8) \
	VMOVUPS Z14, (14336)(R8) \
	VMOVUPS Z15, (15360)(R8)

// TILE_KERNEL is the body of the three kernels. LOAD and TOK are the kernel's factor load and
// per-token work; a step's A, B, kw and tk are lane·(1<<ashift) … bytes in (the shifts), a
// token's tk record 1<<tokshift bytes per step further on, and a lane has nsteps<<lanesshift
// steps in all; (a0..a3) and (b0..b3) are the little-endian bytes of the second tile set's
// displacement, 16 steps of A and of B.
#define TILE_KERNEL(LOAD, TOK, ashift, bshift, kwshift, tkshift, tokshift, lanesshift, a0, a1, a2, a3, b0, b1, b2, b3) \
	MOVQ cfg+0(FP), CX                     \
	LDTILECFG_CX                           \
	MOVQ $64, AX                           \
	MOVQ lda+32(FP), DX                    \
	MOVQ cbuf+16(FP), DI                   \
	LEAQ 1024(DI), CX                      \
	MOVQ acc+8(FP), R8                     \
	MOVQ nsteps+64(FP), R11                \
	SHLQ $tokshift, R11                    \
	XORQ R12, R12                          \
lane:                                   \
	ZERO16                                 \
	MOVQ R12, R13                          \
	SHLQ $ashift, R13                      \
	MOVQ a+24(FP), SI                      \
	ADDQ R13, SI                           \
	MOVQ R12, R13                          \
	SHLQ $bshift, R13                      \
	MOVQ b+40(FP), BX                      \
	ADDQ R13, BX                           \
	MOVQ R12, R13                          \
	SHLQ $kwshift, R13                     \
	MOVQ kw+48(FP), R9                     \
	ADDQ R13, R9                           \
	MOVQ R12, R13                          \
	SHLQ $tkshift, R13                     \
	MOVQ tk+56(FP), R10                    \
	ADDQ R13, R10                          \
	MOVQ nsteps+64(FP), R14                \
	SHLQ $lanesshift, R14                  \
	SUBQ R12, R14                          \
	JLE  store                             \
	CMPQ R14, $16                          \
	JLE  single                            \
pair:                                   \
	TILEZERO_T0                            \
	TILEZERO_T3                            \
	TILELOADD_T1_SI_DX                     \
	TILELOADD_T2_BX_AX                     \
	TILELOADD_T4_SI_DX_D32(a0, a1, a2, a3) \
	TILELOADD_T5_BX_AX_D32(b0, b1, b2, b3) \
	TDPBSSD_T0_T1_T2                       \
	TDPBSSD_T3_T4_T5                       \
	TILESTORED_DI_AX_T0                    \
	TILESTORED_CX_AX_T3                    \
	LOAD(0)                                \
	MOVQ R10, R15                          \
	POST16(TOK, DI)                        \
	LOAD(16<<kwshift)                      \
	LEAQ (16<<tkshift)(R10), R15           \
	POST16(TOK, CX)                        \
	ADDQ $(32<<ashift), SI                 \
	ADDQ $(32<<bshift), BX                 \
	ADDQ $(32<<kwshift), R9                \
	ADDQ $(32<<tkshift), R10               \
	SUBQ $32, R14                          \
	JLE  store                             \
	CMPQ R14, $16                          \
	JG   pair                              \
single:                                 \
	TILEZERO_T0                            \
	TILELOADD_T1_SI_DX                     \
	TILELOADD_T2_BX_AX                     \
	TDPBSSD_T0_T1_T2                       \
	TILESTORED_DI_AX_T0                    \
	LOAD(0)                                \
	MOVQ R10, R15                          \
	POST16(TOK, DI)                        \
store:                                  \
	STORE16                                \
	ADDQ $64, R8                           \
	INCQ R12                               \
	CMPQ R12, $16                          \
	JLT  lane                              \
	TILERELEASE                            \
	REDUCE_STORE                           \
	VZEROUPPER                             \
	RET

// func amxQ8Tile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsteps, nt int, y *float32, ldy int, mask uint64)
//
// The 32-element block types against Q8_0 activations: a step is a block b (A: 32 bytes per
// token at a + t·lda + 32b; B: 512 bytes at b + 512b), kw holds its 16 row scales d_w
// (kw + 64b), tk the activation scales (token t's d_a of block b at tk + 4·(t·nsteps + b)):
//
//	acc_t,b%16 = fma(float(sum), d_w·d_a, acc_t,b%16)   (gemv_q8_amd64.s's DSCALE, FINISH32)
TEXT ·amxQ8Tile(SB), NOSPLIT, $0-104
	TILE_KERNEL(Q8LOAD, Q8TOK, 5, 9, 6, 2, 2, 0, $0x00, $0x02, $0x00, $0x00, $0x00, $0x20, $0x00, $0x00)

// func amxQ4KTile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsteps, nt int, y *float32, ldy int, mask uint64)
//
// Q4_K and Q5_K against Q8_K activations; nsteps is the number of super-blocks, a step is a
// 16-element lane L = 16g+ℓ (A: 16 bytes per token at a + t·lda + 16L; B: 256 bytes at
// b + 256L), kw holds 32 words per lane (float(sc)·d of the 16 rows, then float(m)·dmin), tk
// the pair (float(bsum), d_a) of token t and lane L at tk + 8·(t·16·nsteps + L):
//
//	acc_t,ℓ = fma(float(sum), sc·d·d_a, acc_t,ℓ);  acc_t,ℓ = −float(bsum)·(m·dmin·d_a) + acc_t,ℓ
//
// (gemv_k_amd64.s's KSCALES and KFINISH, lane by lane).
TEXT ·amxQ4KTile(SB), NOSPLIT, $0-104
	TILE_KERNEL(Q4KLOAD, Q4KTOK, 4, 8, 7, 3, 7, 4, $0x00, $0x01, $0x00, $0x00, $0x00, $0x10, $0x00, $0x00)

// func amxQ6KTile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsteps, nt int, y *float32, ldy int, mask uint64)
//
// Q6_K against Q8_K activations, laid out as for amxQ4KTile; B holds code−32, kw the int32
// scales of the 16 rows then d:
//
//	acc_t,ℓ = fma(float(sum·sc), d·d_a, acc_t,ℓ)   (gemv_k_amd64.s's gemvQ6_K)
TEXT ·amxQ6KTile(SB), NOSPLIT, $0-104
	TILE_KERNEL(Q6KLOAD, Q6KTOK, 4, 8, 7, 3, 7, 4, $0x00, $0x01, $0x00, $0x00, $0x00, $0x10, $0x00, $0x00)

// func amxTranspose16(dst *uint32, src *byte, stride, chunks int)
//
// Transposes, chunk by chunk, 16 rows of 32-bit words (row n at src + n·stride) into B-tile
// order: word q of row n goes to dst[16q + n]. A chunk is 16 words of each row (64 bytes) and
// 1 KB of dst. 16×16 transpose: 32-bit unpacks, 64-bit unpacks, then two 128-bit lane
// shuffles.
TEXT ·amxTranspose16(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ chunks+24(FP), CX
	LEAQ (DX)(DX*2), AX

tloop:
	MOVQ SI, R8
	VMOVDQU32 (R8), Z0
	VMOVDQU32 (R8)(DX*1), Z1
	VMOVDQU32 (R8)(DX*2), Z2
	VMOVDQU32 (R8)(AX*1), Z3
	LEAQ (R8)(DX*4), R8
	VMOVDQU32 (R8), Z4
	VMOVDQU32 (R8)(DX*1), Z5
	VMOVDQU32 (R8)(DX*2), Z6
	VMOVDQU32 (R8)(AX*1), Z7
	LEAQ (R8)(DX*4), R8
	VMOVDQU32 (R8), Z8
	VMOVDQU32 (R8)(DX*1), Z9
	VMOVDQU32 (R8)(DX*2), Z10
	VMOVDQU32 (R8)(AX*1), Z11
	LEAQ (R8)(DX*4), R8
	VMOVDQU32 (R8), Z12
	VMOVDQU32 (R8)(DX*1), Z13
	VMOVDQU32 (R8)(DX*2), Z14
	VMOVDQU32 (R8)(AX*1), Z15
	VPUNPCKLDQ Z1, Z0, Z16
	VPUNPCKHDQ Z1, Z0, Z17
	VPUNPCKLDQ Z3, Z2, Z18
	VPUNPCKHDQ Z3, Z2, Z19
	VPUNPCKLDQ Z5, Z4, Z20
	VPUNPCKHDQ Z5, Z4, Z21
	VPUNPCKLDQ Z7, Z6, Z22
	VPUNPCKHDQ Z7, Z6, Z23
	VPUNPCKLDQ Z9, Z8, Z24
	VPUNPCKHDQ Z9, Z8, Z25
	VPUNPCKLDQ Z11, Z10, Z26
	VPUNPCKHDQ Z11, Z10, Z27
	VPUNPCKLDQ Z13, Z12, Z28
	VPUNPCKHDQ Z13, Z12, Z29
	VPUNPCKLDQ Z15, Z14, Z30
	VPUNPCKHDQ Z15, Z14, Z31
	VPUNPCKLQDQ Z18, Z16, Z0
	VPUNPCKHQDQ Z18, Z16, Z1
	VPUNPCKLQDQ Z19, Z17, Z2
	VPUNPCKHQDQ Z19, Z17, Z3
	VPUNPCKLQDQ Z22, Z20, Z4
	VPUNPCKHQDQ Z22, Z20, Z5
	VPUNPCKLQDQ Z23, Z21, Z6
	VPUNPCKHQDQ Z23, Z21, Z7
	VPUNPCKLQDQ Z26, Z24, Z8
	VPUNPCKHQDQ Z26, Z24, Z9
	VPUNPCKLQDQ Z27, Z25, Z10
	VPUNPCKHQDQ Z27, Z25, Z11
	VPUNPCKLQDQ Z30, Z28, Z12
	VPUNPCKHQDQ Z30, Z28, Z13
	VPUNPCKLQDQ Z31, Z29, Z14
	VPUNPCKHQDQ Z31, Z29, Z15
	VSHUFI32X4 $0x44, Z4, Z0, Z16
	VSHUFI32X4 $0xEE, Z4, Z0, Z17
	VSHUFI32X4 $0x44, Z12, Z8, Z18
	VSHUFI32X4 $0xEE, Z12, Z8, Z19
	VSHUFI32X4 $0x88, Z18, Z16, Z20
	VSHUFI32X4 $0xDD, Z18, Z16, Z21
	VSHUFI32X4 $0x88, Z19, Z17, Z22
	VSHUFI32X4 $0xDD, Z19, Z17, Z23
	VMOVDQU32 Z20, 0(DI)
	VMOVDQU32 Z21, 256(DI)
	VMOVDQU32 Z22, 512(DI)
	VMOVDQU32 Z23, 768(DI)
	VSHUFI32X4 $0x44, Z5, Z1, Z16
	VSHUFI32X4 $0xEE, Z5, Z1, Z17
	VSHUFI32X4 $0x44, Z13, Z9, Z18
	VSHUFI32X4 $0xEE, Z13, Z9, Z19
	VSHUFI32X4 $0x88, Z18, Z16, Z20
	VSHUFI32X4 $0xDD, Z18, Z16, Z21
	VSHUFI32X4 $0x88, Z19, Z17, Z22
	VSHUFI32X4 $0xDD, Z19, Z17, Z23
	VMOVDQU32 Z20, 64(DI)
	VMOVDQU32 Z21, 320(DI)
	VMOVDQU32 Z22, 576(DI)
	VMOVDQU32 Z23, 832(DI)
	VSHUFI32X4 $0x44, Z6, Z2, Z16
	VSHUFI32X4 $0xEE, Z6, Z2, Z17
	VSHUFI32X4 $0x44, Z14, Z10, Z18
	VSHUFI32X4 $0xEE, Z14, Z10, Z19
	VSHUFI32X4 $0x88, Z18, Z16, Z20
	VSHUFI32X4 $0xDD, Z18, Z16, Z21
	VSHUFI32X4 $0x88, Z19, Z17, Z22
	VSHUFI32X4 $0xDD, Z19, Z17, Z23
	VMOVDQU32 Z20, 128(DI)
	VMOVDQU32 Z21, 384(DI)
	VMOVDQU32 Z22, 640(DI)
	VMOVDQU32 Z23, 896(DI)
	VSHUFI32X4 $0x44, Z7, Z3, Z16
	VSHUFI32X4 $0xEE, Z7, Z3, Z17
	VSHUFI32X4 $0x44, Z15, Z11, Z18
	VSHUFI32X4 $0xEE, Z15, Z11, Z19
	VSHUFI32X4 $0x88, Z18, Z16, Z20
	VSHUFI32X4 $0xDD, Z18, Z16, Z21
	VSHUFI32X4 $0x88, Z19, Z17, Z22
	VSHUFI32X4 $0xDD, Z19, Z17, Z23
	VMOVDQU32 Z20, 192(DI)
	VMOVDQU32 Z21, 448(DI)
	VMOVDQU32 Z22, 704(DI)
	VMOVDQU32 Z23, 960(DI)
	ADDQ $64, SI
	ADDQ $1024, DI
	DECQ CX
	JNE  tloop
	VZEROUPPER
	RET
