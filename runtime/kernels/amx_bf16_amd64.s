//go:build amd64 && !purego

#include "textflag.h"
#include "amx_amd64.h"

// AMX-BF16 kernels (amx_bf16_amd64.go): the tile product amxBF16Tile, the packing of float32
// activations into bf16 parts in the VNNI pair layout (amxBF16Pack), and the transposed store
// of a C block into Y (amxBF16StoreT).
//
// The Go assembler knows neither the AMX instructions nor AVX512_BF16: BYTE encodings (bytes
// from GNU as 2.40; TestAMXBF16Encodings checks them against GNU objdump). Only legacy
// registers in the tile instructions (no REX bits).
//
//	TILELOADD  tmm0, (AX)(CX*1)        C4 E2 7B 4B 04 08
//	TILELOADD  tmm1, 64(AX)(CX*1)      C4 E2 7B 4B 4C 08 40
//	TILELOADD  tmm2, (AX)(CX*1)        C4 E2 7B 4B 14 08
//	TILELOADD  tmm3, 64(AX)(CX*1)      C4 E2 7B 4B 5C 08 40
//	TILESTORED (AX)(CX*1), tmm0        C4 E2 7A 4B 04 08
//	TILESTORED 64(AX)(CX*1), tmm1      C4 E2 7A 4B 4C 08 40
//	TILESTORED (AX)(CX*1), tmm2        C4 E2 7A 4B 14 08
//	TILESTORED 64(AX)(CX*1), tmm3      C4 E2 7A 4B 5C 08 40
//	TILEZERO   tmm1, tmm2, tmm3        C4 E2 7B 49 C8, D0, D8
//	TILELOADD  tmm4, (SI)(DX*1)        C4 E2 7B 4B 24 16
//	TILELOADD  tmm5, (DI)(DX*1)        C4 E2 7B 4B 2C 17
//	TILELOADD  tmm6, (BX)(CX*1)        C4 E2 7B 4B 34 0B
//	TILELOADD  tmm7, 1024(BX)(CX*1)    C4 E2 7B 4B BC 0B 00 04 00 00
//	TDPBF16PS  tmm0, tmm4, tmm6        C4 E2 4A 5C C4   (tmm0 += tmm4 · tmm6)
//	TDPBF16PS  tmm2, tmm5, tmm6        C4 E2 4A 5C D5
//	TDPBF16PS  tmm1, tmm4, tmm7        C4 E2 42 5C CC
//	TDPBF16PS  tmm3, tmm5, tmm7        C4 E2 42 5C DD
//	VCVTNE2PS2BF16 zmm18, zmm17, zmm16 62 A2 77 40 72 D0
//	VCVTNE2PS2BF16 zmm18, zmm21, zmm20 62 A2 57 40 72 D4
//	VCVTNE2PS2BF16 zmm18, zmm23, zmm22 62 A2 47 40 72 D6

// LDTILECFG_CX, TILERELEASE, TILEZERO_T0: amx_amd64.h.
#define BF_TILELOADD_T0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x04; BYTE $0x08
#define BF_TILELOADD_T1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x4C; BYTE $0x08; BYTE $0x40
#define BF_TILELOADD_T2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x14; BYTE $0x08
#define BF_TILELOADD_T3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x5C; BYTE $0x08; BYTE $0x40
#define BF_TILESTORED_T0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x08
#define BF_TILESTORED_T1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x4C; BYTE $0x08; BYTE $0x40
#define BF_TILESTORED_T2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x14; BYTE $0x08
#define BF_TILESTORED_T3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x5C; BYTE $0x08; BYTE $0x40
#define BF_TILEZERO_T1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8
#define BF_TILEZERO_T2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD0
#define BF_TILEZERO_T3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD8
#define BF_TILELOADD_T4 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x16
#define BF_TILELOADD_T5 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x17
#define BF_TILELOADD_T6 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x0B
#define BF_TILELOADD_T7 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xBC; BYTE $0x0B; BYTE $0x00; BYTE $0x04; BYTE $0x00; BYTE $0x00
#define TDPBF16PS_T0_T4_T6 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xC4
#define TDPBF16PS_T2_T5_T6 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xD5
#define TDPBF16PS_T1_T4_T7 BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xCC
#define TDPBF16PS_T3_T5_T7 BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xDD
#define CVT2_Z18_Z17_Z16 BYTE $0x62; BYTE $0xA2; BYTE $0x77; BYTE $0x40; BYTE $0x72; BYTE $0xD0
#define CVT2_Z18_Z21_Z20 BYTE $0x62; BYTE $0xA2; BYTE $0x57; BYTE $0x40; BYTE $0x72; BYTE $0xD4
#define CVT2_Z18_Z23_Z22 BYTE $0x62; BYTE $0xA2; BYTE $0x47; BYTE $0x40; BYTE $0x72; BYTE $0xD6

