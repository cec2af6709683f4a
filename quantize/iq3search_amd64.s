//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// AVX-512 kernel of the IQ3_XXS / IQ3_S trial search (see iq3search_amd64.go): lane t is one
// trial of iq3Lattice.trials' Go loop. Every lane performs that loop's float32 operations in
// the same order; products and sums are separate VMULPS / VADDPS (no FMA). nearest_int is
// ggml's magic-number rounding: (bits(v + 12582912) & 0x7fffff) − 0x400000, on integers.

// IQ3_LEVEL computes the levels of element i of the group at R9 in the 16 trials:
// clamp(nearest_int(0.5·(id·x − 1)), 0, 7).
#define IQ3_LEVEL(i, v) \
	VMULPS.BCST (4*i)(R9), Z24, v \
	VSUBPS      Z25, v, v         \
	VMULPS      Z26, v, v         \
	VADDPS      Z31, v, v         \
	VPANDD      Z30, v, v         \
	VPSUBD      Z29, v, v         \
	VPMAXSD     Z28, v, v         \
	VPMINSD     Z27, v, v

// iq3Q: q = 2l + 1 as float32 for l = 0..7, twice: VPERMPS reads only the low 4 bits of an
// index, so a level field that still has the next field's bits above it selects its q.
DATA iq3Q<>+0(SB)/8, $0x404000003f800000  // 1, 3
DATA iq3Q<>+8(SB)/8, $0x40e0000040a00000  // 5, 7
DATA iq3Q<>+16(SB)/8, $0x4130000041100000 // 9, 11
DATA iq3Q<>+24(SB)/8, $0x4170000041500000 // 13, 15
DATA iq3Q<>+32(SB)/8, $0x404000003f800000
DATA iq3Q<>+40(SB)/8, $0x40e0000040a00000
DATA iq3Q<>+48(SB)/8, $0x4130000041100000
DATA iq3Q<>+56(SB)/8, $0x4170000041500000
GLOBL iq3Q<>(SB), RODATA|NOPTR, $64

// IQ3_TERM computes waux_i·(s·q − x_i)·(s·q − x_i) for the level in the low 3 bits of the
// int32 lanes of l (clobbered) for element i of the group: q = 2l + 1 (Z18), s = tscale.
#define IQ3_TERM(i, l, t) \
	VPERMPS     Z18, l, l         \
	VMULPS      Z23, l, l         \
	VSUBPS.BCST (4*i)(R9), l, l   \
	VMULPS.BCST (4*i)(R10), l, t  \
	VMULPS      l, t, t

// func iq3KernelAVX512(b *iq3Block)
//
// Registers: Z0..Z3 the levels of the group's 4 elements, Z4 u, Z5 kmap[u], Z6 the offset of
// u's neighbour list, Z7 its length, Z8 the least error so far, Z9 its neighbour, Z10 j,
// Z11 neighbour j, Z12..Z16 scratch; constants Z18 q by level (iq3Q), Z19 all ones, Z20 63, Z21 FLT_MAX,
// Z22 1 (int), Z23 tscale, Z24 id, Z25 1.0, Z26 0.5, Z27 7, Z28 0, Z29 0x400000,
// Z30 0x7fffff, Z31 12582912.0. K3 lanes off the grid, K4 lanes still in their list.
// DI b, SI kmap, R8 nb, R9 &xval[4k], R10 &waux[4k], R11 &levels[4k], CX k.
TEXT ·iq3KernelAVX512(SB), NOSPLIT, $0-8
	MOVQ b+0(FP), DI
	MOVQ iq3Block_kmap(DI), SI
	MOVQ iq3Block_nb(DI), R8

	MOVL         $0x4B400000, AX // 12582912.0
	VPBROADCASTD AX, Z31
	MOVL         $0x007fffff, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x00400000, AX
	VPBROADCASTD AX, Z29
	VPXORD       Z28, Z28, Z28
	MOVL         $7, AX
	VPBROADCASTD AX, Z27
	MOVL         $0x3f000000, AX // 0.5
	VPBROADCASTD AX, Z26
	MOVL         $0x3f800000, AX // 1.0
	VPBROADCASTD AX, Z25
	VMOVUPS      iq3Block_id(DI), Z24
	VMOVUPS      iq3Block_tscale(DI), Z23
	MOVL         $1, AX
	VPBROADCASTD AX, Z22
	MOVL         $0x7f7fffff, AX // FLT_MAX
	VPBROADCASTD AX, Z21
	MOVL         $63, AX
	VPBROADCASTD AX, Z20
	VPTERNLOGD   $0xff, Z19, Z19, Z19
	VMOVUPS      iq3Q<>(SB), Z18

	LEAQ iq3Block_xval(DI), R9
	LEAQ iq3Block_waux(DI), R10
	LEAQ iq3Block_levels(DI), R11
	XORQ CX, CX

