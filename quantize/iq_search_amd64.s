//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// The neighbour search of the lattice i-quants (iqNearest in iq2_grid.go) on AVX-512.
//
// The term of element i at level l, t(i, l) = (w_i·d)·d with d = s_l − x_i, is computed for
// l = 0..3 (l = 3 is never used), four elements to a register, then copied to every 128-bit
// lane of one register per element (Z16..Z23).
// A candidate is an iqCand dword, grid index in the low half and its code (level of element i
// at bit 2i) in the high half; shifting the dword right by 16 + 2i leaves level i in the low two
// bits, and VPERMPS, which reads only the low four bits of an index, picks t(i, level) from the
// register of element i whatever the bits above (its four 128-bit lanes are equal). Sixteen
// candidates are summed at once, one per lane, as 0 + t(0,·) + t(1,·) + … + t(7,·) with
// separate VADDPS: the bits of the scalar loop. The scalar loop keeps the first candidate
// whose sum is below the best so far (FLT_MAX at the start; NaN never is): per chunk of
// sixteen that is the first lane holding the smallest of the lanes below the best.

// quad: 0,0,0,0, 1,1,1,1, 2,2,2,2, 3,3,3,3: VPERMPS spreads four values over the four 128-bit
// lanes, one value to a lane.
DATA quad<>+0(SB)/8, $0
DATA quad<>+8(SB)/8, $0
DATA quad<>+16(SB)/8, $0x0000000100000001
DATA quad<>+24(SB)/8, $0x0000000100000001
DATA quad<>+32(SB)/8, $0x0000000200000002
DATA quad<>+40(SB)/8, $0x0000000200000002
DATA quad<>+48(SB)/8, $0x0000000300000003
DATA quad<>+56(SB)/8, $0x0000000300000003
GLOBL quad<>(SB), RODATA|NOPTR, $64

// TERMS4(off, T): the terms of elements off/4 .. off/4+3 in T, element off/4 + j in 128-bit
// lane j, level l in its lane l: T = (w·(s − x))·(s − x) with s in every lane (Z0), x and w
// spread by VPERMPS (indexes in Z7); x at BX, w at DX.
#define TERMS4(off, T) \
	VMOVUPS off(BX), X1  \
	VPERMPS Z1, Z7, Z1   \
	VMOVUPS off(DX), X2  \
	VPERMPS Z2, Z7, Z2   \
	VSUBPS  Z1, Z0, Z1   \
	VMULPS  Z1, Z2, Z2   \
	VMULPS  Z1, Z2, T

// ADDTERM(sh, T): Z3 += T[level of the element at bit sh of the candidates in Z4].
#define ADDTERM(sh, T) \
	VPSRLD  $sh, Z4, Z5 \
	VPERMPS T, Z5, Z5   \
	VADDPS  Z5, Z3, Z3

// func iqNearestAVX512(s *[4]float32, x, w *float32, nb *iqCand, n int) int
TEXT ·iqNearestAVX512(SB), NOSPLIT, $0-48
	MOVQ s+0(FP), AX
	MOVQ x+8(FP), BX
	MOVQ w+16(FP), DX
	MOVQ nb+24(FP), SI
	MOVQ n+32(FP), CX

	VBROADCASTF32X4 (AX), Z0
	VMOVDQU32       quad<>(SB), Z7
	TERMS4(0, Z8)                      // elements 0..3
	TERMS4(16, Z9)                     // elements 4..7
	VSHUFF32X4 $0x00, Z8, Z8, Z16      // element i's terms in every 128-bit lane
	VSHUFF32X4 $0x55, Z8, Z8, Z17
	VSHUFF32X4 $0xaa, Z8, Z8, Z18
	VSHUFF32X4 $0xff, Z8, Z8, Z19
	VSHUFF32X4 $0x00, Z9, Z9, Z20
	VSHUFF32X4 $0x55, Z9, Z9, Z21
	VSHUFF32X4 $0xaa, Z9, Z9, Z22
	VSHUFF32X4 $0xff, Z9, Z9, Z23

	MOVL         $0x7f7fffff, AX
	VPBROADCASTD AX, Z2                // best so far: FLT_MAX
	MOVL         $0x7f800000, AX
	VPBROADCASTD AX, Z24               // +Inf
	VPXORD       Z25, Z25, Z25         // 0
	MOVQ         $-1, R8               // index of the best
	XORQ         R9, R9                // index of the chunk's first candidate

