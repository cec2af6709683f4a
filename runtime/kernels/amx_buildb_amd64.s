//go:build amd64 && !purego

#include "textflag.h"

// B tiles of the AMX kernels (amx_amd64.go) from the avx512vnni packed copy (pack.go). Step s
// of group g of a packed row is 16 dwords, dword j holding 4 consecutive codes of the row's
// lane j (a 32-element block, or a K-quant's 16-element lane); the B tiles want, for each lane
// and step, the 16 rows' dwords side by side. So for each (g, s) the 16 rows' step vectors
// are decoded to signed values (bytewise: Q4_0 c−8, IQ4_NL and IQ4_XS the codebook, Q5_0
// c+16·hi−16, Q8_0 c^0x80, Q4_K and Q2_K c, Q5_K c+16·hi, Q6_K c+16·hi2−32, Q3_K c−4, as
// amxDecodeRow does) and transposed 16×16 (as amxTranspose16), and output vector j stored at
// dst + (16g+j)·lane + 64s (lane = 512 bytes for the block types, 256 for the K-quants).
//
// func amxBuildBQ4_0(dst, src *byte, stride, groups int) (and the other types)
//
// src: 16 packed rows, stride bytes apart; groups: groups per row.

// ROWS(OP): OP(addr, Zn) for the 16 rows (row n at R12 + n·stride), R8 walking them four at
// a time (R9 stride, R10 3·stride).
#define ROWS(OP) \
	MOVQ R12, R8               \
	OP((R8), Z0)               \
	OP((R8)(R9*1), Z1)         \
	OP((R8)(R9*2), Z2)         \
	OP((R8)(R10*1), Z3)        \
	LEAQ (R8)(R9*4), R8        \
	OP((R8), Z4)               \
	OP((R8)(R9*1), Z5)         \
	OP((R8)(R9*2), Z6)         \
	OP((R8)(R10*1), Z7)        \
	LEAQ (R8)(R9*4), R8        \
	OP((R8), Z8)               \
	OP((R8)(R9*1), Z9)         \
	OP((R8)(R9*2), Z10)        \
	OP((R8)(R10*1), Z11)       \
	LEAQ (R8)(R9*4), R8        \
	OP((R8), Z12)              \
	OP((R8)(R9*1), Z13)        \
	OP((R8)(R9*2), Z14)        \
	OP((R8)(R10*1), Z15)

// Per-row decoders: addr is the row's step (Q8_0) or nibble chunk (others) in group g (R12 =
// src + g·gb + chunk offset), X19 the nibble shift (0 or 4), Z16 0x0F, Z17 the subtrahend or
// codebook, Z18 0x10, R13 the offset from the chunk to the step's high bits.
#define NIB(addr, z) \
	VMOVDQU64 addr, z     \
	VPSRLW    X19, z, z   \
	VPANDD    Z16, z, z
#define DEC_SUB(addr, z) \
	NIB(addr, z)          \
	VPSUBB    Z17, z, z
#define DEC_LUT(addr, z) \
	NIB(addr, z)          \
	VPSHUFB   z, Z17, z
#define DEC_RAW(addr, z) NIB(addr, z)
#define DEC_XOR(addr, z) \
	VMOVDQU64 addr, z     \
	VPXORD    Z17, z, z
// Q5: the step's 64-bit mask of fifth bits at addr + R13.
#define DEC_HI(addr, z) \
	NIB(addr, z)                 \
	LEAQ      addr, R11          \
	KMOVQ     (R11)(R13*1), K1   \
	VPADDB    Z18, z, K1, z
#define DEC_HI_SUB(addr, z) \
	DEC_HI(addr, z)      \
	VPSUBB    Z17, z, z
