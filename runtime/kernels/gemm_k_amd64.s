//go:build amd64 && !purego

#include "textflag.h"
#include "gemm_amd64.h"

// Multi-token integer GEMM kernels for the K-quants (tiles of 8 and 4 tokens), over the layouts of pack.go: a group is one 256-element super-block, a lane one
// 16-element sub-block, and a token's group of activations 256 bytes. Arguments and registers
// as in gemm_q_amd64.s. Each (row, token) pair goes through exactly the float operations of
// the GEMV kernels of gemv_k_amd64.s, so that a token's result does not depend on its batch.

// KDOT(t, acc, c): token t's steps 2c, 2c+1 into acc.
#define KDOT(t, acc, c) \
	VPDPBUSD ((t)*256+2*(c)*64)(R13), Z16, acc \
	VPDPBUSD ((t)*256+(2*(c)+1)*64)(R13), Z17, acc

#define KDOTS8(c) \
	KDOT(0, Z0, c) \
	KDOT(1, Z1, c) \
	KDOT(2, Z2, c) \
	KDOT(3, Z3, c) \
	KDOT(4, Z4, c) \
	KDOT(5, Z5, c) \
	KDOT(6, Z6, c) \
	KDOT(7, Z7, c)

#define KDOTS4(c) \
	KDOT(0, Z0, c) \
	KDOT(1, Z1, c) \
	KDOT(2, Z2, c) \
	KDOT(3, Z3, c)

#define NIBS(c) \
	VMOVDQU64 ((c)*64)(R12), Z16 \
	VPSRLW    $4, Z16, Z17       \
	VPANDD    Z31, Z16, Z16      \
	VPANDD    Z31, Z17, Z17

// ---- Q4_K, Q5_K -------------------------------------------------------------------------
// Per group (computed first, so that their latency hides behind the dot products): Z18 = sc·d
// and Z19 = m·dmin per lane (exact), from the scales at soff and the
// fp16 d, dmin at doff; Z26, Z27 the lane → scale index tables. Per token, as KFINISH:
// facc += float(acc)·(Z18·d_a) − float(bsum)·(Z19·d_a).

#define KSCALES(soff, doff) \
	VPMOVZXBD    soff(R12), Z22       \
	VPERMD       Z22, Z27, Z18        \
	VPERMD       Z22, Z26, Z19        \
	VCVTDQ2PS    Z18, Z18             \
	VCVTDQ2PS    Z19, Z19             \
	VPBROADCASTD doff(R12), X22       \
	VCVTPH2PS    X22, X22             \
	VSHUFPS      $0x55, X22, X22, X23 \
	VBROADCASTSS X22, Z22             \
	VBROADCASTSS X23, Z23             \
	VMULPS       Z22, Z18, Z18        \
	VMULPS       Z23, Z19, Z19

#define KFIN(t, acc, facc) \
	VCVTDQ2PS    acc, acc                     \
	VMULPS.BCST  ((t)*128+64)(R14), Z18, Z20  \
	VFMADD231PS  Z20, acc, facc               \
	VCVTDQ2PS    ((t)*128)(R14), Z22          \
	VMULPS.BCST  ((t)*128+64)(R14), Z19, Z23  \
	VFNMADD231PS Z23, Z22, facc

#define HI5K(c) \
	KMOVQ (128+16*(c))(R12), K1   \
	VPADDB Z28, Z16, K1, Z16      \
	KMOVQ (128+16*(c)+8)(R12), K1 \
	VPADDB Z28, Z17, K1, Z17

#define GEMMK8_BODY(INIT, SC, HI, gbytes) \
	INIT                       \
	ZERO4(Z8, Z9, Z10, Z11)    \
	ZERO4(Z12, Z13, Z14, Z15)  \
rowk8:                        \
	ROW_START                  \
groupk8:                      \
	ZERO4(Z0, Z1, Z2, Z3)      \
	ZERO4(Z4, Z5, Z6, Z7)      \
	SC                         \
	NIBS(0)                    \
	HI(0)                      \
	KDOTS8(0)                  \
	NIBS(1)                    \
	HI(1)                      \
	KDOTS8(1)                  \
	KFIN(0, Z0, Z8)            \
	KFIN(1, Z1, Z9)            \
	KFIN(2, Z2, Z10)           \
	KFIN(3, Z3, Z11)           \
	KFIN(4, Z4, Z12)           \
	KFIN(5, Z5, Z13)           \
	KFIN(6, Z6, Z14)           \
	KFIN(7, Z7, Z15)           \
	NEXT_GROUP(gbytes)         \
	JNE groupk8                \
	REDUCE_STORE8              \
	NEXT_ROW                   \
	JNE rowk8                  \
	VZEROUPPER                 \
	RET

#define GEMMK4_BODY(INIT, SC, HI, gbytes) \
	INIT                       \
	ZERO4(Z8, Z9, Z10, Z11)    \
rowk4:                        \
	ROW_START                  \
