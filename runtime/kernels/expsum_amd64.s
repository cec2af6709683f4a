//go:build amd64 && !purego

#include "textflag.h"

// Sums of float64 exponentials (AVX-512F): see expsum.go. Eight lanes, the last block masked.

// expd: clamp, 1.5·2^52, 16/ln2, −ln2hi/16, −ln2lo/16 (Go's math.Exp split of ln 2), 1/16,
// 1/7! … 1/2!, 1, then 2^(j/16) for j = 0 … 15 (correctly rounded).
DATA expd<>+0(SB)/8, $0xc087500000000000
DATA expd<>+8(SB)/8, $0x4338000000000000
DATA expd<>+16(SB)/8, $0x40371547652b82fe
DATA expd<>+24(SB)/8, $0xbfa62e42fee00000
DATA expd<>+32(SB)/8, $0xbdaa39ef35793c76
DATA expd<>+40(SB)/8, $0x3fb0000000000000
DATA expd<>+48(SB)/8, $0x3f2a01a01a01a01a
DATA expd<>+56(SB)/8, $0x3f56c16c16c16c17
DATA expd<>+64(SB)/8, $0x3f81111111111111
DATA expd<>+72(SB)/8, $0x3fa5555555555555
DATA expd<>+80(SB)/8, $0x3fc5555555555555
DATA expd<>+88(SB)/8, $0x3fe0000000000000
DATA expd<>+96(SB)/8, $0x3ff0000000000000
DATA expd<>+104(SB)/8, $0x3ff0000000000000
DATA expd<>+112(SB)/8, $0x3ff0b5586cf9890f
DATA expd<>+120(SB)/8, $0x3ff172b83c7d517b
DATA expd<>+128(SB)/8, $0x3ff2387a6e756238
DATA expd<>+136(SB)/8, $0x3ff306fe0a31b715
DATA expd<>+144(SB)/8, $0x3ff3dea64c123422
DATA expd<>+152(SB)/8, $0x3ff4bfdad5362a27
DATA expd<>+160(SB)/8, $0x3ff5ab07dd485429
DATA expd<>+168(SB)/8, $0x3ff6a09e667f3bcd
DATA expd<>+176(SB)/8, $0x3ff7a11473eb0187
DATA expd<>+184(SB)/8, $0x3ff8ace5422aa0db
DATA expd<>+192(SB)/8, $0x3ff9c49182a3f090
DATA expd<>+200(SB)/8, $0x3ffae89f995ad3ad
DATA expd<>+208(SB)/8, $0x3ffc199bdd85529c
DATA expd<>+216(SB)/8, $0x3ffd5818dcfba487
DATA expd<>+224(SB)/8, $0x3ffea4afa2a490da
GLOBL expd<>(SB), RODATA|NOPTR, $232

// EXPD_CONSTS loads the constants of EXPD into Z16-Z24.
#define EXPD_CONSTS \
	VBROADCASTSD expd<>+0(SB), Z16  \
	VBROADCASTSD expd<>+8(SB), Z17  \
	VBROADCASTSD expd<>+16(SB), Z18 \
	VBROADCASTSD expd<>+24(SB), Z19 \
	VBROADCASTSD expd<>+32(SB), Z20 \
	VBROADCASTSD expd<>+40(SB), Z21 \
	VBROADCASTSD expd<>+96(SB), Z22 \
	VMOVUPD      expd<>+104(SB), Z23 \
	VMOVUPD      expd<>+168(SB), Z24

