//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

#define HSUM3_STORE \
	VADDPS        Z21, Z22, Z22 \
	VADDPS        Z29, Z30, Z30 \
	VADDPS        Z22, Z30, Z30 \
	HSUM_STORE

// Float-activation GEMV kernels for quantized weights (AVX-512 F/BW), reading ggml's own block
// layout: each block is decoded to float32 in registers (codes widened to 32-bit lanes, offset
// removed in integers, multiplied by the block's scale) and multiplied into float32
// activations with FMA. For each of rows rows: y[i] = Σ_k w_i[k]·x[k] over nb blocks (or
// super-blocks for K-quants).
//
// func fgemvT(y *float32, w *byte, stride, rows, nb int, x *float32)
// Registers: DI y, SI row, DX stride, CX rows left, R8 nb, R9 x; per row R12 w, R13 x,
// BX blocks left; Z30, Z29 accumulators. K-quant kernels keep 16 scales in a 64-byte frame.


#define LOAD_ARGS \
	MOVQ y+0(FP), DI       \
	MOVQ w+8(FP), SI       \
	MOVQ stride+16(FP), DX \
	MOVQ rows+24(FP), CX   \
	MOVQ nb+32(FP), R8     \
	MOVQ x+40(FP), R9      \
	MOVL $15, AX           \
	VPBROADCASTD AX, Z31   \
	MOVL $3, AX            \
	VPBROADCASTD AX, Z27   \
	MOVL $16, AX           \
	VPBROADCASTD AX, Z26

#define ROW_START \
	MOVQ SI, R12         \
	MOVQ R9, R13         \
	MOVQ R8, BX          \
	VPXORD Z30, Z30, Z30 \
	VPXORD Z29, Z29, Z29 \
	VPXORD Z22, Z22, Z22 \
	VPXORD Z21, Z21, Z21

#define ROW_END \
	HSUM3_STORE  \
	ADDQ $4, DI \
	ADDQ DX, SI \
	DECQ CX

// DSCALE(off): Z3 = the fp16 at off(R12) widened and broadcast.
#define DSCALE(off) \
	VPBROADCASTW off(R12), Y3 \
	VCVTPH2PS    Y3, Z3

// OFFSET(c): Z28 = int32 c in every lane.
#define OFFSET(c) \
	MOVL $c, AX          \
	VPBROADCASTD AX, Z28

// FMA2: y += (Z1·Z3)·x[0:16] + (Z2·Z3)·x[16:32] (Z1, Z2 int codes already offset).
#define FMA2 \
	VCVTDQ2PS   Z1, Z1          \
	VCVTDQ2PS   Z2, Z2          \
	VMULPS      Z3, Z1, Z1      \
	VMULPS      Z3, Z2, Z2      \
	VFMADD231PS (R13), Z1, Z30  \
	VFMADD231PS 64(R13), Z2, Z29

// NIB16(off): Z1 = low nibbles, Z2 = high nibbles of the 16 bytes at off(R12), as int32.
#define NIB16(off) \
	VPMOVZXBD off(R12), Z1 \
	VPSRLD    $4, Z1, Z2   \
	VPANDD    Z31, Z1, Z1

// Q4_1 / Q5_1: value = d·q + m.
#define FMA2M(moff) \
	VPBROADCASTW moff(R12), Y4  \
	VCVTPH2PS    Y4, Z4         \
	VCVTDQ2PS    Z1, Z1         \
	VCVTDQ2PS    Z2, Z2         \
	VFMADD213PS  Z4, Z3, Z1     \
	VFMADD213PS  Z4, Z3, Z2     \
	VFMADD231PS  (R13), Z1, Z30 \
	VFMADD231PS  64(R13), Z2, Z29

// HIBITS(off): add 16 to the lanes of Z1 (Z2) whose bit is set in the 16-bit mask at off
// (off+2): the fifth bits of a Q5 block.
#define HIBITS(off) \
	KMOVW  off(R12), K1       \
	KMOVW  (off+2)(R12), K2   \
	VPADDD Z26, Z1, K1, Z1    \
	VPADDD Z26, Z2, K2, Z2

