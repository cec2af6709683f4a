//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

// Float32 vector operations (AVX-512F) for attention and the MLP: softmax, silu(g)·u, rows of
// dot products and weighted sums of rows. See vec.go for the contracts.

// EXP_CONSTS loads the constants of EXP into Z20-Z29.
#define EXP_CONSTS \
	VBROADCASTSS expc<>+0(SB), Z20  \
	VBROADCASTSS expc<>+4(SB), Z21  \
	VBROADCASTSS expc<>+8(SB), Z22  \
	VBROADCASTSS expc<>+12(SB), Z23 \
	VBROADCASTSS expc<>+16(SB), Z24 \
	VBROADCASTSS expc<>+20(SB), Z25 \
	VBROADCASTSS expc<>+24(SB), Z26 \
	VBROADCASTSS expc<>+28(SB), Z27 \
	VBROADCASTSS expc<>+32(SB), Z28 \
	VBROADCASTSS expc<>+36(SB), Z29 \
	VBROADCASTSS expc<>+40(SB), Z30 \
	VBROADCASTSS expc<>+44(SB), Z31

// EXP(x, t1, t2) replaces the 16 floats of x by e^x (Cephes expf: x = n·ln2 + r, |r| ≤ ln2/2,
// a degree-7 polynomial for e^r, scaled by 2^n; relative error about 2e-7). Inputs are clamped
// to [-104, 89] (e^x then underflows to 0 or overflows to +Inf); NaN stays NaN.
#define EXP(x, t1, t2) \
	VMAXPS        x, Z20, x      \
	VMINPS        x, Z21, x      \
	VMULPS        Z22, x, t1     \
	VRNDSCALEPS   $8, t1, t1     \
	VFNMADD231PS  Z23, t1, x     \
	VFNMADD231PS  Z24, t1, x     \
	VMULPS        x, x, t2       \
	VMOVAPS       Z25, Z19       \
	VFMADD213PS   Z26, x, Z19    \
	VFMADD213PS   Z27, x, Z19    \
	VFMADD213PS   Z28, x, Z19    \
	VFMADD213PS   Z29, x, Z19    \
	VFMADD213PS   Z30, x, Z19    \
	VFMADD213PS   x, t2, Z19     \
	VADDPS        Z31, Z19, Z19  \
	VSCALEFPS     t1, Z19, x

// func softmaxAsm(x *float32, n int)
TEXT ·softmaxAsm(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), SI
	EXP_CONSTS
	TAILMASK(SI, K1)
	MOVQ SI, DX
	SHRQ $4, DX // whole vectors
	// Pass 1: maximum.
	VBROADCASTSS neginf<>(SB), Z0
	MOVQ DI, AX
	MOVQ DX, BX
	TESTQ BX, BX
	JEQ  maxtail
maxloop:
	VMAXPS (AX), Z0, Z0
	ADDQ $64, AX
	DECQ BX
	JNE  maxloop
maxtail:
	VBROADCASTSS neginf<>(SB), Z1
	VMOVUPS (AX), K1, Z1
	VMAXPS  Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS  Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS  X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS  X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS  X1, X0, X0
	VBROADCASTSS X0, Z18 // max
	// Pass 2: e^(x−max), stored, and their sum.
	VPXORD Z17, Z17, Z17
	MOVQ DI, AX
	MOVQ DX, BX
	TESTQ BX, BX
	JEQ  exptail
exploop:
	VMOVUPS (AX), Z0
	VSUBPS  Z18, Z0, Z0
	EXP(Z0, Z1, Z2)
	VMOVUPS Z0, (AX)
	VADDPS  Z0, Z17, Z17
	ADDQ $64, AX
	DECQ BX
	JNE  exploop
exptail:
	KORTESTW K1, K1
	JEQ  sum
	VMOVUPS.Z (AX), K1, Z0
	VSUBPS  Z18, Z0, Z0
	EXP(Z0, Z1, Z2)
	VMOVUPS Z0, K1, (AX)
	VADDPS  Z0, Z17, K1, Z17