groupk4:                      \
	ZERO4(Z0, Z1, Z2, Z3)      \
	SC                         \
	NIBS(0)                    \
	HI(0)                      \
	KDOTS4(0)                  \
	NIBS(1)                    \
	HI(1)                      \
	KDOTS4(1)                  \
	KFIN(0, Z0, Z8)            \
	KFIN(1, Z1, Z9)            \
	KFIN(2, Z2, Z10)           \
	KFIN(3, Z3, Z11)           \
	NEXT_GROUP(gbytes)         \
	JNE groupk4                \
	REDUCE_STORE4              \
	NEXT_ROW                   \
	JNE rowk4                  \
	VZEROUPPER                 \
	RET

#define NOHI(c)

// No-operation hook, and the per-kernel inits and per-group scale steps of the bodies.
#define NOP0
#define KPERM \
	VMOVDQU32 kpermG<>+0(SB), Z27 \
	VMOVDQU32 kpermG<>+64(SB), Z26
#define Q4KSC KSCALES(128, 144)
#define Q5KSC KSCALES(160, 176)

// func gemmQ4_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ4_Kx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMK8_BODY(KPERM, Q4KSC, NOHI, 148)

// func gemmQ5_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ5_Kx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMK8_BODY(KPERM, Q5KSC, HI5K, 180)

// func gemmQ4_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ4_Kx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMK4_BODY(KPERM, Q4KSC, NOHI, 148)

// func gemmQ5_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ5_Kx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMK4_BODY(KPERM, Q5KSC, HI5K, 180)

// ---- Q6_K -------------------------------------------------------------------------------
// Per group: Z18 the high bits, Z20 the signed sub-block scales, Z22 d in every lane; Z25
// the 0x30 mask. As gemvQ6_K: (Σ code·a − 32·Σa)·scale, times d·d_a.

#define Q6HI0 \
	VPSLLW     $4, Z18, Z19           \
	VPTERNLOGD $0xf8, Z25, Z19, Z16   \
	VPSLLW     $2, Z18, Z19           \
	VPTERNLOGD $0xf8, Z25, Z19, Z17

#define Q6HI1 \
	VPTERNLOGD $0xf8, Z25, Z18, Z16   \
	VPSRLW     $2, Z18, Z19           \
	VPTERNLOGD $0xf8, Z25, Z19, Z17

#define Q6SCALES \
	VPMOVSXBD    192(R12), Z20 \
	VPBROADCASTW 208(R12), Y22 \
	VCVTPH2PS    Y22, Z22

#define Q6CONST \
	MOVL $0x30303030, BX \
	VPBROADCASTD BX, Z25

// GEMMI8_BODY / GEMMI4_BODY: the K-quants with integer lane scales (Q6_K, Q3_K, IQ4_XS).
// INIT runs once, SC per group (Z20 the scales, Z22 d, and what HI0/HI1 need), HI0 and HI1
// after the nibbles of chunks 0 and 1; IFIN removes the code offset (Σa)<<shift.
#define GEMMI8_BODY(INIT, SC, HI0, HI1, shift, gbytes) \
	INIT                        \
	ZERO4(Z8, Z9, Z10, Z11)     \
	ZERO4(Z12, Z13, Z14, Z15)   \
rowi8:                          \
	ROW_START                   \
groupi8:                        \
	ZERO4(Z0, Z1, Z2, Z3)       \
	ZERO4(Z4, Z5, Z6, Z7)       \
	SC                          \
	NIBS(0)                     \
	HI0                         \
	KDOTS8(0)                   \
	NIBS(1)                     \
	HI1                         \
	KDOTS8(1)                   \
	IFIN(0, Z0, Z8, shift)      \
	IFIN(1, Z1, Z9, shift)      \
	IFIN(2, Z2, Z10, shift)     \
	IFIN(3, Z3, Z11, shift)     \
	IFIN(4, Z4, Z12, shift)     \
	IFIN(5, Z5, Z13, shift)     \
	IFIN(6, Z6, Z14, shift)     \
	IFIN(7, Z7, Z15, shift)     \
	NEXT_GROUP(gbytes)          \
	JNE groupi8                 \
	REDUCE_STORE8               \
	NEXT_ROW                    \
	JNE rowi8                   \
	VZEROUPPER                  \
	RET

#define GEMMI4_BODY(INIT, SC, HI0, HI1, shift, gbytes) \
	INIT                        \
	ZERO4(Z8, Z9, Z10, Z11)     \
rowi4:                          \
	ROW_START                   \
groupi4:                        \
	ZERO4(Z0, Z1, Z2, Z3)       \
	SC                          \
	NIBS(0)                     \
	HI0                         \
	KDOTS4(0)                   \
	NIBS(1)                     \
	HI1                         \
	KDOTS4(1)                   \
	IFIN(0, Z0, Z8, shift)      \
	IFIN(1, Z1, Z9, shift)      \
	IFIN(2, Z2, Z10, shift)     \
	IFIN(3, Z3, Z11, shift)     \
	NEXT_GROUP(gbytes)          \
	JNE groupi4                 \
	REDUCE_STORE4               \
	NEXT_ROW                    \
	JNE rowi4                   \
	VZEROUPPER                  \
	RET

