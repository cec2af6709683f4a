//go:build amd64 && !purego

#include "textflag.h"
#include "group_amd64.h"

// AVX-512 (BW + VNNI) kernels of the gqf group matrices (group.go) over the packed 16-row
// blocks and chunk-major activations (group_acts.go's glChunk). Lane j of every vector is row
// j of the block, so a block's 16 outputs of one token come out as one vector: no horizontal
// sums. Each kernel multiplies `blocks` consecutive blocks by a tile of T consecutive tokens
// (x8, x4: GEMM; x1: GEMV, with software prefetch and the integer sums split over several
// accumulators), decoding each 64-byte chunk of weights once for the whole tile:
//
//	a16, int4 (…A16I4): chunk = 8 elements; x & 0x000F000F, (x>>4), (x>>8), (x>>12) masked
//	    the same are the int16 pairs (k0,k2), (k4,k6), (k1,k3), (k5,k7) for VPDPWSSD against
//	    the token's broadcast activation pairs (16 bytes per chunk and token);
//	a8, int4 (…A8I4): x & 0x0F0F0F0F and (x>>4) & 0x0F0F0F0F are the bytes (k0…k3), (k4…k7)
//	    for VPDPBUSD (8 bytes per chunk and token);
//	a16, int8 (…A16I8): chunk = 4 elements; x & 0x00FF00FF and x>>8 (16-bit shifts) are the
//	    pairs (k0,k2), (k1,k3) (8 bytes per chunk and token);
//	a8, int8 (…A8I8): the bytes as stored, one VPDPBUSD (4 bytes per chunk and token).
//
// The codes are unsigned (c = w + z); at the end of each activation block (a16) or unit (a8)
// the integer sum gets z·Σa subtracted (z: the unit's zero points, or 8, or 128; Σa from the
// activations), which makes it the exact Σ w·a, and the float operations are group.go's, in
// its order: a16 y = y + float(I)·(s·d) (VMULPS, VMULPS, VADDPS: no FMA), a8 acc = acc +
// float(I)·s, then y = acc·d. Every (row, token) pair thus gets the generic code's bits,
// whatever the tile.
//
// Argument: one *groupArgs (fields at the GA_ offsets of group_amd64.h). Registers: R9 args,
// DI y of the block (token 0), SI block, R8 blocks left, CX ldy (bytes), AX activation step
// per chunk, R10 units left, R11 chunks left, R12 codes, R13 activations, R14 d, R15 Σa, BX
// scales, DX zero points. Z0-Z7 integer sums (token t in Zt; x1: the parts of the one sum),
// Z8-Z15 float accumulators, Z16-Z19 decoded weights, Z20 the chunk, Z21 nibble/byte mask,
// Z22 scales, Z23 zero points, Z24-Z25 scratch.

// GROUP_BODY is every kernel's loop nest; the macros name the variant's steps.
#define GROUP_BODY(ZEROF, ZEROI, DECODE, DOTS, POST, FINAL, STORE, PREFETCH) \
	MOVQ p+0(FP), R9              \
	MOVQ GA_Y(R9), DI             \
	MOVQ GA_W(R9), SI             \
	MOVQ GA_BLOCKS(R9), R8        \
	MOVQ GA_LDY(R9), CX           \
	MOVQ GA_ACTSTEP(R9), AX       \
	KMOVW GA_MASK(R9), K1         \
	VPBROADCASTD GA_ZCONST(R9), Z23 \
block:                            \
	ZEROF                         \
	MOVQ SI, BX                   \
	MOVQ GA_ZOFF(R9), DX          \
	ADDQ SI, DX                   \
	MOVQ GA_HDR(R9), R12          \
	ADDQ SI, R12                  \
	MOVQ GA_ACT(R9), R13          \
	MOVQ GA_GD(R9), R14           \
	MOVQ GA_GS(R9), R15           \
	MOVQ GA_UNITS(R9), R10        \
unit:                             \
	ZEROI                         \
	MOVQ GA_CHUNKS(R9), R11       \
chunk:                            \
	PREFETCH                      \
	DECODE                        \
	DOTS                          \
	ADDQ $64, R12                 \
	ADDQ AX, R13                  \
	DECQ R11                      \
	JNE  chunk                    \
	CMPQ GA_ZOFF(R9), $0          \
	JEQ  zconst                   \
	VPMOVZXBD (DX), Z23           \