sum:
	VEXTRACTF64X4 $1, Z17, Y1
	VADDPS  Y1, Y17, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS  X2, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS  X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS  X2, X1, X1
	VMOVAPS X31, X2 // 1
	VDIVSS  X1, X2, X2
	VBROADCASTSS X2, Z16 // 1/sum
	// Pass 3: scale.
	MOVQ DI, AX
	MOVQ DX, BX
	TESTQ BX, BX
	JEQ  scaletail
scaleloop:
	VMULPS  (AX), Z16, Z0
	VMOVUPS Z0, (AX)
	ADDQ $64, AX
	DECQ BX
	JNE  scaleloop
scaletail:
	VMOVUPS.Z (AX), K1, Z0
	VMULPS  Z0, Z16, Z0
	VMOVUPS Z0, K1, (AX)
	VZEROUPPER
	RET

// func siluMulAsm(dst, gate, u *float32, n int)
TEXT ·siluMulAsm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), R8
	MOVQ n+24(FP), R9
	EXP_CONSTS
	TAILMASK(R9, K1)
	MOVQ R9, BX
	SHRQ $4, BX
	TESTQ BX, BX
	JEQ  silutail
siluloop:
	VMOVUPS (SI), Z3
	VPXORD  Z0, Z0, Z0
	VSUBPS  Z3, Z0, Z0 // −g
	EXP(Z0, Z1, Z2)
	VADDPS  Z31, Z0, Z0 // 1 + e^−g
	VDIVPS  Z0, Z3, Z3  // g / (1 + e^−g)
	VMULPS  (R8), Z3, Z3
	VMOVUPS Z3, (DI)
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, DI
	DECQ BX
	JNE  siluloop
silutail:
	KORTESTW K1, K1
	JEQ  silodone
	VMOVUPS.Z (SI), K1, Z3
	VPXORD  Z0, Z0, Z0
	VSUBPS  Z3, Z0, Z0
	EXP(Z0, Z1, Z2)
	VADDPS  Z31, Z0, Z0
	VDIVPS  Z0, Z3, Z3
	VMOVUPS.Z (R8), K1, Z4
	VMULPS  Z4, Z3, Z3
	VMOVUPS Z3, K1, (DI)
silodone:
	VZEROUPPER
	RET

// func dotRowsAsm(y *float32, q *float32, k *float32, stride, rows, n int, scale float32)
//
// y[j] = scale·Σ_{i<n} q[i]·k_j[i], k_j = k + j·stride bytes; n is a multiple of 16. Four rows
// at a time share each load of q; the four sums are reduced together.
TEXT ·dotRowsAsm(SB), NOSPLIT, $0-52
	MOVQ y+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ k+16(FP), R12
	MOVQ stride+24(FP), DX
	MOVQ rows+32(FP), CX
	MOVQ n+40(FP), R8
	SHLQ $2, R8 // bytes per row
	VMOVSS scale+48(FP), X16
	VBROADCASTSS X16, Z16
	MOVL $0x0c080400, AX
	VMOVD AX, X17
	VPMOVZXBD X17, X17 // lanes 0, 4, 8, 12
	CMPQ CX, $4
	JLT  one
