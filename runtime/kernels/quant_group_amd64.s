//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

// Activation quantizers of the group matrices (group_acts.go), the same operations as
// groupQuantA16 and groupQuantA8, 16 values at a time: amax as the largest absolute value's
// bits (VPMAXUD on the sign-cleared bits orders finite floats as floats and puts infinities and
// NaNs, 0x7f800000 and above, on top: the non-finite test); d = amax/qmax by VDIVSS; codes
// VDIVPS (x/d, correctly rounded as Go's float32 division) then VCVTPS2DQ, which rounds to
// nearest even under Go's MXCSR (|x/d| < 1.5·qmax: no overflow), clamped to ±qmax.

// The amax loops: Z0 = max over the CX floats at R12 (both clobbered) of their sign-cleared
// bits (Z30 the 0x7fffffff mask), as 16 lanes.

// MAXBITS reduces the 16 dwords of Z0 to their unsigned maximum in AX (clobbers Z0 and Z1).
#define MAXBITS \
	BFLY(VPMAXUD, Z0, Z1) \
	VMOVD X0, AX

// SUMD reduces the 16 dwords of Z5 to their sum in AX (clobbers Z5 and Z1).
#define SUMD \
	BFLY(VPADDD, Z5, Z1) \
	VMOVD X5, AX

// func groupQuant16Asm(x *float32, q *int16, d *float32, s *int32, unit, blocks int, perm *[16]uint16)
//
// Per block of unit values: d = float32(amax/32767) (NaN when amax is not finite), codes
// clamp(RoundToEven(x/d), ±32767) (zeros when d is 0 or NaN) written in the order of perm
// within each 16 (unit is a multiple of 4; perm permutes within 4 or 8), Σ codes to s (s
// may be nil).
TEXT ·groupQuant16Asm(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), R8
	MOVQ s+24(FP), R9
	MOVQ unit+32(FP), R10
	MOVQ blocks+40(FP), R11
	MOVQ perm+48(FP), AX
	VMOVDQU16 (AX), Y31
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z30
	MOVL $32767, AX
	VPBROADCASTD AX, Z29
	MOVL $-32767, AX
	VPBROADCASTD AX, Z28
	MOVL $0x46fffe00, AX // 32767.0
	VMOVD AX, X27

q16block:
	MOVQ SI, R12
	MOVQ R10, CX
	VPXORD Z0, Z0, Z0
q16amax:
	CMPQ   CX, $16
	JL     q16amaxtail
	VPANDD (R12), Z30, Z1
	VPMAXUD Z1, Z0, Z0
	ADDQ   $64, R12
	SUBQ   $16, CX
	JMP    q16amax
q16amaxtail:
	TESTQ  CX, CX
	JEQ    q16amaxdone
	LOWMASK(R13, KMOVW, K2)
	VMOVDQU32.Z (R12), K2, Z1
	VPANDD Z30, Z1, Z1
	VPMAXUD Z1, Z0, Z0
q16amaxdone:
	MAXBITS
	VPXORD Z5, Z5, Z5
	CMPL AX, $0x7f800000
	JAE  q16nan
	VMOVD  AX, X3
	VDIVSS X27, X3, X3 // d = amax / 32767
	VMOVSS X3, (R8)
	VMOVD  X3, AX
	TESTL  AX, AX
	JEQ    q16zero
	VBROADCASTSS X3, Z3
	MOVQ SI, R12
	MOVQ DI, BX
	MOVQ R10, CX
q16conv:
	CMPQ CX, $16
	JL   q16convtail
	VMOVUPS   (R12), Z4
	VDIVPS    Z3, Z4, Z4
	VCVTPS2DQ Z4, Z4
	VPMINSD   Z29, Z4, Z4
	VPMAXSD   Z28, Z4, Z4
	VPADDD    Z4, Z5, Z5
	VPMOVSDW  Z4, Y4
	VPERMW    Y4, Y31, Y4
	VMOVDQU16 Y4, (BX)
	ADDQ $64, R12
	ADDQ $32, BX
	SUBQ $16, CX
	JMP  q16conv
q16convtail:
	TESTQ CX, CX
	JEQ   q16sum
	LOWMASK(R13, KMOVW, K2)
	VMOVUPS.Z (R12), K2, Z4
	VDIVPS    Z3, Z4, Z4
	VCVTPS2DQ Z4, Z4
	VPMINSD   Z29, Z4, Z4
	VPMAXSD   Z28, Z4, Z4
	VPADDD    Z4, Z5, Z5
	VPMOVSDW  Z4, Y4
	VPERMW    Y4, Y31, Y4
	VMOVDQU16 Y4, K2, (BX)
	JMP q16sum

q16nan:
	MOVL $0x7fc00000, AX
	MOVL AX, (R8)
q16zero: // zero codes (Z5 is zero)
	MOVQ DI, BX
	MOVQ R10, CX
q16zloop:
	CMPQ CX, $16
	JL   q16ztail
	VMOVDQU16 Y5, (BX)
	ADDQ $32, BX
	SUBQ $16, CX
	JMP  q16zloop
q16ztail:
	TESTQ CX, CX
	JEQ   q16sum
	LOWMASK(R13, KMOVW, K2)
	VMOVDQU16 Y5, K2, (BX)

q16sum:
	TESTQ R9, R9
	JEQ   q16next
	SUMD
	MOVL AX, (R9)
	ADDQ $4, R9
q16next:
	MOVQ R10, AX
	SHLQ $2, AX
	ADDQ AX, SI
	SHRQ $1, AX
	ADDQ AX, DI
	ADDQ $4, R8
	DECQ R11
	JNE  q16block
	VZEROUPPER
	RET

