//go:build amd64 && !purego

#include "textflag.h"

// K-quant × Q8_K GEMV kernels (AVX-512 BW + VNNI) over pack.go's layouts: a group is one
// 256-element super-block whose 16 lanes are its 16-element sub-blocks. Arguments and
// registers as in gemv_q8_amd64.s; ad holds one float per super-block and asum the Q8_K sums
// of 16 values (bsums).

#define HSUM_STORE \
	VEXTRACTF64X4 $1, Z30, Y1 \
	VADDPS        Y1, Y30, Y1 \
	VEXTRACTF128  $1, Y1, X2  \
	VADDPS        X2, X1, X1  \
	VMOVHLPS      X1, X1, X2  \
	VADDPS        X2, X1, X1  \
	VMOVSHDUP     X1, X2      \
	VADDSS        X2, X1, X1  \
	VMOVSS        X1, (DI)

#define LOAD_ARGS \
	MOVQ y+0(FP), DI         \
	MOVQ w+8(FP), SI         \
	MOVQ stride+16(FP), DX   \
	MOVQ rows+24(FP), CX     \
	MOVQ groups+32(FP), R8   \
	MOVQ act+40(FP), R9      \
	MOVQ ad+48(FP), R10      \
	MOVQ asum+56(FP), R11    \
	MOVL $0x0f0f0f0f, AX     \
	VPBROADCASTD AX, Z31     \
	MOVL $0x10101010, AX     \
	VPBROADCASTD AX, Z28     \
	MOVL $0x30303030, AX     \
	VPBROADCASTD AX, Z25     \
	VMOVDQU32 kperm<>+0(SB), Z27 \
	VMOVDQU32 kperm<>+64(SB), Z26

#define ROW_START \
	MOVQ SI, R12         \
	MOVQ R9, R13         \
	MOVQ R10, R14        \
	MOVQ R11, R15        \
	MOVQ R8, BX          \
	VPXORD Z30, Z30, Z30 \
	VPXORD Z29, Z29, Z29

#define ROW_END \
	VSUBPS Z29, Z30, Z30 \
	HSUM_STORE           \
	ADDQ $4, DI          \
	ADDQ DX, SI          \
	DECQ CX

#define NIB(c) \
	VMOVDQU64 ((c)*64)(R12), Z1 \
	VPSRLW    $4, Z1, Z2      \
	VPANDD    Z31, Z1, Z1     \
	VPANDD    Z31, Z2, Z2

#define HI5(s, off, reg) \
	KMOVQ (off+8*(s))(R12), K1 \
	VPADDB Z28, reg, K1, reg

#define DOT2(c) \
	VPDPBUSD (2*(c)*64)(R13), Z1, Z0 \
	VPDPBUSD ((2*(c)+1)*64)(R13), Z2, Z5

// KFINISH(soff, doff): Z0+Z5 hold the 16 sub-block sums of codes·a. Scales sc[8], mins m[8]
// (u8) at soff, d and dmin (fp16) at doff. Adds d·d_a·Σ sc·sum to Z30 and
// dmin·d_a·Σ m·bsum to Z29 (subtracted at the end of the row).
#define KFINISH(soff, doff) \
	VPADDD       Z5, Z0, Z0      \
	VPMOVZXBD    soff(R12), Z3   \
	VPERMD       Z3, Z27, Z4     \
	VPERMD       Z3, Z26, Z6     \
	VPMULLD      Z4, Z0, Z0      \
	VPMULLD      (R15), Z6, Z6   \
	VCVTDQ2PS    Z0, Z0          \
	VCVTDQ2PS    Z6, Z6          \
	VPBROADCASTD doff(R12), X7   \
	VCVTPH2PS    X7, X7          \
	VBROADCASTSS (R14), X8       \
	VMULPS       X8, X7, X7      \
	VBROADCASTSS X7, Z8          \
	VSHUFPS      $0x55, X7, X7, X9 \
	VBROADCASTSS X9, Z9          \
	VFMADD231PS  Z8, Z0, Z30     \
	VFMADD231PS  Z9, Z6, Z29

#define NEXTK(gbytes) \
	ADDQ $gbytes, R12 \
	ADDQ $256, R13    \
	ADDQ $4, R14      \
	ADDQ $64, R15     \
	DECQ BX

// func gemvQ4_K(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)
TEXT ·gemvQ4_K(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	NIB(0)
	DOT2(0)
	NIB(1)
	DOT2(1)
	KFINISH(128, 144)
	NEXTK(148)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// func gemvQ5_K(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)
TEXT ·gemvQ5_K(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	NIB(0)
	HI5(0, 128, Z1)
	HI5(1, 128, Z2)
	DOT2(0)
	NIB(1)
	HI5(2, 128, Z1)
	HI5(3, 128, Z2)
	DOT2(1)
	KFINISH(160, 176)
	NEXTK(180)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// HI6(reg): reg |= Z8 & 0x30 (the two high bits, already shifted into bits 4-5 of Z8).
#define HI6(reg) VPTERNLOGD $0xf8, Z25, Z8, reg

// func gemvQ6_K(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)
TEXT ·gemvQ6_K(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	VMOVDQU64 128(R12), Z7
	NIB(0)
	VPSLLW $4, Z7, Z8
	HI6(Z1)
	VPSLLW $2, Z7, Z8
	HI6(Z2)
	DOT2(0)
	NIB(1)
	VMOVDQA64 Z7, Z8
	HI6(Z1)
	VPSRLW $2, Z7, Z8
	HI6(Z2)
	DOT2(1)
	VPADDD       Z5, Z0, Z0
	VMOVDQU32    (R15), Z3
	VPSLLD       $5, Z3, Z3
	VPSUBD       Z3, Z0, Z0
	VPMOVSXBD    192(R12), Z4
	VPMULLD      Z4, Z0, Z0
	VCVTDQ2PS    Z0, Z0
	VPBROADCASTW 208(R12), X7
	VCVTPH2PS    X7, X7
	VMULSS       (R14), X7, X7
	VBROADCASTSS X7, Z8
	VFMADD231PS  Z8, Z0, Z30
	NEXTK(210)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// Lane → sub-block scale index (two 16-lanes per 32-element sub-block): sc then m.
DATA kperm<>+0(SB)/8, $0x0000000000000000
DATA kperm<>+8(SB)/8, $0x0000000100000001
DATA kperm<>+16(SB)/8, $0x0000000200000002
DATA kperm<>+24(SB)/8, $0x0000000300000003
DATA kperm<>+32(SB)/8, $0x0000000400000004
DATA kperm<>+40(SB)/8, $0x0000000500000005
DATA kperm<>+48(SB)/8, $0x0000000600000006
DATA kperm<>+56(SB)/8, $0x0000000700000007
DATA kperm<>+64(SB)/8, $0x0000000800000008
DATA kperm<>+72(SB)/8, $0x0000000900000009
DATA kperm<>+80(SB)/8, $0x0000000a0000000a
DATA kperm<>+88(SB)/8, $0x0000000b0000000b
DATA kperm<>+96(SB)/8, $0x0000000c0000000c
DATA kperm<>+104(SB)/8, $0x0000000d0000000d
DATA kperm<>+112(SB)/8, $0x0000000e0000000e
DATA kperm<>+120(SB)/8, $0x0000000f0000000f
GLOBL kperm<>(SB), RODATA|NOPTR, $128