zconst:                           \
	VMOVUPS (BX), Z22             \
	POST                          \
	ADDQ GA_SSTEP(R9), BX         \
	ADDQ $16, DX                  \
	ADDQ GA_METASTEP(R9), R15     \
	DECQ R10                      \
	JNE  unit                     \
	FINAL                         \
	MOVQ DI, R13                  \
	STORE                         \
	ADDQ $64, DI                  \
	ADDQ GA_WSTRIDE(R9), SI       \
	DECQ R8                       \
	JNE  block                    \
	VZEROUPPER                    \
	RET

#define NOP_STEP
#define PF PREFETCHT1 8192(R12)

#define Z8X(a, b, c, d, e, f, g, h) \
	VPXORD a, a, a \
	VPXORD b, b, b \
	VPXORD c, c, c \
	VPXORD d, d, d \
	VPXORD e, e, e \
	VPXORD f, f, f \
	VPXORD g, g, g \
	VPXORD h, h, h
#define Z4X(a, b, c, d) \
	VPXORD a, a, a \
	VPXORD b, b, b \
	VPXORD c, c, c \
	VPXORD d, d, d
#define ZEROF8 Z8X(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
#define ZEROF4 Z4X(Z8, Z9, Z10, Z11)
#define ZEROF1 VPXORD Z8, Z8, Z8
#define ZEROI8 Z8X(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
#define ZEROI4 Z4X(Z0, Z1, Z2, Z3)

// Decoding of one chunk (at R12) into Z16-Z19.
#define DEC_A16I4 \
	VMOVDQU32 (R12), Z20    \
	VPANDD    Z21, Z20, Z16 \
	VPSRLD    $4, Z20, Z17  \
	VPANDD    Z21, Z17, Z17 \
	VPSRLD    $8, Z20, Z18  \
	VPANDD    Z21, Z18, Z18 \
	VPSRLD    $12, Z20, Z19 \
	VPANDD    Z21, Z19, Z19
#define DEC_A8I4 \
	VMOVDQU32 (R12), Z20    \
	VPANDD    Z21, Z20, Z16 \
	VPSRLD    $4, Z20, Z17  \
	VPANDD    Z21, Z17, Z17
#define DEC_A16I8 \
	VMOVDQU32 (R12), Z20    \
	VPANDD    Z21, Z20, Z16 \
	VPSRLW    $8, Z20, Z17
#define DEC_A8I8 VMOVDQU32 (R12), Z16

// Token t's products of the chunk into acc (x1: parts into a, b, c, d).
#define DOT_A16I4(t, acc) \
	VPDPWSSD.BCST (16*(t))(R13), Z16, acc   \
	VPDPWSSD.BCST (16*(t)+4)(R13), Z17, acc \
	VPDPWSSD.BCST (16*(t)+8)(R13), Z18, acc \
	VPDPWSSD.BCST (16*(t)+12)(R13), Z19, acc
#define DOT_A8I4(t, acc) \
	VPDPBUSD.BCST (8*(t))(R13), Z16, acc \
	VPDPBUSD.BCST (8*(t)+4)(R13), Z17, acc
#define DOT_A16I8(t, acc) \
	VPDPWSSD.BCST (8*(t))(R13), Z16, acc \
	VPDPWSSD.BCST (8*(t)+4)(R13), Z17, acc
#define DOT_A8I8(t, acc) VPDPBUSD.BCST (4*(t))(R13), Z16, acc

#define DOTS8(DOT) \
	DOT(0, Z0) \
	DOT(1, Z1) \
	DOT(2, Z2) \
	DOT(3, Z3) \
	DOT(4, Z4) \
	DOT(5, Z5) \
	DOT(6, Z6) \
	DOT(7, Z7)
#define DOTS4(DOT) \
	DOT(0, Z0) \
	DOT(1, Z1) \
	DOT(2, Z2) \
	DOT(3, Z3)

#define DOTS1_A16I4 \
	VPDPWSSD.BCST (R13), Z16, Z0  \
	VPDPWSSD.BCST 4(R13), Z17, Z1 \
	VPDPWSSD.BCST 8(R13), Z18, Z2 \
	VPDPWSSD.BCST 12(R13), Z19, Z3
#define DOTS1_A8I4 \
	VPDPBUSD.BCST (R13), Z16, Z0 \
	VPDPBUSD.BCST 4(R13), Z17, Z1
