//go:build amd64 && !purego

#include "textflag.h"
#include "gemm_amd64.h"

// Multi-token integer GEMM kernels (AVX-512 BW + VNNI) for the 32-element block types, over
// the layouts of pack.go. Each call multiplies `rows` packed rows by a tile of 8 (…x8) or 4
// (…x4) consecutive tokens of a group-major activation batch: a group's weights are loaded and
// unpacked once and meet every token of the tile, and the activations of the tile stay in L1.
//
// Every (row, token) pair goes through exactly the float operations of the GEMV kernel
// (gemv_q8_amd64.s): the same per-group scaling and accumulation into 16 lanes, and the same
// halving tree for the final sum (lanes i+8, then i+4, i+2, i+1), done here for several
// accumulators at once by shuffles. A token's result is thus bit-identical whether it is
// computed alone or in a tile.
//
// Arguments:
//   y      *float32 output of the first row and first token of the tile; token t's row r at
//                   y[t·ldy + r]
//   ldy    int      floats between consecutive tokens' outputs (the matrix's row count)
//   w      *byte    first packed row; stride bytes between rows
//   rows   int
//   groups int      groups per row
//   act    *byte    interleaved codes of the tile's first token in group 0; token t at +t·512
//   meta   *float32 its record; token t at +t·128
//   ntok   int      tokens of the whole batch (group stride)
//
// Registers: DI y, SI row, DX stride, CX rows left, R8 groups, R9 act, R10 meta, R11 act step
// per group, R15 meta step, AX ldy·4; per row R12 w, R13 act, R14 meta, BX groups left.
// Z0-Z7 integer accumulators (token t in Zt), Z8-Z15 float accumulators, Z16-Z17 unpacked
// weights, Z18 weight scales, Z19-Z21 scratch, Z31 nibble mask.

// NIBS(c) unpacks nibble chunk c of the group: Z16 low nibbles (step 2c), Z17 high (2c+1).
#define NIBS(c) \
	VMOVDQU64 ((c)*64)(R12), Z16 \
	VPSRLW    $4, Z16, Z17       \
	VPANDD    Z31, Z16, Z16      \
	VPANDD    Z31, Z17, Z17

// W8S(c) loads the Q8_0 weight steps 2c, 2c+1.
#define W8S(c) \
	VMOVDQU64 (2*(c)*64)(R12), Z16     \
	VMOVDQU64 ((2*(c)+1)*64)(R12), Z17

// HI5S(c) adds the fifth bits (masks at 256 + 8·step) of steps 2c, 2c+1.
#define HI5S(c) \
	KMOVQ (256+16*(c))(R12), K1   \
	VPADDB Z28, Z16, K1, Z16      \
	KMOVQ (256+16*(c)+8)(R12), K1 \
	VPADDB Z28, Z17, K1, Z17

// IQ4S maps codes 0..15 of Z16, Z17 to IQ4_NL's values + 128 (table in Z30).
#define IQ4S \
	VPSHUFB Z16, Z30, Z16 \
	VPSHUFB Z17, Z30, Z17

// DOT(t, acc, c): token t's steps 2c, 2c+1 into acc.
#define DOT(t, acc, c) \
	VPDPBUSD ((t)*512+2*(c)*64)(R13), Z16, acc \
	VPDPBUSD ((t)*512+(2*(c)+1)*64)(R13), Z17, acc

#define DOTS8(c) \
	DOT(0, Z0, c) \
	DOT(1, Z1, c) \
	DOT(2, Z2, c) \
	DOT(3, Z3, c) \
	DOT(4, Z4, c) \
	DOT(5, Z5, c) \
	DOT(6, Z6, c) \
	DOT(7, Z7, c)

#define DOTS4(c) \
	DOT(0, Z0, c) \
	DOT(1, Z1, c) \
	DOT(2, Z2, c) \
	DOT(3, Z3, c)

// FIN(t, acc, facc, shift): acc −= Σa<<shift; facc += float(acc)·(d_w·d_a), as FINISH32.
#define FIN(t, acc, facc, shift) \
	VPSLLD      $shift, ((t)*128+64)(R14), Z19 \
	VPSUBD      Z19, acc, acc                  \
	VCVTDQ2PS   acc, acc                       \
	VMULPS      ((t)*128)(R14), Z18, Z19       \
	VFMADD231PS Z19, acc, facc

// FIN1(t, acc, facc): Q4_1/Q5_1: facc += float(acc)·(d_w·d_a), then facc += m_w·s_a
// (m_w in Z20), as FINISH32_NOOFF and MIN32.
#define FIN1(t, acc, facc) \
	VCVTDQ2PS   acc, acc                 \
	VMULPS      ((t)*128)(R14), Z18, Z19 \
	VFMADD231PS Z19, acc, facc           \
	VFMADD231PS ((t)*128+64)(R14), Z20, facc

#define FINS8(shift) \
	FIN(0, Z0, Z8, shift)  \
	FIN(1, Z1, Z9, shift)  \
	FIN(2, Z2, Z10, shift) \
	FIN(3, Z3, Z11, shift) \
	FIN(4, Z4, Z12, shift) \
	FIN(5, Z5, Z13, shift) \
	FIN(6, Z6, Z14, shift) \
	FIN(7, Z7, Z15, shift)