// KSCALES(soff): unpacks the 6-bit scales and mins of a Q4_K/Q5_K super-block (12 bytes at
// soff(R12); ggml's utmp shuffle) and stores d·sc[0..7] at 0(SP), dmin·m[0..7] at 32(SP).
#define KSCALES(soff) \
	MOVL soff(R12), AX          \
	MOVL (soff+4)(R12), R10     \
	MOVL (soff+8)(R12), R11     \
	MOVL R11, R14               \
	SHRL $4, R14                \
	ANDL $0x0f0f0f0f, R14       \
	MOVL R10, R15               \
	SHRL $6, R15                \
	ANDL $0x03030303, R15       \
	SHLL $4, R15                \
	ORL  R15, R14               \
	MOVL R10, R15               \
	ANDL $0x3f3f3f3f, R15       \
	ANDL $0x0f0f0f0f, R11       \
	MOVL AX, R10                \
	SHRL $6, R10                \
	ANDL $0x03030303, R10       \
	SHLL $4, R10                \
	ORL  R11, R10               \
	ANDL $0x3f3f3f3f, AX        \
	VMOVD AX, X4                \
	VPINSRD $1, R10, X4, X4     \
	VPINSRD $2, R15, X4, X4     \
	VPINSRD $3, R14, X4, X4     \
	VPMOVZXBD X4, Z4            \
	VCVTDQ2PS Z4, Z4            \
	VPBROADCASTD 0(R12), X5     \
	VCVTPH2PS X5, X5            \
	VBROADCASTSS X5, Y6         \
	VSHUFPS $0x55, X5, X5, X7   \
	VBROADCASTSS X7, Y7         \
	VINSERTF64X4 $1, Y7, Z6, Z6 \
	VMULPS Z6, Z4, Z4           \
	VMOVUPS Z4, 0(SP)

// KSUB(j, lo, hi, xoff, acc1, acc2): multiplies the 32 codes of sub-block j (Z lo: elements
// 0-15, Z hi: 16-31, int32) by d·sc_j, subtracts dmin·m_j, and accumulates against x.
#define KSUB(j, lo, hi, xoff, acc1, acc2) \
	VCVTDQ2PS    lo, lo             \
	VCVTDQ2PS    hi, hi             \
	VBROADCASTSS (4*(j))(SP), Z3    \
	VBROADCASTSS (32+4*(j))(SP), Z4 \
	VFMSUB213PS  Z4, Z3, lo         \
	VFMSUB213PS  Z4, Z3, hi         \
	VFMADD231PS  (xoff)(R13), lo, acc1 \
	VFMADD231PS  (xoff+64)(R13), hi, acc2

// Q4K64(j): the 64 elements of qs[32j:32j+32]: sub-blocks 2j (low nibbles), 2j+1 (high).
#define Q4K64(j, qoff) \
	VPMOVZXBD (qoff+32*(j))(R12), Z1    \
	VPMOVZXBD (qoff+32*(j)+16)(R12), Z2 \
	VPSRLD    $4, Z1, Z8                \
	VPSRLD    $4, Z2, Z9                \
	VPANDD    Z31, Z1, Z1               \
	VPANDD    Z31, Z2, Z2

// Q5K64(j): Q4K64 plus the fifth bits: bit 2j (sub-block 2j) and 2j+1 of qh[l] (Z10, Z11 hold
// qh[0:16], qh[16:32] as int32).
#define Q5K64(j) \
	Q4K64(j, 48)                 \
	VPSRLD $(2*(j)), Z10, Z12    \
	VPSRLD $(2*(j)), Z11, Z13    \
	VPANDD Z27, Z12, Z12         \
	VPANDD Z27, Z13, Z13         \
	VPSRLD $1, Z12, Z14          \
	VPSRLD $1, Z13, Z15          \
	VPANDD Z27, Z12, Z12         \
	VPSLLD $4, Z12, Z12          \
	VPSLLD $4, Z13, Z13          \
	VPSLLD $4, Z14, Z14          \
	VPSLLD $4, Z15, Z15          \
	VPANDD Z26, Z12, Z12         \
	VPANDD Z26, Z13, Z13         \
	VPANDD Z26, Z14, Z14         \
	VPANDD Z26, Z15, Z15         \
	VPORD  Z12, Z1, Z1           \
	VPORD  Z13, Z2, Z2           \
	VPORD  Z14, Z8, Z8           \
	VPORD  Z15, Z9, Z9