// Q6_K: hi2 (at addr + R14) byte 4j+b holds the step's bits 4-5 at bits 2s, 2s+1 (X20 = 2s;
// Z18 = 0x03).
#define DEC_Q6(addr, z) \
	NIB(addr, z)                      \
	LEAQ      addr, R11               \
	VMOVDQU64 (R11)(R14*1), Z21       \
	VPSRLW    X20, Z21, Z21           \
	VPANDD    Z18, Z21, Z21           \
	VPSLLW    $4, Z21, Z21            \
	VPORD     Z21, z, z               \
	VPSUBB    Z17, z, z

// TRANSPOSE_STORE(L): transposes Z0-Z15 (row n's dword j) and stores output vector j (dword
// n = row n's dword j) at DI + j·L.
#define TRANSPOSE_STORE(L) \
	VPUNPCKLDQ Z1, Z0, Z16   \
	VPUNPCKHDQ Z1, Z0, Z17   \
	VPUNPCKLDQ Z3, Z2, Z18   \
	VPUNPCKHDQ Z3, Z2, Z19   \
	VPUNPCKLDQ Z5, Z4, Z20   \
	VPUNPCKHDQ Z5, Z4, Z21   \
	VPUNPCKLDQ Z7, Z6, Z22   \
	VPUNPCKHDQ Z7, Z6, Z23   \
	VPUNPCKLDQ Z9, Z8, Z24   \
	VPUNPCKHDQ Z9, Z8, Z25   \
	VPUNPCKLDQ Z11, Z10, Z26 \
	VPUNPCKHDQ Z11, Z10, Z27 \
	VPUNPCKLDQ Z13, Z12, Z28 \
	VPUNPCKHDQ Z13, Z12, Z29 \
	VPUNPCKLDQ Z15, Z14, Z30 \
	VPUNPCKHDQ Z15, Z14, Z31 \
	VPUNPCKLQDQ Z18, Z16, Z0 \
	VPUNPCKHQDQ Z18, Z16, Z1 \
	VPUNPCKLQDQ Z19, Z17, Z2 \
	VPUNPCKHQDQ Z19, Z17, Z3 \
	VPUNPCKLQDQ Z22, Z20, Z4 \
	VPUNPCKHQDQ Z22, Z20, Z5 \
	VPUNPCKLQDQ Z23, Z21, Z6 \
	VPUNPCKHQDQ Z23, Z21, Z7 \
	VPUNPCKLQDQ Z26, Z24, Z8 \
	VPUNPCKHQDQ Z26, Z24, Z9 \
	VPUNPCKLQDQ Z27, Z25, Z10 \
	VPUNPCKHQDQ Z27, Z25, Z11 \
	VPUNPCKLQDQ Z30, Z28, Z12 \
	VPUNPCKHQDQ Z30, Z28, Z13 \
	VPUNPCKLQDQ Z31, Z29, Z14 \
	VPUNPCKHQDQ Z31, Z29, Z15 \
	VSHUFI32X4 $0x44, Z4, Z0, Z16   \
	VSHUFI32X4 $0xEE, Z4, Z0, Z17   \
	VSHUFI32X4 $0x44, Z12, Z8, Z18  \
	VSHUFI32X4 $0xEE, Z12, Z8, Z19  \
	VSHUFI32X4 $0x88, Z18, Z16, Z20 \
	VSHUFI32X4 $0xDD, Z18, Z16, Z21 \
	VSHUFI32X4 $0x88, Z19, Z17, Z22 \
	VSHUFI32X4 $0xDD, Z19, Z17, Z23 \
	VMOVDQU32 Z20, (0*L)(DI)        \
	VMOVDQU32 Z21, (4*L)(DI)        \
	VMOVDQU32 Z22, (8*L)(DI)        \
	VMOVDQU32 Z23, (12*L)(DI)       \
	VSHUFI32X4 $0x44, Z5, Z1, Z16   \
	VSHUFI32X4 $0xEE, Z5, Z1, Z17   \
	VSHUFI32X4 $0x44, Z13, Z9, Z18  \
	VSHUFI32X4 $0xEE, Z13, Z9, Z19  \
	VSHUFI32X4 $0x88, Z18, Z16, Z20 \
	VSHUFI32X4 $0xDD, Z18, Z16, Z21 \
	VSHUFI32X4 $0x88, Z19, Z17, Z22 \
	VSHUFI32X4 $0xDD, Z19, Z17, Z23 \
	VMOVDQU32 Z20, (1*L)(DI)        \
	VMOVDQU32 Z21, (5*L)(DI)        \
	VMOVDQU32 Z22, (9*L)(DI)        \
	VMOVDQU32 Z23, (13*L)(DI)       \
	VSHUFI32X4 $0x44, Z6, Z2, Z16   \
	VSHUFI32X4 $0xEE, Z6, Z2, Z17   \
	VSHUFI32X4 $0x44, Z14, Z10, Z18 \
	VSHUFI32X4 $0xEE, Z14, Z10, Z19 \
	VSHUFI32X4 $0x88, Z18, Z16, Z20 \
	VSHUFI32X4 $0xDD, Z18, Z16, Z21 \
	VSHUFI32X4 $0x88, Z19, Z17, Z22 \
	VSHUFI32X4 $0xDD, Z19, Z17, Z23 \
	VMOVDQU32 Z20, (2*L)(DI)        \
	VMOVDQU32 Z21, (6*L)(DI)        \
	VMOVDQU32 Z22, (10*L)(DI)       \
	VMOVDQU32 Z23, (14*L)(DI)       \
	VSHUFI32X4 $0x44, Z7, Z3, Z16   \
	VSHUFI32X4 $0xEE, Z7, Z3, Z17   \
	VSHUFI32X4 $0x44, Z15, Z11, Z18 \
	VSHUFI32X4 $0xEE, Z15, Z11, Z19 \
	VSHUFI32X4 $0x88, Z18, Z16, Z20 \
	VSHUFI32X4 $0xDD, Z18, Z16, Z21 \
	VSHUFI32X4 $0x88, Z19, Z17, Z22 \
	VSHUFI32X4 $0xDD, Z19, Z17, Z23 \
	VMOVDQU32 Z20, (3*L)(DI)        \
	VMOVDQU32 Z21, (7*L)(DI)        \
	VMOVDQU32 Z22, (11*L)(DI)       \
	VMOVDQU32 Z23, (15*L)(DI)

