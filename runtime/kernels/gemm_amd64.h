// Macros shared by the multi-token GEMM kernels (gemm_q_amd64.s, gemm_k_amd64.s); arguments
// and register use are described in gemm_q_amd64.s.

// LOAD_GEMM_ARGS(actshift): the activation step per group is ntok<<actshift bytes.
#define LOAD_GEMM_ARGS(actshift) \
	MOVQ y+0(FP), DI          \
	MOVQ ldy+8(FP), AX        \
	SHLQ $2, AX               \
	MOVQ w+16(FP), SI         \
	MOVQ stride+24(FP), DX    \
	MOVQ rows+32(FP), CX      \
	MOVQ groups+40(FP), R8    \
	MOVQ act+48(FP), R9       \
	MOVQ meta+56(FP), R10     \
	MOVQ ntok+64(FP), R11     \
	MOVQ R11, R15             \
	SHLQ $actshift, R11       \
	SHLQ $7, R15              \
	MOVL $0x0f0f0f0f, BX      \
	VPBROADCASTD BX, Z31      \
	MOVL $0x10101010, BX      \
	VPBROADCASTD BX, Z28

#define ROW_START \
	MOVQ SI, R12 \
	MOVQ R9, R13 \
	MOVQ R10, R14 \
	MOVQ R8, BX

#define ZERO4(a, b, c, d) \
	VPXORD a, a, a \
	VPXORD b, b, b \
	VPXORD c, c, c \
	VPXORD d, d, d

#define NEXT_GROUP(gbytes) \
	ADDQ $gbytes, R12 \
	ADDQ R11, R13     \
	ADDQ R15, R14     \
	DECQ BX

#define NEXT_ROW \
	ADDQ $4, DI  \
	ADDQ DX, SI  \
	DECQ CX

// HALVE(a, b, dst): dst = [a lanes 0-7 + a lanes 8-15 | b lanes 0-7 + b lanes 8-15].
#define HALVE(a, b, dst) \
	VSHUFF64X2 $0x44, b, a, dst \
	VSHUFF64X2 $0xee, b, a, Z21 \
	VADDPS     Z21, dst, dst

// QUARTER(a, b, dst): a and b hold two halved accumulators each; dst = the four of them
// reduced to 4 lanes, one per 128-bit lane: [a0, a1, b0, b1].
#define QUARTER(a, b, dst) \
	VSHUFF64X2 $0x88, b, a, dst \
	VSHUFF64X2 $0xdd, b, a, Z21 \
	VADDPS     Z21, dst, dst

// REDUCE_STORE8 sums each of Z8-Z15 (tokens 0-7) by the halving tree and stores token t's sum
// at y + t·ldy; then clears Z8-Z15. Uses Z0-Z7, Z21, R13, R14.
#define REDUCE_STORE8 \
	HALVE(Z8, Z9, Z0)                \
	HALVE(Z10, Z11, Z1)              \
	HALVE(Z12, Z13, Z2)              \
	HALVE(Z14, Z15, Z3)              \
	QUARTER(Z0, Z1, Z4)              \
	QUARTER(Z2, Z3, Z5)              \
	VSHUFPS    $0x44, Z5, Z4, Z0     \
	VSHUFPS    $0xee, Z5, Z4, Z1     \
	VADDPS     Z1, Z0, Z0            \
	VMOVSHDUP  Z0, Z1                \
	VADDPS     Z1, Z0, Z0            \
	LEAQ       (DI)(AX*4), R13       \
	LEAQ       (AX)(AX*2), R14       \
	VMOVSS     X0, (DI)              \
	VEXTRACTPS $2, X0, (R13)         \
	VEXTRACTF32X4 $1, Z0, X1         \
	VMOVSS     X1, (DI)(AX*1)        \
	VEXTRACTPS $2, X1, (R13)(AX*1)   \
	VEXTRACTF32X4 $2, Z0, X1         \
	VMOVSS     X1, (DI)(AX*2)        \
	VEXTRACTPS $2, X1, (R13)(AX*2)   \
	VEXTRACTF32X4 $3, Z0, X1         \
	VMOVSS     X1, (DI)(R14*1)       \
	VEXTRACTPS $2, X1, (R13)(R14*1)  \
	ZERO4(Z8, Z9, Z10, Z11)          \
	ZERO4(Z12, Z13, Z14, Z15)

// REDUCE_STORE4: the same for tokens 0-3 in Z8-Z11.
#define REDUCE_STORE4 \
	HALVE(Z8, Z9, Z0)                \
	HALVE(Z10, Z11, Z1)              \
	QUARTER(Z0, Z1, Z4)              \
	VSHUFPS    $0x44, Z4, Z4, Z0     \
	VSHUFPS    $0xee, Z4, Z4, Z1     \
	VADDPS     Z1, Z0, Z0            \
	VMOVSHDUP  Z0, Z1                \
	VADDPS     Z1, Z0, Z0            \
	LEAQ       (AX)(AX*2), R14       \
	VMOVSS     X0, (DI)              \
	VEXTRACTF32X4 $1, Z0, X1         \
	VMOVSS     X1, (DI)(AX*1)        \
	VEXTRACTF32X4 $2, Z0, X1         \
	VMOVSS     X1, (DI)(AX*2)        \
	VEXTRACTF32X4 $3, Z0, X1         \
	VMOVSS     X1, (DI)(R14*1)       \
	ZERO4(Z8, Z9, Z10, Z11)