// Q6Q(n, h): elements 128n + 16h + {0,32,64,96} + 0..15 of a Q6_K super-block; scales
// (d·sc, at 0(SP)) index 8n + 2k + h for quarter k.
#define Q6Q(n, h) \
	VPMOVZXBD (64*(n)+16*(h))(R12), Z1      \
	VPMOVZXBD (64*(n)+32+16*(h))(R12), Z2   \
	VPMOVZXBD (128+32*(n)+16*(h))(R12), Z10 \
	VPSRLD    $4, Z1, Z8               \
	VPSRLD    $4, Z2, Z9               \
	VPANDD    Z31, Z1, Z1              \
	VPANDD    Z31, Z2, Z2              \
	VPSLLD    $4, Z10, Z11             \
	VPSLLD    $2, Z10, Z12             \
	VPSRLD    $2, Z10, Z13             \
	VPTERNLOGD $0xf8, Z25, Z11, Z1     \
	VPTERNLOGD $0xf8, Z25, Z12, Z2     \
	VPTERNLOGD $0xf8, Z25, Z10, Z8     \
	VPTERNLOGD $0xf8, Z25, Z13, Z9     \
	Q6OUT(Z1, 8*(n)+(h), 512*(n)+64*(h), Z30)       \
	Q6OUT(Z2, 8*(n)+2+(h), 512*(n)+128+64*(h), Z29) \
	Q6OUT(Z8, 8*(n)+4+(h), 512*(n)+256+64*(h), Z30) \
	Q6OUT(Z9, 8*(n)+6+(h), 512*(n)+384+64*(h), Z29)

// Q6OUT(reg, s, xoff, acc): acc += (reg − 32) · d·sc[s] · x[xoff/4 : +16].
#define Q6OUT(reg, s, xoff, acc) \
	VPSUBD       Z24, reg, reg      \
	VCVTDQ2PS    reg, reg           \
	VMULPS.BCST  (4*(s))(SP), reg, reg \
	VFMADD231PS  (xoff)(R13), reg, acc

// func fgemvQ4_0(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvQ4_0(SB), NOSPLIT, $0-48
	LOAD_ARGS
	OFFSET(8)
row:
	ROW_START
block:
	NIB16(2)
	VPSUBD Z28, Z1, Z1
	VPSUBD Z28, Z2, Z2
	DSCALE(0)
	FMA2
	ADDQ $18, R12
	ADDQ $128, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// func fgemvIQ4_NL(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvIQ4_NL(SB), NOSPLIT, $0-48
	LOAD_ARGS
	VMOVDQU32 iq4nlValues<>(SB), X25
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, X24
row:
	ROW_START
block:
	VMOVDQU  2(R12), X1
	VPSRLW   $4, X1, X2
	VPANDD   X24, X1, X1
	VPANDD   X24, X2, X2
	VPSHUFB  X1, X25, X1
	VPSHUFB  X2, X25, X2
	VPMOVSXBD X1, Z1
	VPMOVSXBD X2, Z2
	DSCALE(0)
	FMA2
	ADDQ $18, R12
	ADDQ $128, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// func fgemvQ4_1(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvQ4_1(SB), NOSPLIT, $0-48
	LOAD_ARGS
row:
	ROW_START
block:
	NIB16(4)
	DSCALE(0)
	FMA2M(2)
	ADDQ $20, R12
	ADDQ $128, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// func fgemvQ5_0(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvQ5_0(SB), NOSPLIT, $0-48
	LOAD_ARGS
