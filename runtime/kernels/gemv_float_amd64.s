//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

// Float GEMV kernels (AVX-512F): for each of rows rows, y[i] = Σ_{k<n} w_i[k]·x[k], with
// w_i = w + i·stride bytes; n is a multiple of 16. Four accumulators hide the FMA latency.

// HSUM_STORE sums the 16 floats of Z30 and stores the total at (DI).

// LOADW_F32 / LOADW_F16 / LOADW_BF16 load 16 weights at off(R12) as float32 into zmm reg.
#define LOADW_F32(off, reg) VMOVUPS off(R12), reg
#define LOADW_F16(off, reg) VCVTPH2PS off(R12), reg
#define LOADW_BF16(off, reg) VPMOVZXWD off(R12), reg; VPSLLD $16, reg, reg

// GEMV_FLOAT defines the loop; wsz is bytes per weight (4 or 2), LOADW its loader.
#define GEMV_FLOAT(LOADW, wsz) \
	MOVQ y+0(FP), DI          \
	MOVQ w+8(FP), SI          \
	MOVQ stride+16(FP), DX    \
	MOVQ rows+24(FP), CX      \
	MOVQ x+32(FP), R9         \
	MOVQ n+40(FP), R8         \
	TESTQ CX, CX              \
	JEQ  done                 \
rowloop:                      \
	MOVQ SI, R12              \
	MOVQ R9, R13              \
	MOVQ R8, BX               \
	VPXORD Z30, Z30, Z30      \
	VPXORD Z29, Z29, Z29      \
	VPXORD Z28, Z28, Z28      \
	VPXORD Z27, Z27, Z27      \
	CMPQ BX, $64              \
	JLT  tail                 \
loop64:                       \
	LOADW(0, Z0)              \
	LOADW(16*wsz, Z1)         \
	LOADW(32*wsz, Z2)         \
	LOADW(48*wsz, Z3)         \
	VFMADD231PS (R13), Z0, Z30    \
	VFMADD231PS 64(R13), Z1, Z29  \
	VFMADD231PS 128(R13), Z2, Z28 \
	VFMADD231PS 192(R13), Z3, Z27 \
	ADDQ $(64*wsz), R12       \
	ADDQ $256, R13            \
	SUBQ $64, BX              \
	CMPQ BX, $64              \
	JGE  loop64               \
tail:                         \
	TESTQ BX, BX              \
	JEQ  sum                  \
loop16:                       \
	LOADW(0, Z0)              \
	VFMADD231PS (R13), Z0, Z30 \
	ADDQ $(16*wsz), R12       \
	ADDQ $64, R13             \
	SUBQ $16, BX              \
	JNE  loop16               \
sum:                          \
	VADDPS Z29, Z30, Z30      \
	VADDPS Z27, Z28, Z28      \
	VADDPS Z28, Z30, Z30      \
	HSUM_STORE                \
	ADDQ $4, DI               \
	ADDQ DX, SI               \
	DECQ CX                   \
	JNE  rowloop              \
done:                         \
	VZEROUPPER                \
	RET

// func gemvF32(y *float32, w *byte, stride, rows int, x *float32, n int)
TEXT ·gemvF32(SB), NOSPLIT, $0-48
	GEMV_FLOAT(LOADW_F32, 4)

// func gemvF16(y *float32, w *byte, stride, rows int, x *float32, n int)
TEXT ·gemvF16(SB), NOSPLIT, $0-48
	GEMV_FLOAT(LOADW_F16, 2)

// func gemvBF16(y *float32, w *byte, stride, rows int, x *float32, n int)
TEXT ·gemvBF16(SB), NOSPLIT, $0-48
	GEMV_FLOAT(LOADW_BF16, 2)