#define IFIN(t, acc, facc, shift) \
	VPSLLD      $shift, ((t)*128)(R14), Z24 \
	VPSUBD      Z24, acc, acc               \
	VPMULLD     Z20, acc, acc               \
	VCVTDQ2PS   acc, acc                    \
	VMULPS.BCST ((t)*128+64)(R14), Z22, Z23 \
	VFMADD231PS Z23, acc, facc

// Q6_K's scales, d and high bits.
#define Q6SC \
	Q6SCALES \
	VMOVDQU64 128(R12), Z18

// func gemmQ6_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ6_Kx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMI8_BODY(Q6CONST, Q6SC, Q6HI0, Q6HI1, 5, 210)

// func gemmQ6_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ6_Kx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMI4_BODY(Q6CONST, Q6SC, Q6HI0, Q6HI1, 5, 210)

// ---- Q2_K, Q3_K, IQ4_XS -----------------------------------------------------------------
// Lanes are sub-blocks with their own scales (pack.go). Q2_K as Q4_K, with Z18 = sc·d and
// Z19 = m·dmin straight from the 16 scales and 16 mins (gemv_k_amd64.s's KSCALES16); Q3_K and
// IQ4_XS as Q6_K, with Z20 the signed scales, Z22 d in every lane and the code offset (4, or
// IQ4_XS's 128 after the codebook lookup through Z25) removed with the Q8_K sums (IFIN).

#define K16SCALES(soff, doff) \
	VPMOVZXBD    soff(R12), Z18       \
	VPMOVZXBD    (soff+16)(R12), Z19  \
	VCVTDQ2PS    Z18, Z18             \
	VCVTDQ2PS    Z19, Z19             \
	VPBROADCASTD doff(R12), X22       \
	VCVTPH2PS    X22, X22             \
	VSHUFPS      $0x55, X22, X22, X23 \
	VBROADCASTSS X22, Z22             \
	VBROADCASTSS X23, Z23             \
	VMULPS       Z22, Z18, Z18        \
	VMULPS       Z23, Z19, Z19

#define I16SCALES \
	VPMOVSXBD    128(R12), Z20 \
	VPBROADCASTW 144(R12), Y22 \
	VCVTPH2PS    Y22, Z22

#define Q2KSC K16SCALES(128, 160)
#define IQ4LOAD VBROADCASTI32X4 ·iq4nlPlus128(SB), Z25
#define IQ4LUT \
	VPSHUFB Z16, Z25, Z16 \
	VPSHUFB Z17, Z25, Z17

// func gemmQ2_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ2_Kx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMK8_BODY(NOP0, Q2KSC, NOHI, 164)

// func gemmQ2_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ2_Kx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMK4_BODY(NOP0, Q2KSC, NOHI, 164)

// func gemmQ3_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ3_Kx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMI8_BODY(NOP0, I16SCALES, NOP0, NOP0, 2, 146)

// func gemmQ3_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmQ3_Kx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMI4_BODY(NOP0, I16SCALES, NOP0, NOP0, 2, 146)

// func gemmIQ4_XSx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ4_XSx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMI8_BODY(IQ4LOAD, I16SCALES, IQ4LUT, IQ4LUT, 7, 146)

// func gemmIQ4_XSx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ4_XSx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	GEMMI4_BODY(IQ4LOAD, I16SCALES, IQ4LUT, IQ4LUT, 7, 146)

// Lane → sub-block scale index (as kperm in gemv_k_amd64.s): sc then m.
DATA kpermG<>+0(SB)/8, $0x0000000000000000
DATA kpermG<>+8(SB)/8, $0x0000000100000001
DATA kpermG<>+16(SB)/8, $0x0000000200000002
DATA kpermG<>+24(SB)/8, $0x0000000300000003
DATA kpermG<>+32(SB)/8, $0x0000000400000004
DATA kpermG<>+40(SB)/8, $0x0000000500000005
DATA kpermG<>+48(SB)/8, $0x0000000600000006
DATA kpermG<>+56(SB)/8, $0x0000000700000007
DATA kpermG<>+64(SB)/8, $0x0000000800000008
DATA kpermG<>+72(SB)/8, $0x0000000900000009
DATA kpermG<>+80(SB)/8, $0x0000000a0000000a
DATA kpermG<>+88(SB)/8, $0x0000000b0000000b
DATA kpermG<>+96(SB)/8, $0x0000000c0000000c
DATA kpermG<>+104(SB)/8, $0x0000000d0000000d
DATA kpermG<>+112(SB)/8, $0x0000000e0000000e
DATA kpermG<>+120(SB)/8, $0x0000000f0000000f
GLOBL kpermG<>(SB), RODATA|NOPTR, $128
