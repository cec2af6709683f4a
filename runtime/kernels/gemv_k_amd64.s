//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"
#include "gemv_prefetch_amd64.h"

// K-quant × Q8_K GEMV kernels (AVX-512 BW + VNNI) over pack.go's layouts: a group is one
// 256-element super-block whose 16 lanes are its 16-element sub-blocks. Arguments and
// registers as in gemv_q8_amd64.s; each record holds the Q8_K sums of 16 values (bsums) as
// int32, then the super-block's scale d at byte 64.


#define LOAD_ARGS \
	MOVQ y+0(FP), DI         \
	MOVQ w+8(FP), SI         \
	MOVQ stride+16(FP), DX   \
	MOVQ rows+24(FP), CX     \
	MOVQ groups+32(FP), R8   \
	MOVQ act+40(FP), R9      \
	MOVQ meta+48(FP), R10    \
	MOVQ ntok+56(FP), R11    \
	MOVQ R11, R15            \
	SHLQ $8, R11            \
	SHLQ $7, R15             \
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

// KSCALES(soff, doff) computes, at the start of a group (so that its latency hides behind
// the dot products), the exact per-lane factors Z4 = sc·d and Z6 = m·dmin from the scales
// sc[8], mins m[8] (u8) at soff and d, dmin (fp16) at doff.
#define KSCALES(soff, doff) \
	VPMOVZXBD    soff(R12), Z3     \
	VPERMD       Z3, Z27, Z4       \
	VPERMD       Z3, Z26, Z6       \
	VCVTDQ2PS    Z4, Z4            \
	VCVTDQ2PS    Z6, Z6            \
	VPBROADCASTD doff(R12), X7     \
	VCVTPH2PS    X7, X7            \
	VSHUFPS      $0x55, X7, X7, X9 \
	VBROADCASTSS X7, Z8            \
	VBROADCASTSS X9, Z9            \
	VMULPS       Z8, Z4, Z4        \
	VMULPS       Z9, Z6, Z6

// KFINISH: Z0+Z5 hold the 16 sub-block sums of codes·a; adds
// float(sum)·(Z4·d_a) − float(bsum)·(Z6·d_a) to Z30, lane by lane. The multi-token kernels
// (gemm_k_amd64.s) do exactly the same operations.
#define KFINISH \
	VPADDD       Z5, Z0, Z0        \
	VCVTDQ2PS    Z0, Z0            \
	VMULPS.BCST  64(R14), Z4, Z4   \
	VFMADD231PS  Z4, Z0, Z30       \
	VCVTDQ2PS    (R14), Z10        \
	VMULPS.BCST  64(R14), Z6, Z6   \
	VFNMADD231PS Z6, Z10, Z30

#define NEXTK(gbytes) \
	ADDQ $gbytes, R12 \
	ADDQ R11, R13     \
	ADDQ R15, R14     \
	DECQ BX

// func gemvQ4_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ4_K(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	KSCALES(128, 144)
	PREFETCH_LINES_3
	NIB(0)
	DOT2(0)
	NIB(1)
	DOT2(1)
	KFINISH
	NEXTK(148)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// func gemvQ5_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ5_K(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	KSCALES(160, 176)
	PREFETCH_LINES_3
	NIB(0)
	HI5(0, 128, Z1)
	HI5(1, 128, Z2)
	DOT2(0)
	NIB(1)
	HI5(2, 128, Z1)
	HI5(3, 128, Z2)
	DOT2(1)
	KFINISH
	NEXTK(180)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// ISCALE16(soff, doff): Z4 = the 16 per-lane int8 scales at soff (sign-extended), Z11 = d
// (fp16 at doff) · d_a (Q6_K, Q3_K, IQ4_XS).
#define ISCALE16(soff, doff) \
	VPMOVSXBD    soff(R12), Z4      \
	VPBROADCASTW doff(R12), X11     \
	VCVTPH2PS    X11, X11           \
	VMULSS       64(R14), X11, X11  \
	VBROADCASTSS X11, Z11