// EXPD(v, t1, t2, p) sets p to e^v for the 8 doubles of v (v, t1, t2 clobbered):
// v = max(v, −746) (NaN kept); k = round(16·v/ln 2) from the low bits of v·16/ln2 + 1.5·2^52;
// r = v − k·ln2/16 (two steps); p = T[k mod 16]·(1 + (e^r − 1)) scaled by 2^floor(k/16).
#define EXPD(v, t1, t2, p) \
	VMAXPD       v, Z16, v               \
	VMOVAPD      Z17, t1                 \
	VFMADD231PD  Z18, v, t1              \
	VSUBPD       Z17, t1, t2             \
	VFMADD231PD  Z19, t2, v              \
	VFMADD231PD  Z20, t2, v              \
	VMULPD       Z21, t2, t2             \
	VRNDSCALEPD  $1, t2, t2              \
	VPERMI2PD    Z24, Z23, t1            \
	VBROADCASTSD expd<>+48(SB), p        \
	VFMADD213PD.BCST expd<>+56(SB), v, p \
	VFMADD213PD.BCST expd<>+64(SB), v, p \
	VFMADD213PD.BCST expd<>+72(SB), v, p \
	VFMADD213PD.BCST expd<>+80(SB), v, p \
	VFMADD213PD.BCST expd<>+88(SB), v, p \
	VFMADD213PD  Z22, v, p               \
	VMULPD       v, p, p                 \
	VFMADD213PD  t1, t1, p               \
	VSCALEFPD    t2, p, p

// HSUMD(z, y, x, tmp) sums the 8 doubles of z into the low double of x (y, x: z's halves).
#define HSUMD(z, y, x, tmpy, tmpx) \
	VEXTRACTF64X4 $1, z, tmpy \
	VADDPD        tmpy, y, tmpy \
	VEXTRACTF128  $1, tmpy, x \
	VADDPD        x, tmpx, x \
	VUNPCKHPD     x, x, tmpx \
	VADDSD        tmpx, x, x

// func expSumsAsm(x, y *float32, n int, mx, my float64) (sx, sy, w float64)
TEXT ·expSumsAsm(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSD mx+24(FP), Z25
	VBROADCASTSD my+32(FP), Z26
	EXPD_CONSTS
	VPXORQ Z27, Z27, Z27
	VPXORQ Z28, Z28, Z28
	VPXORQ Z29, Z29, Z29
	VPXORQ Z12, Z12, Z12
	MOVQ   $0xff, R8
	KMOVW  R8, K1

sloop:
	CMPQ CX, $8
	JGE  sfull
	MOVQ $1, R8
	SHLQ CX, R8
	DECQ R8
	KMOVW R8, K1

sfull:
	VCVTPS2PD.Z (SI), K1, Z0
	VCVTPS2PD.Z (DI), K1, Z1
	VSUBPD      Z25, Z0, Z2
	VSUBPD      Z26, Z1, Z3
	VSUBPD      Z1, Z0, Z4
	EXPD(Z2, Z5, Z6, Z8)
	EXPD(Z3, Z9, Z10, Z11)
	VADDPD      Z8, Z27, K1, Z27
	VADDPD      Z11, Z28, K1, Z28
	VCMPPD      $4, Z12, Z8, K1, K2
	VFMADD231PD Z4, Z8, K2, Z29
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JG          sloop

	HSUMD(Z27, Y27, X0, Y1, X1)
	MOVSD X0, sx+40(FP)
	HSUMD(Z28, Y28, X0, Y1, X1)
	MOVSD X0, sy+48(FP)
	HSUMD(Z29, Y29, X0, Y1, X1)
	MOVSD X0, w+56(FP)
	VZEROUPPER
	RET

// func expSumAsm(x *float32, n int, m float64) float64
TEXT ·expSumAsm(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD m+16(FP), Z25
	EXPD_CONSTS
	VPXORQ Z27, Z27, Z27
	VPXORQ Z28, Z28, Z28
	MOVQ   $0xff, R8
	KMOVW  R8, K1

s1loop:
	CMPQ CX, $8
	JGE  s1full
	MOVQ $1, R8
	SHLQ CX, R8
	DECQ R8
	KMOVW R8, K1

s1full:
	VCVTPS2PD.Z (SI), K1, Z0
	VSUBPD      Z25, Z0, Z2
	EXPD(Z2, Z5, Z6, Z8)
	VADDPD      Z8, Z27, K1, Z27
	ADDQ        $32, SI
	SUBQ        $8, CX
	JG          s1loop

	HSUMD(Z27, Y27, X0, Y1, X1)
	MOVSD X0, ret+24(FP)
	VZEROUPPER
	RET