#define FINS4(shift) \
	FIN(0, Z0, Z8, shift)  \
	FIN(1, Z1, Z9, shift)  \
	FIN(2, Z2, Z10, shift) \
	FIN(3, Z3, Z11, shift)

#define FIN1S8 \
	FIN1(0, Z0, Z8)  \
	FIN1(1, Z1, Z9)  \
	FIN1(2, Z2, Z10) \
	FIN1(3, Z3, Z11) \
	FIN1(4, Z4, Z12) \
	FIN1(5, Z5, Z13) \
	FIN1(6, Z6, Z14) \
	FIN1(7, Z7, Z15)

#define FIN1S4 \
	FIN1(0, Z0, Z8)  \
	FIN1(1, Z1, Z9)  \
	FIN1(2, Z2, Z10) \
	FIN1(3, Z3, Z11)

// GEMM8(name, UNPACK, FINISH, gbytes, doff): the 8-token kernel. UNPACK(c) leaves the weight
// steps 2c, 2c+1 in Z16, Z17; FINISH scales and accumulates the group; doff is the offset of
// the group's fp16 scales.
#define GEMM8_BODY(UNPACK, FINISH, gbytes, doff) \
	ZERO4(Z8, Z9, Z10, Z11)   \
	ZERO4(Z12, Z13, Z14, Z15) \
row8:                        \
	ROW_START                 \
group8:                      \
	ZERO4(Z0, Z1, Z2, Z3)     \
	ZERO4(Z4, Z5, Z6, Z7)     \
	VCVTPH2PS doff(R12), Z18  \
	UNPACK(0)                 \
	DOTS8(0)                  \
	UNPACK(1)                 \
	DOTS8(1)                  \
	UNPACK(2)                 \
	DOTS8(2)                  \
	UNPACK(3)                 \
	DOTS8(3)                  \
	FINISH                    \
	NEXT_GROUP(gbytes)        \
	JNE group8                \
	REDUCE_STORE8             \
	NEXT_ROW                  \
	JNE row8                  \
	VZEROUPPER                \
	RET

#define GEMM4_BODY(UNPACK, FINISH, gbytes, doff) \
	ZERO4(Z8, Z9, Z10, Z11)   \
row4:                        \
	ROW_START                 \
group4:                      \
	ZERO4(Z0, Z1, Z2, Z3)     \
	VCVTPH2PS doff(R12), Z18  \
	UNPACK(0)                 \
	DOTS4(0)                  \
	UNPACK(1)                 \
	DOTS4(1)                  \
	UNPACK(2)                 \
	DOTS4(2)                  \
	UNPACK(3)                 \
	DOTS4(3)                  \
	FINISH                    \
	NEXT_GROUP(gbytes)        \
	JNE group4                \
	REDUCE_STORE4             \
	NEXT_ROW                  \
	JNE row4                  \
	VZEROUPPER                \
	RET

#define UNPACK_Q4(c) NIBS(c)
#define UNPACK_IQ4(c) NIBS(c) \
	IQ4S
#define UNPACK_Q5(c) NIBS(c) \
	HI5S(c)
#define UNPACK_Q8(c) W8S(c)

// Q4_1 / Q5_1: m_w (fp16 at moff) in Z20 before the finish.
#define FIN_Q41_8 VCVTPH2PS 288(R12), Z20 \
	FIN1S8
#define FIN_Q41_4 VCVTPH2PS 288(R12), Z20 \
	FIN1S4
#define FIN_Q51_8 VCVTPH2PS 352(R12), Z20 \
	FIN1S8
#define FIN_Q51_4 VCVTPH2PS 352(R12), Z20 \
	FIN1S4

// func gemmQ4_0x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ4_0x8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM8_BODY(UNPACK_Q4, FINS8(3), 288, 256)

// func gemmQ4_0x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ4_0x4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM4_BODY(UNPACK_Q4, FINS4(3), 288, 256)

// func gemmIQ4_NLx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ4_NLx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	VBROADCASTI32X4 ·iq4nlPlus128(SB), Z30
	GEMM8_BODY(UNPACK_IQ4, FINS8(7), 288, 256)

// func gemmIQ4_NLx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ4_NLx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	VBROADCASTI32X4 ·iq4nlPlus128(SB), Z30
	GEMM4_BODY(UNPACK_IQ4, FINS4(7), 288, 256)

// func gemmQ4_1x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ4_1x8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM8_BODY(UNPACK_Q4, FIN_Q41_8, 320, 256)

// func gemmQ4_1x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ4_1x4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM4_BODY(UNPACK_Q4, FIN_Q41_4, 320, 256)

// func gemmQ5_0x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ5_0x8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM8_BODY(UNPACK_Q5, FINS8(4), 352, 320)

// func gemmQ5_0x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ5_0x4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM4_BODY(UNPACK_Q5, FINS4(4), 352, 320)

// func gemmQ5_1x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ5_1x8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM8_BODY(UNPACK_Q5, FIN_Q51_8, 384, 320)

// func gemmQ5_1x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ5_1x4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM4_BODY(UNPACK_Q5, FIN_Q51_4, 384, 320)

// func gemmQ8_0x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ8_0x8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM8_BODY(UNPACK_Q8, FINS8(7), 544, 512)

// func gemmQ8_0x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ8_0x4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(9)
	GEMM4_BODY(UNPACK_Q8, FINS4(7), 544, 512)