#define DOTS1_A16I8 \
	VPDPWSSD.BCST (R13), Z16, Z0 \
	VPDPWSSD.BCST 4(R13), Z17, Z1
#define DOTS1_A8I8 VPDPBUSD.BCST (R13), Z16, Z0

// End of a block (a16) or unit (a8) for token t: I = sum − z·Σa; then a16 facc = facc +
// float(I)·(s·d), a8 facc = facc + float(I)·s.
#define POST_A16(t, acc, facc) \
	VPMULLD.BCST (4*(t))(R15), Z23, Z24 \
	VPSUBD       Z24, acc, acc          \
	VCVTDQ2PS    acc, acc               \
	VMULPS.BCST  (4*(t))(R14), Z22, Z25 \
	VMULPS       Z25, acc, acc          \
	VADDPS       acc, facc, facc
#define POST_A8(t, acc, facc) \
	VPMULLD.BCST (4*(t))(R15), Z23, Z24 \
	VPSUBD       Z24, acc, acc          \
	VCVTDQ2PS    acc, acc               \
	VMULPS       Z22, acc, acc          \
	VADDPS       acc, facc, facc

#define POSTS8(POST) \
	POST(0, Z0, Z8)  \
	POST(1, Z1, Z9)  \
	POST(2, Z2, Z10) \
	POST(3, Z3, Z11) \
	POST(4, Z4, Z12) \
	POST(5, Z5, Z13) \
	POST(6, Z6, Z14) \
	POST(7, Z7, Z15)
#define POSTS4(POST) \
	POST(0, Z0, Z8) \
	POST(1, Z1, Z9) \
	POST(2, Z2, Z10) \
	POST(3, Z3, Z11)

// a16 advances d per block; a8 keeps the token's d for FINAL.
#define POST8_A16 POSTS8(POST_A16) \
	ADDQ GA_METASTEP(R9), R14
#define POST4_A16 POSTS4(POST_A16) \
	ADDQ GA_METASTEP(R9), R14
#define POST8_A8 POSTS8(POST_A8)
#define POST4_A8 POSTS4(POST_A8)

// x1: the parts of the one sum are added first (integers: exact).
#define SUM4 \
	VPADDD Z1, Z0, Z0 \
	VPADDD Z3, Z2, Z2 \
	VPADDD Z2, Z0, Z0
#define SUM2 VPADDD Z1, Z0, Z0
// PFH (x1, int4): prefetches the next block's scales and zero points of the unit, which
// the code stream's prefetch does not cover.
#define PFH \
	MOVQ GA_WSTRIDE(R9), R11   \
	PREFETCHT0 (BX)(R11*1)     \
	PREFETCHT0 (DX)(R11*1)
#define POST1_A16I4 SUM4 \
	PFH \
	POST_A16(0, Z0, Z8) \
	ADDQ GA_METASTEP(R9), R14
#define POST1_A16I8 SUM2 \
	POST_A16(0, Z0, Z8) \
	ADDQ GA_METASTEP(R9), R14
#define POST1_A8I4 SUM2 \
	PFH \
	POST_A8(0, Z0, Z8)
#define POST1_A8I8 POST_A8(0, Z0, Z8)

// a8: y = acc·d.
#define FIN_A8(t, facc) VMULPS.BCST (4*(t))(R14), facc, facc
#define FINAL8_A8 \
	FIN_A8(0, Z8)  \
	FIN_A8(1, Z9)  \
	FIN_A8(2, Z10) \
	FIN_A8(3, Z11) \
	FIN_A8(4, Z12) \
	FIN_A8(5, Z13) \
	FIN_A8(6, Z14) \
	FIN_A8(7, Z15)
#define FINAL4_A8 \
	FIN_A8(0, Z8)  \
	FIN_A8(1, Z9)  \
	FIN_A8(2, Z10) \
	FIN_A8(3, Z11)
#define FINAL1_A8 FIN_A8(0, Z8)

// The rows of mask K1 of each token's outputs, token t at y + t·ldy.
#define ST(facc) \
	VMOVUPS facc, K1, (R13) \
	ADDQ    CX, R13
#define STORE8 \
	ST(Z8)  \
	ST(Z9)  \
	ST(Z10) \
	ST(Z11) \
	ST(Z12) \
	ST(Z13) \
	ST(Z14) \
	ST(Z15)