four:
	LEAQ (R12)(DX*1), R13
	LEAQ (R13)(DX*1), R14
	LEAQ (R14)(DX*1), R15
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ BX, BX
fourloop:
	VMOVUPS (SI)(BX*1), Z4
	VFMADD231PS (R12)(BX*1), Z4, Z0
	VFMADD231PS (R13)(BX*1), Z4, Z1
	VFMADD231PS (R14)(BX*1), Z4, Z2
	VFMADD231PS (R15)(BX*1), Z4, Z3
	ADDQ $64, BX
	CMPQ BX, R8
	JLT  fourloop
	// Reduce Z0-Z3 to one sum each, in lanes 0, 4, 8, 12.
	VSHUFF64X2 $0x44, Z1, Z0, Z5
	VSHUFF64X2 $0xee, Z1, Z0, Z6
	VADDPS     Z6, Z5, Z5
	VSHUFF64X2 $0x44, Z3, Z2, Z7
	VSHUFF64X2 $0xee, Z3, Z2, Z8
	VADDPS     Z8, Z7, Z7
	VSHUFF64X2 $0x88, Z7, Z5, Z0
	VSHUFF64X2 $0xdd, Z7, Z5, Z1
	VADDPS     Z1, Z0, Z0
	VSHUFPS    $0xee, Z0, Z0, Z1
	VADDPS     Z1, Z0, Z0
	VMOVSHDUP  Z0, Z1
	VADDPS     Z1, Z0, Z0
	VPERMPS    Z0, Z17, Z0
	VMULPS     X16, X0, X0
	VMOVUPS    X0, (DI)
	ADDQ $16, DI
	LEAQ (R15)(DX*1), R12
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  four
one:
	TESTQ CX, CX
	JEQ  dotdone
oneloop:
	VPXORD Z0, Z0, Z0
	XORQ BX, BX
oneinner:
	VMOVUPS (SI)(BX*1), Z4
	VFMADD231PS (R12)(BX*1), Z4, Z0
	ADDQ $64, BX
	CMPQ BX, R8
	JLT  oneinner
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS  Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS  X1, X0, X0
	VMOVHLPS X0, X0, X1
	VADDPS  X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS  X1, X0, X0
	VMULSS  X16, X0, X0
	VMOVSS  X0, (DI)
	ADDQ $4, DI
	ADDQ DX, R12
	DECQ CX
	JNE  oneloop
dotdone:
	VZEROUPPER
	RET

// func axpyRowsAsm(out *float32, p *float32, v *float32, stride, rows, n int)
//
// out[i] = Σ_{j<rows} p[j]·v_j[i] for i < n, v_j = v + j·stride bytes; n is a multiple of 16.
// Columns are done 128 at a time (eight accumulators), then 16 at a time.
TEXT ·axpyRowsAsm(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), R12
	MOVQ stride+24(FP), DX
	MOVQ rows+32(FP), CX
	MOVQ n+40(FP), R8
	TESTQ CX, CX
	JEQ  axzero
chunk128:
	CMPQ R8, $128
	JLT  chunk16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ R12, R13
	MOVQ SI, R14
	MOVQ CX, BX
loop128:
	VBROADCASTSS (R14), Z8
	VFMADD231PS (R13), Z8, Z0
	VFMADD231PS 64(R13), Z8, Z1
	VFMADD231PS 128(R13), Z8, Z2
	VFMADD231PS 192(R13), Z8, Z3
	VFMADD231PS 256(R13), Z8, Z4
	VFMADD231PS 320(R13), Z8, Z5
	VFMADD231PS 384(R13), Z8, Z6
	VFMADD231PS 448(R13), Z8, Z7
	ADDQ $4, R14
	ADDQ DX, R13
	DECQ BX
	JNE  loop128
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	ADDQ $512, DI
	ADDQ $512, R12
	SUBQ $128, R8
	JMP  chunk128
chunk16:
	TESTQ R8, R8
	JEQ  axdone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	MOVQ R12, R13
	MOVQ SI, R14
	MOVQ CX, BX
loop16:
	VBROADCASTSS (R14), Z8
	VFMADD231PS (R13), Z8, Z0
	ADDQ $4, R14
	ADDQ DX, R13
	DECQ BX
	JEQ  end16
	VBROADCASTSS (R14), Z8
	VFMADD231PS (R13), Z8, Z1
	ADDQ $4, R14
	ADDQ DX, R13
	DECQ BX
	JNE  loop16
end16:
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	ADDQ $64, R12
	SUBQ $16, R8
	JMP  chunk16
axzero:
	VPXORD Z0, Z0, Z0