// func groupQuant8Asm(x *float32, q *int8, s *int32, unit, units int) float32
//
// The whole row (units·unit values): d = float32(amax/127) (NaN when amax is not finite),
// codes clamp(RoundToEven(x/d), ±127) (zeros when d is 0 or NaN) in natural order, Σ codes of
// each unit to s (s may be nil); returns d.
TEXT ·groupQuant8Asm(SB), NOSPLIT, $0-44
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ s+16(FP), R9
	MOVQ unit+24(FP), R10
	MOVQ units+32(FP), R11
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z30
	MOVL $127, AX
	VPBROADCASTD AX, Z29
	MOVL $-127, AX
	VPBROADCASTD AX, Z28
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X27
	MOVQ SI, R12
	MOVQ R10, CX
	IMULQ R11, CX
	VPXORD Z0, Z0, Z0
q8amax:
	CMPQ   CX, $16
	JL     q8amaxtail
	VPANDD (R12), Z30, Z1
	VPMAXUD Z1, Z0, Z0
	ADDQ   $64, R12
	SUBQ   $16, CX
	JMP    q8amax
q8amaxtail:
	TESTQ  CX, CX
	JEQ    q8amaxdone
	LOWMASK(R13, KMOVW, K2)
	VMOVDQU32.Z (R12), K2, Z1
	VPANDD Z30, Z1, Z1
	VPMAXUD Z1, Z0, Z0
q8amaxdone:
	MAXBITS
	CMPL AX, $0x7f800000
	JAE  q8nan
	VMOVD  AX, X3
	VDIVSS X27, X3, X3 // d = amax / 127
	VMOVSS X3, ret+40(FP)
	VMOVD  X3, AX
	TESTL  AX, AX
	JEQ    q8zero
	VBROADCASTSS X3, Z3

q8unit:
	VPXORD Z5, Z5, Z5
	MOVQ R10, CX
q8conv:
	CMPQ CX, $16
	JL   q8convtail
	VMOVUPS   (SI), Z4
	VDIVPS    Z3, Z4, Z4
	VCVTPS2DQ Z4, Z4
	VPMINSD   Z29, Z4, Z4
	VPMAXSD   Z28, Z4, Z4
	VPADDD    Z4, Z5, Z5
	VPMOVSDB  Z4, X4
	VMOVDQU8  X4, (DI)
	ADDQ $64, SI
	ADDQ $16, DI
	SUBQ $16, CX
	JMP  q8conv
q8convtail:
	TESTQ CX, CX
	JEQ   q8usum
	LOWMASK(R13, KMOVW, K2)
	VMOVUPS.Z (SI), K2, Z4
	VDIVPS    Z3, Z4, Z4
	VCVTPS2DQ Z4, Z4
	VPMINSD   Z29, Z4, Z4
	VPMAXSD   Z28, Z4, Z4
	VPADDD    Z4, Z5, Z5
	VPMOVSDB  Z4, X4
	VMOVDQU8  X4, K2, (DI)
	LEAQ (SI)(CX*4), SI
	ADDQ CX, DI
q8usum:
	TESTQ R9, R9
	JEQ   q8unext
	SUMD
	MOVL AX, (R9)
	ADDQ $4, R9
q8unext:
	DECQ R11
	JNE  q8unit
	VZEROUPPER
	RET

q8nan:
	MOVL $0x7fc00000, AX
	MOVL AX, ret+40(FP)
	JMP  q8z
q8zero:
	MOVL $0, ret+40(FP)
q8z: // zero codes and sums
	VPXORD Z5, Z5, Z5
q8zunit:
	MOVQ R10, CX
q8zloop:
	CMPQ CX, $16
	JL   q8ztail
	VMOVDQU8 X5, (DI)
	ADDQ $16, DI
	SUBQ $16, CX
	JMP  q8zloop
q8ztail:
	TESTQ CX, CX
	JEQ   q8zsum
	LOWMASK(R13, KMOVW, K2)
	VMOVDQU8 X5, K2, (DI)
	ADDQ CX, DI
q8zsum:
	TESTQ R9, R9
	JEQ   q8znext
	MOVL $0, (R9)
	ADDQ $4, R9
q8znext:
	DECQ R11
	JNE  q8zunit
	VZEROUPPER
	RET

// func groupSplitHL(q *int16, hi, lo *byte, n int)
//
// Splits n codes (a multiple of 4) as a = 256·h + l: hi = a>>8 (arithmetic), lo = a&255 (the
// AMX A tiles of the a16 mode).
TEXT ·groupSplitHL(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), SI
	MOVQ hi+8(FP), DI
	MOVQ lo+16(FP), DX
	MOVQ n+24(FP), CX
hlloop:
	CMPQ CX, $32
	JL   hltail
	VMOVDQU16 (SI), Z0
	VPMOVWB   Z0, (DX)
	VPSRAW    $8, Z0, Z1
	VPMOVWB   Z1, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	ADDQ $32, DX
	SUBQ $32, CX
	JMP  hlloop
hltail:
	TESTQ CX, CX
	JEQ   hldone
	LOWMASK(R13, KMOVD, K2)
	VMOVDQU16.Z (SI), K2, Z0
	VPMOVWB   Z0, Y2
	VMOVDQU8  Y2, K2, (DX)
	VPSRAW    $8, Z0, Z1
	VPMOVWB   Z1, Y2
	VMOVDQU8  Y2, K2, (DI)
hldone:
	VZEROUPPER
	RET
