//go:build amd64 && !purego

#include "textflag.h"
#include "gemm_amd64.h"

// Multi-token integer GEMM kernels (tiles of 8 and 4 tokens) for the i-quants on a grid and
// the ternary types, over the layouts of pack.go. Arguments and registers as in
// gemm_q_amd64.s. Each group's codes are decoded once into Z16-Z19 (one vector per step,
// exactly as gemv_iq_amd64.s decodes them) for the whole tile; each (row, token) pair then goes
// through the float operations of the GEMV kernels, so that a token's result does not depend
// on its batch.

// IDOT(t, acc): token t's four steps into acc.
#define IDOT(t, acc) \
	VPDPBUSD ((t)*256)(R13), Z16, acc     \
	VPDPBUSD ((t)*256+64)(R13), Z17, acc  \
	VPDPBUSD ((t)*256+128)(R13), Z18, acc \
	VPDPBUSD ((t)*256+192)(R13), Z19, acc

// LFIN(t, acc, facc, shift): as the GEMV's LFINISH for token t (Z20 the lane scales, Z22 d).
#define LFIN(t, acc, facc, shift) \
	VPSLLD      $shift, ((t)*128)(R14), Z24 \
	VPSUBD      Z24, acc, acc               \
	VPMULLD     Z20, acc, acc               \
	VCVTDQ2PS   acc, acc                    \
	VMULPS.BCST ((t)*128+64)(R14), Z22, Z23 \
	VFMADD231PS Z23, acc, facc

#define LFIN6(t, acc, facc) LFIN(t, acc, facc, 6)
#define LFIN4(t, acc, facc) LFIN(t, acc, facc, 4)

// TFIN(t, acc, facc): the ternary types' (offset 1, no lane scale).
#define TFIN(t, acc, facc) \
	VPSUBD      ((t)*128)(R14), acc, acc    \
	VCVTDQ2PS   acc, acc                    \
	VMULPS.BCST ((t)*128+64)(R14), Z22, Z23 \
	VFMADD231PS Z23, acc, facc

// Decoders: Z26 the crumbs or nibbles, Z31 the 2-bit (or 4-bit) mask, Z28 4 per byte, Z25
// the table.
#define CRUMBS4 \
	VMOVDQU64 (R12), Z26     \
	VPANDD    Z31, Z26, Z16  \
	VPSRLW    $2, Z26, Z17   \
	VPANDD    Z31, Z17, Z17  \
	VPSRLW    $4, Z26, Z18   \
	VPANDD    Z31, Z18, Z18  \
	VPSRLW    $6, Z26, Z19   \
	VPANDD    Z31, Z19, Z19

#define GRID2DEC \
	CRUMBS4                  \
	KMOVQ   64(R12), K1      \
	KMOVQ   72(R12), K2      \
	KMOVQ   80(R12), K3      \
	KMOVQ   88(R12), K4      \
	VPADDB  Z28, Z16, K1, Z16 \
	VPADDB  Z28, Z17, K2, Z17 \
	VPADDB  Z28, Z18, K3, Z18 \
	VPADDB  Z28, Z19, K4, Z19 \
	VPSHUFB Z16, Z25, Z16    \
	VPSHUFB Z17, Z25, Z17    \
	VPSHUFB Z18, Z25, Z18    \
	VPSHUFB Z19, Z25, Z19

#define GRID3DEC \
	VMOVDQU64 (R12), Z16     \
	VMOVDQU64 64(R12), Z18   \
	VPSRLW    $4, Z16, Z17   \
	VPSRLW    $4, Z18, Z19   \
	VPANDD    Z31, Z16, Z16  \
	VPANDD    Z31, Z17, Z17  \
	VPANDD    Z31, Z18, Z18  \
	VPANDD    Z31, Z19, Z19  \
	VPSHUFB   Z16, Z25, Z16  \
	VPSHUFB   Z17, Z25, Z17  \
	VPSHUFB   Z18, Z25, Z18  \
	VPSHUFB   Z19, Z25, Z19

// Per-group scales: Z20 the lane scales, Z22 d in every lane.
#define GRID2SC \
	VPMOVZXBD    96(R12), Z20 \
	VBROADCASTSS 112(R12), Z22
#define GRID3SC \
	VPMOVZXBD    128(R12), Z20 \
	VBROADCASTSS 144(R12), Z22
#define TERNSC \
	VPBROADCASTW 64(R12), Y22 \
	VCVTPH2PS    Y22, Z22