// CONSTS(sub, hi): Z16 = 0x0F bytes, Z17 = sub, Z18 = hi (0x10 for the fifth bit, 0x03 for
// Q6_K's); CONSTS_LUT: Z17 = IQ4_NL's codebook (·kvaluesIQ4NL, dequant.go). Reloaded at every
// step (the transpose clobbers them).
#define CONSTS(sub, hi) \
	MOVL $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z16 \
	MOVL sub, AX         \
	VPBROADCASTD AX, Z17 \
	MOVL hi, AX          \
	VPBROADCASTD AX, Z18
#define CONSTS_LUT \
	MOVL $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z16 \
	VBROADCASTI32X4 ·kvaluesIQ4NL(SB), Z17

// BUILD(RELOAD, DEC, gb, steps, L, nibbles, hioff): the loops over groups and steps. For a
// nibble layout (nibbles 1) step s reads chunk s/2, its low (s even) or high nibbles; Q8_0
// (nibbles 0) step s is its own 64 bytes. hioff: the high bits' offset from the group (Q5:
// 8 bytes per step; Q6_K: one 64-byte vector).
#define BUILD(RELOAD, DEC, gb, steps, L, nibbles, hioff) \
	MOVQ dst+0(FP), BX        \
	MOVQ src+8(FP), SI        \
	MOVQ stride+16(FP), R9    \
	LEAQ (R9)(R9*2), R10      \
	MOVQ groups+24(FP), CX    \
group:                        \
	XORQ DX, DX               \
