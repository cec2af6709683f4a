//go:build amd64 && !purego

#include "textflag.h"

// Float GEMM micro-kernels (AVX-512F) for prefill: a block of 4 weight rows × 4 tokens,
// Y[t·ldy + r] = Σ_{k<n} w_r[k]·x_t[k] for r, t < 4; n is a multiple of 16. Each weight vector
// is decoded once and used by 4 tokens, each activation vector by 4 rows: 16 accumulators.
//
// func gemm4x4T(y *float32, ldy int, w *byte, stride int, x *float32, ldx int, n int)
// (ldy, ldx in elements; stride in bytes)

// HSUM(acc, yacc, off): stores the sum of acc's 16 floats at off(DI) (yacc: acc's low half).
#define HSUM(acc, yacc, off) \
	VEXTRACTF64X4 $1, acc, Y16 \
	VADDPS        Y16, yacc, Y16 \
	VEXTRACTF32X4 $1, Y16, X17 \
	VADDPS        X17, X16, X16 \
	VMOVHLPS      X16, X16, X17 \
	VADDPS        X17, X16, X16 \
	VMOVSHDUP     X16, X17      \
	VADDSS        X17, X16, X16 \
	VMOVSS        X16, off(DI)

#define GEMM4X4(LOADW, wsz) \
	MOVQ y+0(FP), DI         \
	MOVQ ldy+8(FP), AX       \
	SHLQ $2, AX              \
	MOVQ w+16(FP), R12       \
	MOVQ stride+24(FP), DX   \
	MOVQ x+32(FP), R13       \
	MOVQ ldx+40(FP), R8      \
	SHLQ $2, R8              \
	MOVQ n+48(FP), BX        \
	LEAQ (R12)(DX*2), R14    \
	ADDQ DX, R14             \
	LEAQ (R13)(R8*2), R15    \
	ADDQ R8, R15             \
	VPXORD Z0, Z0, Z0        \
	VPXORD Z1, Z1, Z1        \
	VPXORD Z2, Z2, Z2        \
	VPXORD Z3, Z3, Z3        \
	VPXORD Z4, Z4, Z4        \
	VPXORD Z5, Z5, Z5        \
	VPXORD Z6, Z6, Z6        \
	VPXORD Z7, Z7, Z7        \
	VPXORD Z8, Z8, Z8        \
	VPXORD Z9, Z9, Z9        \
	VPXORD Z10, Z10, Z10     \
	VPXORD Z11, Z11, Z11     \
	VPXORD Z12, Z12, Z12     \
	VPXORD Z13, Z13, Z13     \
	VPXORD Z14, Z14, Z14     \
	VPXORD Z15, Z15, Z15     \
loop:                        \
	LOADW((R12), Z16)      \
	LOADW((R12)(DX*1), Z17)      \
	LOADW((R12)(DX*2), Z18)      \
	LOADW((R14), Z19)      \
	VMOVUPS (R13), Z20     \
	VMOVUPS (R13)(R8*1), Z21     \
	VMOVUPS (R13)(R8*2), Z22     \
	VMOVUPS (R15), Z23     \
	VFMADD231PS Z20, Z16, Z0     \
	VFMADD231PS Z21, Z16, Z1     \
	VFMADD231PS Z22, Z16, Z2     \
	VFMADD231PS Z23, Z16, Z3     \
	VFMADD231PS Z20, Z17, Z4     \
	VFMADD231PS Z21, Z17, Z5     \
	VFMADD231PS Z22, Z17, Z6     \
	VFMADD231PS Z23, Z17, Z7     \
	VFMADD231PS Z20, Z18, Z8     \
	VFMADD231PS Z21, Z18, Z9     \
	VFMADD231PS Z22, Z18, Z10    \
	VFMADD231PS Z23, Z18, Z11    \
	VFMADD231PS Z20, Z19, Z12    \
	VFMADD231PS Z21, Z19, Z13    \
	VFMADD231PS Z22, Z19, Z14    \
	VFMADD231PS Z23, Z19, Z15    \
	ADDQ $(16*wsz), R12          \
	ADDQ $(16*wsz), R14          \
	ADDQ $64, R13                \
	ADDQ $64, R15                \
	SUBQ $16, BX                 \
	JNE  loop                    \
	HSUM(Z0, Y0, 0)                  \
	HSUM(Z4, Y4, 4)                  \
	HSUM(Z8, Y8, 8)                  \
	HSUM(Z12, Y12, 12)                \
	ADDQ AX, DI                  \
	HSUM(Z1, Y1, 0)                  \
	HSUM(Z5, Y5, 4)                  \
	HSUM(Z9, Y9, 8)                  \
	HSUM(Z13, Y13, 12)                \
	ADDQ AX, DI                  \
	HSUM(Z2, Y2, 0)                  \
	HSUM(Z6, Y6, 4)                  \
	HSUM(Z10, Y10, 8)                 \
	HSUM(Z14, Y14, 12)                \
	ADDQ AX, DI                  \
	HSUM(Z3, Y3, 0)                  \
	HSUM(Z7, Y7, 4)                  \
	HSUM(Z11, Y11, 8)                 \
	HSUM(Z15, Y15, 12)                \
	VZEROUPPER                   \
	RET

#define LW_F32(addr, reg) VMOVUPS addr, reg
#define LW_F16(addr, reg) VCVTPH2PS addr, reg
#define LW_BF16(addr, reg) VPMOVZXWD addr, reg; VPSLLD $16, reg, reg

// func gemm4x4F32(y *float32, ldy int, w *byte, stride int, x *float32, ldx int, n int)
TEXT ·gemm4x4F32(SB), NOSPLIT, $0-56
	GEMM4X4(LW_F32, 4)

// func gemm4x4F16(y *float32, ldy int, w *byte, stride int, x *float32, ldx int, n int)
TEXT ·gemm4x4F16(SB), NOSPLIT, $0-56
	GEMM4X4(LW_F16, 2)

// func gemm4x4BF16(y *float32, ldy int, w *byte, stride int, x *float32, ldx int, n int)
TEXT ·gemm4x4BF16(SB), NOSPLIT, $0-56
	GEMM4X4(LW_BF16, 2)