// Inits: the masks (LOAD_GEMM_ARGS leaves 0x0f in Z31) and the table.
#define CRUMBMASKS \
	MOVL $0x03030303, BX \
	VPBROADCASTD BX, Z31 \
	MOVL $0x04040404, BX \
	VPBROADCASTD BX, Z28
#define IQ2INIT \
	CRUMBMASKS \
	VBROADCASTI32X4 ·iq2LUT(SB), Z25
#define IQ1INIT \
	CRUMBMASKS \
	VBROADCASTI32X4 ·iq1LUT(SB), Z25
#define IQ3XXSINIT VBROADCASTI32X4 ·iq3XXSLUT(SB), Z25
#define IQ3SINIT VBROADCASTI32X4 ·iq3SLUT(SB), Z25

#define IQGEMM8_BODY(INIT, SC, DEC, FIN, gbytes) \
	INIT                       \
	ZERO4(Z8, Z9, Z10, Z11)    \
	ZERO4(Z12, Z13, Z14, Z15)  \
rowq8:                        \
	ROW_START                  \
groupq8:                      \
	ZERO4(Z0, Z1, Z2, Z3)      \
	ZERO4(Z4, Z5, Z6, Z7)      \
	SC                         \
	DEC                        \
	IDOT(0, Z0)                \
	IDOT(1, Z1)                \
	IDOT(2, Z2)                \
	IDOT(3, Z3)                \
	IDOT(4, Z4)                \
	IDOT(5, Z5)                \
	IDOT(6, Z6)                \
	IDOT(7, Z7)                \
	FIN(0, Z0, Z8)             \
	FIN(1, Z1, Z9)             \
	FIN(2, Z2, Z10)            \
	FIN(3, Z3, Z11)            \
	FIN(4, Z4, Z12)            \
	FIN(5, Z5, Z13)            \
	FIN(6, Z6, Z14)            \
	FIN(7, Z7, Z15)            \
	NEXT_GROUP(gbytes)         \
	JNE groupq8                \
	REDUCE_STORE8              \
	NEXT_ROW                   \
	JNE rowq8                  \
	VZEROUPPER                 \
	RET

#define IQGEMM4_BODY(INIT, SC, DEC, FIN, gbytes) \
	INIT                       \
	ZERO4(Z8, Z9, Z10, Z11)    \
rowq4:                        \
	ROW_START                  \
groupq4:                      \
	ZERO4(Z0, Z1, Z2, Z3)      \
	SC                         \
	DEC                        \
	IDOT(0, Z0)                \
	IDOT(1, Z1)                \
	IDOT(2, Z2)                \
	IDOT(3, Z3)                \
	FIN(0, Z0, Z8)             \
	FIN(1, Z1, Z9)             \
	FIN(2, Z2, Z10)            \
	FIN(3, Z3, Z11)            \
	NEXT_GROUP(gbytes)         \
	JNE groupq4                \
	REDUCE_STORE4              \
	NEXT_ROW                   \
	JNE rowq4                  \
	VZEROUPPER                 \
	RET

// func gemmIQ2x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ2x8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM8_BODY(IQ2INIT, GRID2SC, GRID2DEC, LFIN6, 116)

// func gemmIQ2x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ2x4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM4_BODY(IQ2INIT, GRID2SC, GRID2DEC, LFIN6, 116)

// func gemmIQ1x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ1x8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM8_BODY(IQ1INIT, GRID2SC, GRID2DEC, LFIN4, 116)

// func gemmIQ1x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ1x4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM4_BODY(IQ1INIT, GRID2SC, GRID2DEC, LFIN4, 116)

// func gemmIQ3XXSx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ3XXSx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM8_BODY(IQ3XXSINIT, GRID3SC, GRID3DEC, LFIN6, 148)

// func gemmIQ3XXSx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ3XXSx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM4_BODY(IQ3XXSINIT, GRID3SC, GRID3DEC, LFIN6, 148)

// func gemmIQ3Sx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ3Sx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM8_BODY(IQ3SINIT, GRID3SC, GRID3DEC, LFIN6, 148)

// func gemmIQ3Sx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmIQ3Sx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM4_BODY(IQ3SINIT, GRID3SC, GRID3DEC, LFIN6, 148)

// func gemmTQx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmTQx8(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM8_BODY(CRUMBMASKS, TERNSC, CRUMBS4, TFIN, 66)

// func gemmTQx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemmTQx4(SB), NOSPLIT, $0-72
	LOAD_GEMM_ARGS(8)
	IQGEMM4_BODY(CRUMBMASKS, TERNSC, CRUMBS4, TFIN, 66)