// func amxBF16Tile(cfg *byte, c *float32, ldc int, a *uint16, lda int, b *byte, bchunk, bplane, kc, planes, flags int)
//
// C += Σ_{i<kc} Σ_{j<planes} A_i · B_ij, with TDPBF16PS, for a block of C of up to 32 rows
// (one or two row tiles: flags bit 0 set for two) and up to 32 columns (flags bit 1 set for
// two column tiles), the row counts of the tiles as cfg (amxBF16Config) sets them:
//
//	C      float32, row stride ldc bytes; column tile q at +64q, row tile 1 at +16·ldc. Loaded
//	       from memory when flags bit 2 is set, else zero; stored back at the end.
//	A_i    bf16, row stride lda bytes: 32 elements (64 bytes) at a + 64i of each row; row tile 1
//	       at a + 16·lda.
//	B_ij   bf16 pairs (VNNI): 16 rows (pair p: elements 2p, 2p+1 of the chunk) × 16 columns × 2,
//	       1 KB, at b + i·bchunk + j·bplane; column tile 1 at +1024.
//
// Per chunk: A's row tiles are loaded once, then each plane's B tiles one after the other,
// each multiplied by both row tiles (tmm0 += tmm4·tmm6, tmm2 += tmm5·tmm6, tmm1 += tmm4·tmm7,
// tmm3 += tmm5·tmm7: four independent accumulations in a row, which hides their latency).
// Tiles: tmm0-tmm3 C (row tile r, column tile q: tmm(2r+q)), tmm4-tmm5 A, tmm6-tmm7 B.
// kc ≥ 1, planes ≥ 1.
//
// Registers: SI, DI the A row tiles, DX lda, BX the B tile, CX 64 (C: ldc), R9 chunks left,
// R10 planes left, R11 the chunk's B, R12 bchunk, R13 bplane, R14 planes, R15 16·ldc.
TEXT ·amxBF16Tile(SB), NOSPLIT, $0-88
	MOVQ cfg+0(FP), CX
	LDTILECFG_CX
	MOVQ flags+80(FP), R8
	MOVQ c+8(FP), AX
	MOVQ ldc+16(FP), CX
	MOVQ CX, R15
	SHLQ $4, R15
	TESTQ $4, R8
	JNE   cload
	TILEZERO_T0
	TESTQ $2, R8
	JEQ   z1
	BF_TILEZERO_T1
z1:
	TESTQ $1, R8
	JEQ   cready
	BF_TILEZERO_T2
	TESTQ $2, R8
	JEQ   cready
	BF_TILEZERO_T3
	JMP   cready

cload:
	BF_TILELOADD_T0
	TESTQ $2, R8
	JEQ   l1
	BF_TILELOADD_T1
l1:
	TESTQ $1, R8
	JEQ   cready
	ADDQ  R15, AX
	BF_TILELOADD_T2
	TESTQ $2, R8
	JEQ   cready
	BF_TILELOADD_T3

cready:
	MOVQ a+24(FP), SI
	MOVQ lda+32(FP), DX
	MOVQ DX, DI
	SHLQ $4, DI
	ADDQ SI, DI
	MOVQ b+40(FP), BX
	MOVQ $64, CX
	MOVQ bchunk+48(FP), R12
	MOVQ bplane+56(FP), R13
	MOVQ kc+64(FP), R9
	MOVQ planes+72(FP), R14
	ANDQ $3, R8
	CMPQ R8, $3
	JEQ  k22
	CMPQ R8, $2
	JEQ  k12
	CMPQ R8, $1
	JEQ  k21

k11:
	BF_TILELOADD_T4
	MOVQ BX, R11
	MOVQ R14, R10
p11:
	BF_TILELOADD_T6
	TDPBF16PS_T0_T4_T6
	ADDQ R13, BX
	DECQ R10
	JNE  p11
	LEAQ (R11)(R12*1), BX
	ADDQ $64, SI
	DECQ R9
	JNE  k11
	JMP  store

k21: // two row tiles, one column tile
	BF_TILELOADD_T4
	BF_TILELOADD_T5
	MOVQ BX, R11
	MOVQ R14, R10