group:
	IQ3_LEVEL(0, Z0)
	IQ3_LEVEL(1, Z1)
	IQ3_LEVEL(2, Z2)
	IQ3_LEVEL(3, Z3)
	VPSLLD     $3, Z1, Z4
	VPORD      Z0, Z4, Z4
	VPSLLD     $6, Z2, Z5
	VPORD      Z5, Z4, Z4
	VPSLLD     $9, Z3, Z5
	VPORD      Z5, Z4, Z4      // u
	KXNORW     K1, K1, K1
	VPXORD     Z5, Z5, Z5
	VPGATHERDD (SI)(Z4*4), K1, Z5
	VPCMPD     $5, Z28, Z5, K2 // kmap[u] >= 0: on the grid
	KMOVW      K2, AX
	MOVW       AX, iq3Block_onMask(DI)(CX*2)
	KNOTW      K2, K3
	KORTESTW   K3, K3
	JZ         store

	// Neighbour search in the lanes off the grid.
	VPXORD     Z19, Z5, Z6     // nbOff<<6 | count
	VPANDD     Z20, Z6, Z7     // count
	VPSRLD     $6, Z6, Z6      // nbOff
	KMOVW      K3, K1
	VPXORD     Z9, Z9, Z9
	VPGATHERDD (R8)(Z6*4), K1, Z9 // the first neighbour unless one is below FLT_MAX
	VMOVAPS    Z21, Z8
	VPXORD     Z10, Z10, Z10

nbloop:
	VPCMPD     $1, Z7, Z10, K4 // j < count
	KANDW      K3, K4, K4
	KORTESTW   K4, K4
	JZ         nbdone
	VPADDD     Z10, Z6, Z12
	KMOVW      K4, K1
	VPXORD     Z11, Z11, Z11
	VPGATHERDD (R8)(Z12*4), K1, Z11
	VMOVDQA32  Z11, Z12
	IQ3_TERM(0, Z12, Z16)
	VPSRLD     $3, Z11, Z12
	IQ3_TERM(1, Z12, Z13)
	VADDPS     Z13, Z16, Z16
	VPSRLD     $6, Z11, Z12
	IQ3_TERM(2, Z12, Z13)
	VADDPS     Z13, Z16, Z16
	VPSRLD     $9, Z11, Z12
	IQ3_TERM(3, Z12, Z13)
	VADDPS     Z13, Z16, Z16
	VCMPPS     $0x11, Z8, Z16, K5 // error < least (false for NaN)
	KANDW      K4, K5, K5
	VMOVAPS    Z16, K5, Z8
	VMOVDQA32  Z11, K5, Z9
	VPADDD     Z22, Z10, Z10
	JMP        nbloop

nbdone:
	VPANDD    Z27, Z9, Z12
	VMOVDQA32 Z12, K3, Z0
	VPSRLD    $3, Z9, Z12
	VPANDD    Z27, Z12, Z12
	VMOVDQA32 Z12, K3, Z1
	VPSRLD    $6, Z9, Z12
	VPANDD    Z27, Z12, Z12
	VMOVDQA32 Z12, K3, Z2
	VPSRLD    $9, Z9, Z12
	VPANDD    Z27, Z12, Z12
	VMOVDQA32 Z12, K3, Z3

store:
	VMOVDQU32 Z0, (R11)
	VMOVDQU32 Z1, 64(R11)
	VMOVDQU32 Z2, 128(R11)
	VMOVDQU32 Z3, 192(R11)
	ADDQ      $16, R9
	ADDQ      $16, R10
	ADDQ      $256, R11
	INCQ      CX
	CMPQ      CX, $8
	JLT       group

	// Σ wx·q and Σ (weight·q)·q over the 32 elements, in element order.
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	LEAQ   iq3Block_wx(DI), R9
	LEAQ   iq3Block_weight(DI), R10
	LEAQ   iq3Block_levels(DI), R11
	MOVQ   $32, CX

sums:
	VMOVDQU32   (R11), Z2
	VPERMPS     Z18, Z2, Z2
	VMULPS.BCST (R9), Z2, Z3
	VADDPS      Z3, Z0, Z0
	VMULPS.BCST (R10), Z2, Z4
	VMULPS      Z2, Z4, Z4
	VADDPS      Z4, Z1, Z1
	ADDQ        $4, R9
	ADDQ        $4, R10
	ADDQ        $64, R11
	DECQ        CX
	JNZ         sums

	VMOVUPS Z0, iq3Block_sumqx(DI)
	VMOVUPS Z1, iq3Block_sumq2(DI)
	VZEROUPPER
	RET