// IFINISH(shift): Z0+Z5 hold Σ code·a per lane; subtracts the code offset (Σa)<<shift, scales
// by the lane's integer scale, and accumulates float(·)·d·d_a into Z30.
#define IFINISH(shift) \
	VPADDD      Z5, Z0, Z0      \
	VMOVDQU32   (R14), Z3       \
	VPSLLD      $shift, Z3, Z3  \
	VPSUBD      Z3, Z0, Z0      \
	VPMULLD     Z4, Z0, Z0      \
	VCVTDQ2PS   Z0, Z0          \
	VFMADD231PS Z11, Z0, Z30

// HI6(reg): reg |= Z8 & 0x30 (the two high bits, already shifted into bits 4-5 of Z8).
#define HI6(reg) VPTERNLOGD $0xf8, Z25, Z8, reg

// func gemvQ6_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ6_K(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	ISCALE16(192, 208)
	VMOVDQU64 128(R12), Z7
	PREFETCH_LINES_4
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
	IFINISH(5)
	NEXTK(210)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// KSCALES16(soff, doff): as KSCALES, for Q2_K's per-lane scales sc[16] and mins m[16] (u8)
// at soff, soff+16 and d, dmin (fp16) at doff: Z4 = sc·d, Z6 = m·dmin.
#define KSCALES16(soff, doff) \
	VPMOVZXBD    soff(R12), Z4      \
	VPMOVZXBD    (soff+16)(R12), Z6 \
	VCVTDQ2PS    Z4, Z4             \
	VCVTDQ2PS    Z6, Z6             \
	VPBROADCASTD doff(R12), X7      \
	VCVTPH2PS    X7, X7             \
	VSHUFPS      $0x55, X7, X7, X9  \
	VBROADCASTSS X7, Z8             \
	VBROADCASTSS X9, Z9             \
	VMULPS       Z8, Z4, Z4         \
	VMULPS       Z9, Z6, Z6

// func gemvQ2_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ2_K(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	KSCALES16(128, 160)
	PREFETCH_LINES_3
	NIB(0)
	DOT2(0)
	NIB(1)
	DOT2(1)
	KFINISH
	NEXTK(164)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// GEMVI_BODY(HOOK, shift): Q3_K and IQ4_XS (16 int8 lane scales at 128, d at 144, groups
// of 146 bytes); HOOK(reg) maps the nibble codes of Z1, Z2 (nothing, or the codebook).
#define GEMVI_BODY(HOOK, shift) \
row:                  \
	ROW_START          \
group:                \
	VPXORD Z0, Z0, Z0  \
	VPXORD Z5, Z5, Z5  \
	ISCALE16(128, 144) \
	PREFETCH_LINES_3   \
	NIB(0)             \
	HOOK(Z1)           \
	HOOK(Z2)           \
	DOT2(0)            \
	NIB(1)             \
	HOOK(Z1)           \
	HOOK(Z2)           \
	DOT2(1)            \
	IFINISH(shift)     \
	NEXTK(146)         \
	JNE group          \
	ROW_END            \
	JNE row            \
	VZEROUPPER         \
	RET

#define NOMAP(reg)

// IQ4X(reg) maps codes 0..15 to IQ4_NL's values + 128 (table in Z24).
#define IQ4X(reg) VPSHUFB reg, Z24, reg

// func gemvQ3_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ3_K(SB), NOSPLIT, $0-64
	LOAD_ARGS
	GEMVI_BODY(NOMAP, 2)

// func gemvIQ4_XS(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvIQ4_XS(SB), NOSPLIT, $0-64
	LOAD_ARGS
	VBROADCASTI32X4 ·iq4nlPlus128(SB), Z24
	GEMVI_BODY(IQ4X, 7)

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