p21:
	BF_TILELOADD_T6
	TDPBF16PS_T0_T4_T6
	TDPBF16PS_T2_T5_T6
	ADDQ R13, BX
	DECQ R10
	JNE  p21
	LEAQ (R11)(R12*1), BX
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNE  k21
	JMP  store

k12: // one row tile, two column tiles
	BF_TILELOADD_T4
	MOVQ BX, R11
	MOVQ R14, R10
p12:
	BF_TILELOADD_T6
	TDPBF16PS_T0_T4_T6
	BF_TILELOADD_T7
	TDPBF16PS_T1_T4_T7
	ADDQ R13, BX
	DECQ R10
	JNE  p12
	LEAQ (R11)(R12*1), BX
	ADDQ $64, SI
	DECQ R9
	JNE  k12
	JMP  store

k22:
	BF_TILELOADD_T4
	BF_TILELOADD_T5
	MOVQ BX, R11
	MOVQ R14, R10
p22:
	BF_TILELOADD_T6
	TDPBF16PS_T0_T4_T6
	TDPBF16PS_T2_T5_T6
	BF_TILELOADD_T7
	TDPBF16PS_T1_T4_T7
	TDPBF16PS_T3_T5_T7
	ADDQ R13, BX
	DECQ R10
	JNE  p22
	LEAQ (R11)(R12*1), BX
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ R9
	JNE  k22

store:
	MOVQ  c+8(FP), AX
	MOVQ  ldc+16(FP), CX
	MOVQ  flags+80(FP), R8
	BF_TILESTORED_T0
	TESTQ $2, R8
	JEQ   s1
	BF_TILESTORED_T1
s1:
	TESTQ $1, R8
	JEQ   sdone
	ADDQ  R15, AX
	BF_TILESTORED_T2
	TESTQ $2, R8
	JEQ   sdone
	BF_TILESTORED_T3
sdone:
	TILERELEASE
	RET

// TRANSPOSE16 transposes the 16×16 dwords in Z0-Z15 (row i in Zi) into Z0-Z15 (column j in
// Zj), through Z16-Z31: 32-bit then 64-bit unpacks within the 128-bit lanes, then two rounds
// of 128-bit lane shuffles.
#define UNPACK_PAIR(r0, r1, lo, hi) \
	VPUNPCKLDQ r1, r0, lo \
	VPUNPCKHDQ r1, r0, hi

#define UNPACK_QUAD(ta, tb, tc, td, o0, o1, o2, o3) \
	VPUNPCKLQDQ tc, ta, o0 \
	VPUNPCKHQDQ tc, ta, o1 \
	VPUNPCKLQDQ td, tb, o2 \
	VPUNPCKHQDQ td, tb, o3

#define SHUF_PAIR(s1, s2, lo, hi) \
	VSHUFI32X4 $0x88, s2, s1, lo \
	VSHUFI32X4 $0xdd, s2, s1, hi

#define TRANSPOSE16 \
	UNPACK_PAIR(Z0, Z1, Z16, Z17)                   \
	UNPACK_PAIR(Z2, Z3, Z18, Z19)                   \
	UNPACK_PAIR(Z4, Z5, Z20, Z21)                   \
	UNPACK_PAIR(Z6, Z7, Z22, Z23)                   \
	UNPACK_PAIR(Z8, Z9, Z24, Z25)                   \
	UNPACK_PAIR(Z10, Z11, Z26, Z27)                 \
	UNPACK_PAIR(Z12, Z13, Z28, Z29)                 \
	UNPACK_PAIR(Z14, Z15, Z30, Z31)                 \
	UNPACK_QUAD(Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3) \
	UNPACK_QUAD(Z20, Z21, Z22, Z23, Z4, Z5, Z6, Z7) \
	UNPACK_QUAD(Z24, Z25, Z26, Z27, Z8, Z9, Z10, Z11) \
	UNPACK_QUAD(Z28, Z29, Z30, Z31, Z12, Z13, Z14, Z15) \
	SHUF_PAIR(Z0, Z4, Z16, Z20)                     \
	SHUF_PAIR(Z1, Z5, Z17, Z21)                     \
	SHUF_PAIR(Z2, Z6, Z18, Z22)                     \
	SHUF_PAIR(Z3, Z7, Z19, Z23)                     \
	SHUF_PAIR(Z8, Z12, Z24, Z28)                    \
	SHUF_PAIR(Z9, Z13, Z25, Z29)                    \
	SHUF_PAIR(Z10, Z14, Z26, Z30)                   \
	SHUF_PAIR(Z11, Z15, Z27, Z31)                   \
	SHUF_PAIR(Z16, Z24, Z0, Z8)                     \
	SHUF_PAIR(Z17, Z25, Z1, Z9)                     \
	SHUF_PAIR(Z18, Z26, Z2, Z10)                    \
	SHUF_PAIR(Z19, Z27, Z3, Z11)                    \
	SHUF_PAIR(Z20, Z28, Z4, Z12)                    \
	SHUF_PAIR(Z21, Z29, Z5, Z13)                    \
	SHUF_PAIR(Z22, Z30, Z6, Z14)                    \
	SHUF_PAIR(Z23, Z31, Z7, Z15)