step:                         \
	RELOAD                    \
	MOVQ DX, AX               \
	ANDQ $1, AX               \
	SHLQ $2, AX               \
	VMOVQ AX, X19             \
	MOVQ DX, AX               \
	SHLQ $1, AX               \
	VMOVQ AX, X20             \
	MOVQ DX, AX               \
	SHRQ $nibbles, AX         \
	SHLQ $6, AX               \
	LEAQ (SI)(AX*1), R12      \
	MOVQ $hioff, R13          \
	SUBQ AX, R13              \
	MOVQ R13, R14             \
	MOVQ DX, AX               \
	SHLQ $3, AX               \
	ADDQ AX, R13              \
	ROWS(DEC)                 \
	MOVQ DX, AX               \
	SHLQ $6, AX               \
	LEAQ (BX)(AX*1), DI       \
	TRANSPOSE_STORE(L)        \
	INCQ DX                   \
	CMPQ DX, $steps           \
	JLT  step                 \
	ADDQ $gb, SI              \
	ADDQ $(16*L), BX          \
	DECQ CX                   \
	JNE  group                \
	VZEROUPPER                \
	RET

// func amxBuildBQ4_0(dst, src *byte, stride, groups int)
TEXT ·amxBuildBQ4_0(SB), NOSPLIT, $0-32
	BUILD(CONSTS($0x08080808, $0), DEC_SUB, 288, 8, 512, 1, 0)

// func amxBuildBIQ4_NL(dst, src *byte, stride, groups int)
TEXT ·amxBuildBIQ4_NL(SB), NOSPLIT, $0-32
	BUILD(CONSTS_LUT, DEC_LUT, 288, 8, 512, 1, 0)

// func amxBuildBQ5_0(dst, src *byte, stride, groups int)
TEXT ·amxBuildBQ5_0(SB), NOSPLIT, $0-32
	BUILD(CONSTS($0x10101010, $0x10101010), DEC_HI_SUB, 352, 8, 512, 1, 256)

// func amxBuildBQ8_0(dst, src *byte, stride, groups int)
TEXT ·amxBuildBQ8_0(SB), NOSPLIT, $0-32
	BUILD(CONSTS($0x80808080, $0), DEC_XOR, 544, 8, 512, 0, 0)

// func amxBuildBQ4_K(dst, src *byte, stride, groups int)
TEXT ·amxBuildBQ4_K(SB), NOSPLIT, $0-32
	BUILD(CONSTS($0, $0), DEC_RAW, 148, 4, 256, 1, 0)

// func amxBuildBQ2_K(dst, src *byte, stride, groups int)
TEXT ·amxBuildBQ2_K(SB), NOSPLIT, $0-32
	BUILD(CONSTS($0, $0), DEC_RAW, 164, 4, 256, 1, 0)

// func amxBuildBQ5_K(dst, src *byte, stride, groups int)
TEXT ·amxBuildBQ5_K(SB), NOSPLIT, $0-32
	BUILD(CONSTS($0, $0x10101010), DEC_HI, 180, 4, 256, 1, 128)

// func amxBuildBQ6_K(dst, src *byte, stride, groups int)
TEXT ·amxBuildBQ6_K(SB), NOSPLIT, $0-32
	BUILD(CONSTS($0x20202020, $0x03030303), DEC_Q6, 210, 4, 256, 1, 128)

// func amxBuildBQ3_K(dst, src *byte, stride, groups int)
TEXT ·amxBuildBQ3_K(SB), NOSPLIT, $0-32
	BUILD(CONSTS($0x04040404, $0), DEC_SUB, 146, 4, 256, 1, 0)

// func amxBuildBIQ4_XS(dst, src *byte, stride, groups int)
TEXT ·amxBuildBIQ4_XS(SB), NOSPLIT, $0-32
	BUILD(CONSTS_LUT, DEC_LUT, 146, 4, 256, 1, 0)