loop:
	MOVQ  $0xffff, R10
	CMPQ  CX, $16
	JGE   full
	MOVQ  $1, R10
	SHLQ  CX, R10
	DECQ  R10                          // (1 << n) − 1 for the last chunk
full:
	KMOVW R10, K1
	VMOVDQU32.Z (SI), K1, Z4

	VPSRLD  $16, Z4, Z5
	VPERMPS Z16, Z5, Z5
	VADDPS  Z5, Z25, Z3                // 0 + t(0, ·)
	ADDTERM(18, Z17)
	ADDTERM(20, Z18)
	ADDTERM(22, Z19)
	ADDTERM(24, Z20)
	ADDTERM(26, Z21)
	ADDTERM(28, Z22)
	ADDTERM(30, Z23)

	VCMPPS   $0x11, Z2, Z3, K1, K2     // d < best (ordered: false for NaN), in range
	KORTESTW K2, K2
	JZ       next
	VBLENDMPS  Z3, Z24, K2, Z5         // those d, +Inf elsewhere
	VSHUFF32X4 $0x4e, Z5, Z5, Z6
	VMINPS     Z6, Z5, Z5
	VSHUFF32X4 $0xb1, Z5, Z5, Z6
	VMINPS     Z6, Z5, Z5
	VPERMILPS  $0x4e, Z5, Z6
	VMINPS     Z6, Z5, Z5
	VPERMILPS  $0xb1, Z5, Z6
	VMINPS     Z6, Z5, Z5              // their minimum in every lane
	VCMPPS     $0, Z5, Z3, K2, K3      // lanes equal to it
	KMOVW      K3, AX
	BSFL       AX, AX                  // the first
	LEAQ       (R9)(AX*1), R8
	VMOVAPS    Z5, Z2

next:
	ADDQ $64, SI
	ADDQ $16, R9
	SUBQ $16, CX
	JGT  loop

	VZEROUPPER
	MOVQ R8, ret+40(FP)
	RET

// iq1pm: x_p[1], x_m[1] (IQ1S_DELTA, −IQ1S_DELTA), broadcast as a pair to every lane pair.
DATA iq1pm<>+0(SB)/4, $0x3e000000
DATA iq1pm<>+4(SB)/4, $0xbe000000
GLOBL iq1pm<>(SB), RODATA|NOPTR, $8

// func iq1SSplitAVX512(sp *iq1SSplit, maxv float32)
//
// Registers: DI sp, R8 i1, R9 2·i1, R10 the chunk's first entry (2·i2 of lane 0), X0 scale,
// X1 best score (and Z20 broadcast), R11 R12 R13 best i1, i2, shift, Z21 (p, m) pairs,
// Z22 Z23 sx, sw of i1, Z24 Z25 the (ax, aw) pairs of i1, Z26 zero.
// Per chunk: Z2 Σw·x·q, Z3 Σw·q², Z4 (Σw·x·q)², K2 lanes in range with Σw·q² > 0, K3 those
// passing (Σw·x·q)² > best·Σw·q².
TEXT ·iq1SSplitAVX512(SB), NOSPLIT, $0-12
	MOVQ         sp+0(FP), DI
	MOVSS        maxv+8(FP), X0
	MOVL         $0xff7fffff, AX       // −FLT_MAX
	MOVL         AX, X1
	VPBROADCASTD AX, Z20
	MOVQ         $-1, R11
	MOVQ         $-1, R12
	XORQ         R13, R13
	VBROADCASTSD iq1pm<>(SB), Z21
	VPXORD       Z26, Z26, Z26
	XORQ         R8, R8