// LOAD16(base, s): Zi = the 64 bytes at base + i·s (s a constant).
#define LOAD16(base, s) \
	VMOVDQU32 (0*s)(base), Z0   \
	VMOVDQU32 (1*s)(base), Z1   \
	VMOVDQU32 (2*s)(base), Z2   \
	VMOVDQU32 (3*s)(base), Z3   \
	VMOVDQU32 (4*s)(base), Z4   \
	VMOVDQU32 (5*s)(base), Z5   \
	VMOVDQU32 (6*s)(base), Z6   \
	VMOVDQU32 (7*s)(base), Z7   \
	VMOVDQU32 (8*s)(base), Z8   \
	VMOVDQU32 (9*s)(base), Z9   \
	VMOVDQU32 (10*s)(base), Z10 \
	VMOVDQU32 (11*s)(base), Z11 \
	VMOVDQU32 (12*s)(base), Z12 \
	VMOVDQU32 (13*s)(base), Z13 \
	VMOVDQU32 (14*s)(base), Z14 \
	VMOVDQU32 (15*s)(base), Z15

// STORE16(base): the 64 bytes at base + 64i = Zi.
#define STORE16(base) \
	VMOVDQU32 Z0, (0*64)(base)   \
	VMOVDQU32 Z1, (1*64)(base)   \
	VMOVDQU32 Z2, (2*64)(base)   \
	VMOVDQU32 Z3, (3*64)(base)   \
	VMOVDQU32 Z4, (4*64)(base)   \
	VMOVDQU32 Z5, (5*64)(base)   \
	VMOVDQU32 Z6, (6*64)(base)   \
	VMOVDQU32 Z7, (7*64)(base)   \
	VMOVDQU32 Z8, (8*64)(base)   \
	VMOVDQU32 Z9, (9*64)(base)   \
	VMOVDQU32 Z10, (10*64)(base) \
	VMOVDQU32 Z11, (11*64)(base) \
	VMOVDQU32 Z12, (12*64)(base) \
	VMOVDQU32 Z13, (13*64)(base) \
	VMOVDQU32 Z14, (14*64)(base) \
	VMOVDQU32 Z15, (15*64)(base)

// func amxBF16Pack(dst *byte, x *float32, ldx, nt, kc, planes, dchunk, dplane int, tmp *byte)
//
// Splits 16 tokens of float32 activations (token n < nt at x + n·ldx bytes; the tokens from
// nt to 16 are zeros) into planes (1 to 3) bf16 parts, x = h + m + l (amxBF16Split: h =
// bf16(x), m = bf16(x − h), l = bf16(x − h − m), round to nearest even, denormals to zero; m
// and l zero where h is infinite), and writes each 32-element chunk i's part j as a B tile of
// amxBF16Tile at dst + i·dchunk + j·dplane: row p holds, for each token n, the pair of
// elements 2p, 2p+1 (dword n of the 64-byte row). The split goes through tmp (3 KB: part j
// of token n at 1024j + 64n, the tokens' order), then each part's 16×16 dwords are transposed.
//
// Registers: DI dst of the chunk, SI x of the chunk, R8 ldx, R9 nt, R10 chunks left, R11
// planes, R12 dchunk, R13 dplane, R14 tmp; AX the token, BX counter, DX tmp row.
TEXT ·amxBF16Pack(SB), NOSPLIT, $0-72
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ ldx+16(FP), R8
	MOVQ nt+24(FP), R9
	MOVQ kc+32(FP), R10
	MOVQ planes+40(FP), R11
	MOVQ dchunk+48(FP), R12
	MOVQ dplane+56(FP), R13
	MOVQ tmp+64(FP), R14