zeroloop:
	TESTQ R8, R8
	JEQ  axdone
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	SUBQ $16, R8
	JMP  zeroloop
axdone:
	VZEROUPPER
	RET

// EXP constants: clamp low, clamp high, log2(e), ln2 high, ln2 low, the polynomial (Cephes
// expf) from the x^7-equivalent term down, 1.
DATA expc<>+0(SB)/4, $-104.0
DATA expc<>+4(SB)/4, $89.0
DATA expc<>+8(SB)/4, $1.44269504088896341
DATA expc<>+12(SB)/4, $0.693359375
DATA expc<>+16(SB)/4, $-2.12194440e-4
DATA expc<>+20(SB)/4, $1.9875691500e-4
DATA expc<>+24(SB)/4, $1.3981999507e-3
DATA expc<>+28(SB)/4, $8.3334519073e-3
DATA expc<>+32(SB)/4, $4.1665795894e-2
DATA expc<>+36(SB)/4, $1.6666665459e-1
DATA expc<>+40(SB)/4, $5.0000001201e-1
DATA expc<>+44(SB)/4, $1.0
GLOBL expc<>(SB), RODATA|NOPTR, $48

DATA neginf<>+0(SB)/4, $0xff800000
GLOBL neginf<>(SB), RODATA|NOPTR, $4

// func sumSquaresAsm(x *float32, n int) float64
//
// Σ x[i]² in float64 (each square is exact in float64), eight lanes per register, two
// accumulators; the tail (n mod 16) is masked.
TEXT ·sumSquaresAsm(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), R9
	TAILMASK(R9, K1)
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	MOVQ R9, BX
	SHRQ $4, BX
	TESTQ BX, BX
	JEQ  sstail
ssloop:
	VCVTPS2PD (SI), Z2
	VCVTPS2PD 32(SI), Z3
	VFMADD231PD Z2, Z2, Z0
	VFMADD231PD Z3, Z3, Z1
	ADDQ $64, SI
	DECQ BX
	JNE  ssloop
sstail:
	VMOVUPS.Z (SI), K1, Z4
	VEXTRACTF64X4 $1, Z4, Y5
	VCVTPS2PD Y4, Z2
	VCVTPS2PD Y5, Z3
	VFMADD231PD Z2, Z2, Z0
	VFMADD231PD Z3, Z3, Z1
	VADDPD  Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPD  Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD  X1, X0, X0
	VPERMILPD $1, X0, X1
	VADDSD  X1, X0, X0
	VMOVSD  X0, ret+16(FP)
	VZEROUPPER
	RET

// func scaleMulAsm(dst, x, w *float32, n int, scale float32)
//
// dst[i] = (x[i]·scale)·w[i], rounded after each product (no FMA).
TEXT ·scaleMulAsm(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), R8
	MOVQ n+24(FP), R9
	VBROADCASTSS scale+32(FP), Z16
	TAILMASK(R9, K1)
	MOVQ R9, BX
	SHRQ $4, BX
	TESTQ BX, BX
	JEQ  smtail
smloop:
	VMULPS  (SI), Z16, Z0
	VMULPS  (R8), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, DI
	DECQ BX
	JNE  smloop
smtail:
	KORTESTW K1, K1
	JEQ  smdone
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (R8), K1, Z1
	VMULPS  Z16, Z0, Z0
	VMULPS  Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)
smdone:
	VZEROUPPER
	RET

// func addAsm(dst, x *float32, n int)
//
// dst[i] += x[i].
TEXT ·addAsm(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), R9
	TAILMASK(R9, K1)
	MOVQ R9, BX
	SHRQ $4, BX
	TESTQ BX, BX
	JEQ  addtail
addloop:
	VMOVUPS (DI), Z0
	VADDPS  (SI), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ BX
	JNE  addloop
addtail:
	KORTESTW K1, K1
	JEQ  adddone
	VMOVUPS.Z (DI), K1, Z0
	VMOVUPS.Z (SI), K1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)
adddone:
	VZEROUPPER
	RET