#define STORE4 \
	ST(Z8)  \
	ST(Z9)  \
	ST(Z10) \
	ST(Z11)
#define STORE1 VMOVUPS Z8, K1, (R13)

#define MASK(v) \
	MOVL         v, R11 \
	VPBROADCASTD R11, Z21

// func groupA16I4x8(p *groupArgs)
TEXT ·groupA16I4x8(SB), NOSPLIT, $0-8
	MASK($0x000f000f)
	GROUP_BODY(ZEROF8, ZEROI8, DEC_A16I4, DOTS8(DOT_A16I4), POST8_A16, NOP_STEP, STORE8, NOP_STEP)

// func groupA16I4x4(p *groupArgs)
TEXT ·groupA16I4x4(SB), NOSPLIT, $0-8
	MASK($0x000f000f)
	GROUP_BODY(ZEROF4, ZEROI4, DEC_A16I4, DOTS4(DOT_A16I4), POST4_A16, NOP_STEP, STORE4, NOP_STEP)

// func groupA16I4x1(p *groupArgs)
TEXT ·groupA16I4x1(SB), NOSPLIT, $0-8
	MASK($0x000f000f)
	GROUP_BODY(ZEROF1, ZEROI4, DEC_A16I4, DOTS1_A16I4, POST1_A16I4, NOP_STEP, STORE1, PF)

// func groupA8I4x8(p *groupArgs)
TEXT ·groupA8I4x8(SB), NOSPLIT, $0-8
	MASK($0x0f0f0f0f)
	GROUP_BODY(ZEROF8, ZEROI8, DEC_A8I4, DOTS8(DOT_A8I4), POST8_A8, FINAL8_A8, STORE8, NOP_STEP)

// func groupA8I4x4(p *groupArgs)
TEXT ·groupA8I4x4(SB), NOSPLIT, $0-8
	MASK($0x0f0f0f0f)
	GROUP_BODY(ZEROF4, ZEROI4, DEC_A8I4, DOTS4(DOT_A8I4), POST4_A8, FINAL4_A8, STORE4, NOP_STEP)

// func groupA8I4x1(p *groupArgs)
TEXT ·groupA8I4x1(SB), NOSPLIT, $0-8
	MASK($0x0f0f0f0f)
	GROUP_BODY(ZEROF1, ZEROI4, DEC_A8I4, DOTS1_A8I4, POST1_A8I4, FINAL1_A8, STORE1, PF)

// func groupA16I8x8(p *groupArgs)
TEXT ·groupA16I8x8(SB), NOSPLIT, $0-8
	MASK($0x00ff00ff)
	GROUP_BODY(ZEROF8, ZEROI8, DEC_A16I8, DOTS8(DOT_A16I8), POST8_A16, NOP_STEP, STORE8, NOP_STEP)

// func groupA16I8x4(p *groupArgs)
TEXT ·groupA16I8x4(SB), NOSPLIT, $0-8
	MASK($0x00ff00ff)
	GROUP_BODY(ZEROF4, ZEROI4, DEC_A16I8, DOTS4(DOT_A16I8), POST4_A16, NOP_STEP, STORE4, NOP_STEP)

// func groupA16I8x1(p *groupArgs)
TEXT ·groupA16I8x1(SB), NOSPLIT, $0-8
	MASK($0x00ff00ff)
	GROUP_BODY(ZEROF1, ZEROI4, DEC_A16I8, DOTS1_A16I8, POST1_A16I8, NOP_STEP, STORE1, PF)

// func groupA8I8x8(p *groupArgs)
TEXT ·groupA8I8x8(SB), NOSPLIT, $0-8
	GROUP_BODY(ZEROF8, ZEROI8, DEC_A8I8, DOTS8(DOT_A8I8), POST8_A8, FINAL8_A8, STORE8, NOP_STEP)

// func groupA8I8x4(p *groupArgs)
TEXT ·groupA8I8x4(SB), NOSPLIT, $0-8
	GROUP_BODY(ZEROF4, ZEROI4, DEC_A8I8, DOTS4(DOT_A8I8), POST4_A8, FINAL4_A8, STORE4, NOP_STEP)

// func groupA8I8x1(p *groupArgs)
TEXT ·groupA8I8x1(SB), NOSPLIT, $0-8
	GROUP_BODY(ZEROF1, ZEROI4, DEC_A8I8, DOTS1_A8I8, POST1_A8I8, FINAL1_A8, STORE1, PF)