pchunk:
	MOVQ SI, AX
	MOVQ R14, DX
	XORQ BX, BX
ptok:
	CMPQ   BX, R9
	JGE    pzero
	VMOVUPS (AX), Z16
	VMOVUPS 64(AX), Z17
	JMP    psplit
pzero:
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
psplit:
	CVT2_Z18_Z17_Z16 // h: elements 0-15 from Z16, 16-31 from Z17
	VMOVDQU32 Z18, (DX)
	CMPQ      R11, $1
	JEQ       pnext
	VEXTRACTI64X4 $1, Z18, Y19
	VPMOVZXWD Y18, Z24
	VPMOVZXWD Y19, Z25
	VPSLLD    $16, Z24, Z24 // h as float32
	VPSLLD    $16, Z25, Z25
	VFPCLASSPSZ $0x18, Z24, K1 // h = ±inf: m = l = 0
	VFPCLASSPSZ $0x18, Z25, K2
	KNOTW     K1, K1
	KNOTW     K2, K2
	VSUBPS.Z  Z24, Z16, K1, Z20 // x − h, exact
	VSUBPS.Z  Z25, Z17, K2, Z21
	CVT2_Z18_Z21_Z20 // m
	VMOVDQU32 Z18, 1024(DX)
	CMPQ      R11, $2
	JEQ       pnext
	VEXTRACTI64X4 $1, Z18, Y19
	VPMOVZXWD Y18, Z24
	VPMOVZXWD Y19, Z25
	VPSLLD    $16, Z24, Z24
	VPSLLD    $16, Z25, Z25
	VSUBPS    Z24, Z20, Z22 // x − h − m, exact
	VSUBPS    Z25, Z21, Z23
	CVT2_Z18_Z23_Z22 // l
	VMOVDQU32 Z18, 2048(DX)
pnext:
	ADDQ R8, AX
	ADDQ $64, DX
	INCQ BX
	CMPQ BX, $16
	JLT  ptok

	MOVQ R14, DX
	MOVQ DI, AX
	MOVQ R11, BX
pplane:
	LOAD16(DX, 64)
	TRANSPOSE16
	STORE16(AX)
	ADDQ $1024, DX
	ADDQ R13, AX
	DECQ BX
	JNE  pplane

	ADDQ $128, SI
	ADDQ R12, DI
	DECQ R10
	JNE  pchunk
	VZEROUPPER
	RET

// func amxBF16StoreT(y *float32, ldy int, c *float32, nr, nt int)
//
// Y[t·ldy + r] = C[r][t] for r < nr ≤ 32 and t < nt ≤ 32, C float32 with rows of 128 bytes (the
// 32×32 block amxBF16Tile wrote; rows past nr are read but not stored), ldy in bytes: per
// 16×16 quadrant, 16 rows loaded, transposed (TRANSPOSE16) and stored as 16 tokens' rows,
// masked to the rows < nr.
//
// Registers: DI y, DX ldy, SI c, R8 nr, R9 nt, R10 first row of the quadrant, R11 its first
// token, BX its C, AX its Y, CX count, K1 the rows' mask.
TEXT ·amxBF16StoreT(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ ldy+8(FP), DX
	MOVQ c+16(FP), SI
	MOVQ nr+24(FP), R8
	MOVQ nt+32(FP), R9
	XORQ R10, R10
srow:
	MOVQ  R8, CX
	SUBQ  R10, CX
	CMPQ  CX, $16
	JLE   smask
	MOVQ  $16, CX
smask:
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1
	XORQ  R11, R11
stok:
	MOVQ R10, BX
	SHLQ $7, BX
	ADDQ SI, BX
	LEAQ (BX)(R11*4), BX
	LOAD16(BX, 128)
	TRANSPOSE16
	MOVQ R9, CX
	SUBQ R11, CX
	MOVQ R11, AX
	IMULQ DX, AX
	ADDQ DI, AX
	LEAQ (AX)(R10*4), AX
	VMOVUPS Z0, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z1, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z2, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z3, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z4, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z5, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z6, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z7, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z8, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z9, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z10, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z11, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z12, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z13, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z14, K1, (AX)
	DECQ CX
	JEQ  sdoneq
	ADDQ DX, AX
	VMOVUPS Z15, K1, (AX)
sdoneq:
	ADDQ $16, R11
	CMPQ R11, R9
	JLT  stok
	ADDQ $16, R10
	CMPQ R10, R8
	JLT  srow
	VZEROUPPER
	RET