splitI1:
	LEAQ         (R8)(R8*1), R9
	VBROADCASTSS iq1SSplit_sx(DI)(R9*4), Z22
	VBROADCASTSS iq1SSplit_sw(DI)(R9*4), Z23
	VBROADCASTSD iq1SSplit_ax(DI)(R9*4), Z24
	VBROADCASTSD iq1SSplit_aw(DI)(R9*4), Z25
	MOVQ         R9, R10

splitChunk:
	MOVQ  $66, CX
	SUBQ  R10, CX                      // entries left
	MOVQ  $0xffff, AX
	CMPQ  CX, $16
	JGE   splitFull
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
splitFull:
	KMOVW AX, K1

	VMOVUPS iq1SSplit_sx(DI)(R10*4), Z2
	VSUBPS  Z22, Z2, Z2                // dx = sx[i2] − sx[i1]
	VMULPS  Z21, Z2, Z2                // dx·q1
	VADDPS  Z2, Z24, Z2                // ax + dx·q1
	VADDPS  iq1SSplit_cx(DI)(R10*4), Z2, Z2
	VMOVUPS iq1SSplit_sw(DI)(R10*4), Z3
	VSUBPS  Z23, Z3, Z3                // dw = sw[i2] − sw[i1]
	VMULPS  Z21, Z3, Z3
	VMULPS  Z21, Z3, Z3                // (dw·q1)·q1
	VADDPS  Z3, Z25, Z3
	VADDPS  iq1SSplit_cw(DI)(R10*4), Z3, Z3
	VMULPS  Z2, Z2, Z4
	VCMPPS  $0x1e, Z26, Z3, K1, K2     // Σw·q² > 0
	VMULPS  Z3, Z20, Z6
	VCMPPS  $0x1e, Z6, Z4, K2, K3      // (Σw·x·q)² > best·Σw·q²
	KORTESTW K3, K3
	JZ      splitNext
	VMOVUPS Z2, iq1SSplit_tx(DI)
	VMOVUPS Z3, iq1SSplit_tq(DI)

splitUpdate:
	KMOVW   K3, AX
	BSFL    AX, CX                     // the first passing lane
	MOVSS   iq1SSplit_tx(DI)(CX*4), X7
	MOVSS   iq1SSplit_tq(DI)(CX*4), X8
	MOVSS   X7, X0
	DIVSS   X8, X0                     // scale = Σw·x·q / Σw·q²
	MOVSS   X0, X1
	MULSS   X7, X1                     // best = scale·Σw·x·q
	VBROADCASTSS X1, Z20
	MOVQ    R8, R11
	LEAQ    (R10)(CX*1), R12
	SHRQ    $1, R12
	MOVQ    $1, R13
	BTL     $0, CX
	JCC     splitShift
	MOVQ    $-1, R13
splitShift:
	VMULPS  Z3, Z20, Z6
	VCMPPS  $0x1e, Z6, Z4, K2, K3      // the test again with the new best
	MOVL    $-2, AX
	SHLL    CX, AX
	KMOVW   AX, K4
	KANDW   K4, K3, K3                 // for the lanes after this one
	KORTESTW K3, K3
	JNZ     splitUpdate

splitNext:
	ADDQ $16, R10
	CMPQ R10, $66
	JLT  splitChunk
	INCQ R8
	CMPQ R8, $33
	JLT  splitI1

	VZEROUPPER
	MOVSS X0, iq1SSplit_scale(DI)
	MOVQ  R11, iq1SSplit_i1(DI)
	MOVQ  R12, iq1SSplit_i2(DI)
	MOVQ  R13, iq1SSplit_shift(DI)
	RET