row:
	ROW_START
block:
	NIB16(6)
	HIBITS(2)
	VPSUBD Z26, Z1, Z1
	VPSUBD Z26, Z2, Z2
	DSCALE(0)
	FMA2
	ADDQ $22, R12
	ADDQ $128, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// func fgemvQ5_1(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvQ5_1(SB), NOSPLIT, $0-48
	LOAD_ARGS
row:
	ROW_START
block:
	NIB16(8)
	HIBITS(4)
	DSCALE(0)
	FMA2M(2)
	ADDQ $24, R12
	ADDQ $128, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// func fgemvQ8_0(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvQ8_0(SB), NOSPLIT, $0-48
	LOAD_ARGS
row:
	ROW_START
block:
	VPMOVSXBD 2(R12), Z1
	VPMOVSXBD 18(R12), Z2
	DSCALE(0)
	FMA2
	ADDQ $34, R12
	ADDQ $128, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// func fgemvQ4_K(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvQ4_K(SB), NOSPLIT, $64-48
	LOAD_ARGS
row:
	ROW_START
block:
	KSCALES(4)
	Q4K64(0, 16)
	KSUB(0, Z1, Z2, 0, Z30, Z29)
	KSUB(1, Z8, Z9, 128, Z22, Z21)
	Q4K64(1, 16)
	KSUB(2, Z1, Z2, 256, Z30, Z29)
	KSUB(3, Z8, Z9, 384, Z22, Z21)
	Q4K64(2, 16)
	KSUB(4, Z1, Z2, 512, Z30, Z29)
	KSUB(5, Z8, Z9, 640, Z22, Z21)
	Q4K64(3, 16)
	KSUB(6, Z1, Z2, 768, Z30, Z29)
	KSUB(7, Z8, Z9, 896, Z22, Z21)
	ADDQ $144, R12
	ADDQ $1024, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// func fgemvQ5_K(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvQ5_K(SB), NOSPLIT, $64-48
	LOAD_ARGS
row:
	ROW_START
block:
	KSCALES(4)
	VPMOVZXBD 16(R12), Z10
	VPMOVZXBD 32(R12), Z11
	Q5K64(0)
	KSUB(0, Z1, Z2, 0, Z30, Z29)
	KSUB(1, Z8, Z9, 128, Z22, Z21)
	Q5K64(1)
	KSUB(2, Z1, Z2, 256, Z30, Z29)
	KSUB(3, Z8, Z9, 384, Z22, Z21)
	Q5K64(2)
	KSUB(4, Z1, Z2, 512, Z30, Z29)
	KSUB(5, Z8, Z9, 640, Z22, Z21)
	Q5K64(3)
	KSUB(6, Z1, Z2, 768, Z30, Z29)
	KSUB(7, Z8, Z9, 896, Z22, Z21)
	ADDQ $176, R12
	ADDQ $1024, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// func fgemvQ6_K(y *float32, w *byte, stride, rows, nb int, x *float32)
TEXT ·fgemvQ6_K(SB), NOSPLIT, $64-48
	LOAD_ARGS
	MOVL $0x30, AX
	VPBROADCASTD AX, Z25
	MOVL $32, AX
	VPBROADCASTD AX, Z24
row:
	ROW_START
block:
	VPMOVSXBD    192(R12), Z4
	VCVTDQ2PS    Z4, Z4
	DSCALE(208)
	VMULPS       Z3, Z4, Z4
	VMOVUPS      Z4, 0(SP)
	Q6Q(0, 0)
	Q6Q(0, 1)
	Q6Q(1, 0)
	Q6Q(1, 1)
	ADDQ $210, R12
	ADDQ $1024, R13
	DECQ BX
	JNE  block
	ROW_END
	JNE  row
	VZEROUPPER
	RET

// IQ4_NL codebook as signed bytes.
DATA iq4nlValues<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4nlValues<>+8(SB)/8, $0x7159453526190d01
GLOBL iq4nlValues<>(SB), RODATA|NOPTR, $16
