//go:build amd64 && !purego

#include "textflag.h"

// AMX-INT8 GEMM tile for the 32-element block types (Q4_0, IQ4_NL, Q5_0, Q8_0) against Q8_0
// activations; see amx_amd64.go for the tile layout and why the float operations are those of
// the AVX-512 GEMV kernels (gemv_q8_amd64.s), bit for bit.
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
//
// Tiles (configured by the caller's 64-byte palette-1 record): tmm0 = C, nt rows × 4·nr bytes
// (int32 sums); tmm1 = A, nt rows × 32 bytes (one block of nt tokens); tmm2 = B, 8 rows × 4·nr
// bytes (one block of nr weight rows in VNNI order).

#define LDTILECFG_CX     BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x01
#define TILERELEASE      BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
#define TILEZERO_T0      BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0
#define TILELOADD_T1_SI_DX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x0C; BYTE $0x16
#define TILELOADD_T2_BX_AX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x14; BYTE $0x03
#define TDPBSSD_T0_T1_T2 BYTE $0xC4; BYTE $0xE2; BYTE $0x6B; BYTE $0x5E; BYTE $0xC1
#define TILESTORED_DI_AX_T0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x07

// K-quant tiles: one TDPBSSD per 16-element lane ℓ of a 256-element super-block (tmm1 = A:
// nt rows × 16 bytes; tmm2 = B: 4 rows × 4·nr bytes), so that each lane keeps its own sum as
// in gemv_k_amd64.s. Per lane L = 16g+ℓ the caller provides in kw (32 words per lane): Q4_K,
// Q5_K float(sc)·d for the 16 rows then float(m)·dmin; Q6_K the int32 scales then d. tk holds
// per token, super-block and lane the pair (float(bsum), d_a): token t's lane L at
// tk + 8·(t·16·nsb + L).
//
// Registers: SI A lane, DX lda, BX B lane, AX 64, DI cbuf, R9 kw lane, R10 tk of token 0,
// R11 tk step per token, R12 lane offset ℓ·64, R14 lanes left; per token CX count, R8 acc,
// R13 cbuf row, R15 tk.

#define KLANE_START \
	MOVQ cfg+0(FP), CX   \
	LDTILECFG_CX         \
	MOVQ a+24(FP), SI    \
	MOVQ lda+32(FP), DX  \
	MOVQ b+40(FP), BX    \
	MOVQ $64, AX         \
	MOVQ cbuf+16(FP), DI \
	MOVQ kw+48(FP), R9   \
	MOVQ tk+56(FP), R10  \
	MOVQ nsb+64(FP), R14 \
	MOVQ R14, R11        \
	SHLQ $7, R11         \
	SHLQ $4, R14         \
	XORQ R12, R12

#define KLANE_TILE \
	TILEZERO_T0         \
	TILELOADD_T1_SI_DX  \
	TILELOADD_T2_BX_AX  \
	TDPBSSD_T0_T1_T2    \
	TILESTORED_DI_AX_T0 \
	MOVQ nt+72(FP), CX  \
	MOVQ acc+8(FP), R8  \
	ADDQ R12, R8        \
	MOVQ DI, R13        \
	MOVQ R10, R15

#define KLANE_NEXT \
	ADDQ $16, SI    \
	ADDQ $256, BX   \
	ADDQ $128, R9   \
	ADDQ $8, R10    \
	ADDQ $64, R12   \
	ANDQ $1023, R12 \
	DECQ R14

#define KTOK_NEXT \
	ADDQ $64, R13   \
	ADDQ R11, R15   \
	ADDQ $1024, R8  \
	DECQ CX

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

// func amxQ8Tile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, dw *float32, da *float32, nb, nt int, y *float32, ldy int, mask uint64)
//
// For nt ≤ 16 tokens and nr ≤ 16 weight rows (the tile shapes in cfg), over nb blocks:
//
//	acc[t][b%16][n] = fma(float(Σ_k A_b[t][k]·B_b[k][n]), dw[b][n]·da[t][b], acc[t][b%16][n])
//
// then y[t·ldy + n] = the 16 lane accumulators of (t, n) added in the GEMV's order, for the
// rows n set in mask. acc (nt × 16 × 16 floats) must be zero on entry; cbuf is 16 × 16 int32.
// A block b of token t is at a + t·lda + 32b, its scale at da + t·nb + b; B block b at
// b + 512b, its row scales at dw + 16b.
//
// Registers: SI A block, DX lda, BX B block, AX 64 (B and cbuf row stride), DI cbuf, R9 dw,
// R10 da of token 0, R11 da step per token, R12 lane offset (b%16)·64, R14 blocks left;
// per token CX count, R8 acc, R13 cbuf row, R15 da.
TEXT ·amxQ8Tile(SB), NOSPLIT, $0-104
	MOVQ cfg+0(FP), CX
	LDTILECFG_CX
	MOVQ a+24(FP), SI
	MOVQ lda+32(FP), DX
	MOVQ b+40(FP), BX
	MOVQ $64, AX
	MOVQ cbuf+16(FP), DI
	MOVQ dw+48(FP), R9
	MOVQ da+56(FP), R10
	MOVQ nb+64(FP), R14
	MOVQ R14, R11
	SHLQ $2, R11
	XORQ R12, R12

block:
	TILEZERO_T0
	TILELOADD_T1_SI_DX
	TILELOADD_T2_BX_AX
	TDPBSSD_T0_T1_T2
	TILESTORED_DI_AX_T0
	VMOVUPS (R9), Z30
	MOVQ    nt+72(FP), CX
	MOVQ    acc+8(FP), R8
	ADDQ    R12, R8
	MOVQ    DI, R13
	MOVQ    R10, R15

tok:
	VCVTDQ2PS    (R13), Z1
	VBROADCASTSS (R15), Z2
	VMULPS       Z30, Z2, Z2
	VMOVUPS      (R8), Z3
	VFMADD231PS  Z2, Z1, Z3
	VMOVUPS      Z3, (R8)
	ADDQ         $64, R13
	ADDQ         R11, R15
	ADDQ         $1024, R8
	DECQ         CX
	JNE          tok

	ADDQ $32, SI
	ADDQ $512, BX
	ADDQ $64, R9
	ADDQ $4, R10
	ADDQ $64, R12
	ANDQ $1023, R12
	DECQ R14
	JNE  block

	TILERELEASE
	REDUCE_STORE
	VZEROUPPER
	RET

// func amxQ4KTile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsb, nt int, y *float32, ldy int, mask uint64)
//
// Q4_K and Q5_K (gemv_k_amd64.s's KFINISH, lane by lane):
//
//	acc[t][ℓ][n] = fma(float(sum), sc·d·d_a, acc);  acc = −float(bsum)·(m·dmin·d_a) + acc
TEXT ·amxQ4KTile(SB), NOSPLIT, $0-104
	KLANE_START

q4klane:
	KLANE_TILE
	VMOVUPS (R9), Z28
	VMOVUPS 64(R9), Z29

q4ktok:
	VCVTDQ2PS    (R13), Z1
	VMULPS.BCST  4(R15), Z28, Z2
	VMOVUPS      (R8), Z3
	VFMADD231PS  Z2, Z1, Z3
	VBROADCASTSS (R15), Z4
	VMULPS.BCST  4(R15), Z29, Z5
	VFNMADD231PS Z5, Z4, Z3
	VMOVUPS      Z3, (R8)
	KTOK_NEXT
	JNE          q4ktok

	KLANE_NEXT
	JNE q4klane

	TILERELEASE
	REDUCE_STORE
	VZEROUPPER
	RET

// func amxQ6KTile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsb, nt int, y *float32, ldy int, mask uint64)
//
// Q6_K (gemv_k_amd64.s's gemvQ6_K, lane by lane; B holds code−32):
//
//	acc[t][ℓ][n] = fma(float(sum·sc), d·d_a, acc)
TEXT ·amxQ6KTile(SB), NOSPLIT, $0-104
	KLANE_START

q6klane:
	KLANE_TILE
	VMOVDQU32 (R9), Z28
	VMOVUPS   64(R9), Z29

q6ktok:
	VPMULLD     (R13), Z28, Z1
	VCVTDQ2PS   Z1, Z1
	VMULPS.BCST 4(R15), Z29, Z2
	VMOVUPS     (R8), Z3
	VFMADD231PS Z2, Z1, Z3
	VMOVUPS     Z3, (R8)
	KTOK_NEXT
	JNE         q6ktok

	KLANE_NEXT
	JNE q6klane

	TILERELEASE
	REDUCE_STORE
	VZEROUPPER
	RET

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
