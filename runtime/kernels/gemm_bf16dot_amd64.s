//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

// BF16 × BF16 products with VDPBF16PS (AVX512_BF16), for BF16 weights whose activations are
// rounded to bf16 (ActQuant, llama.cpp's vec_dot_type for BF16): each instruction multiplies
// 16 pairs of bf16 exactly and adds both products to a float32 lane (round to nearest even,
// denormals flushed), 32 elements per instruction where widen + FMA takes 16 per FMA plus two
// instructions to widen. n is a multiple of 32; x is the activations as bf16 (uint16).
//
// The Go assembler rejects AVX512_BF16, so each VDPBF16PS is BYTE-encoded with fixed
// registers (bytes from GNU as; TestBF16DotEncodings checks them against objdump):
//	DPBF16_Z30_Z0_Z4         vdpbf16ps %zmm4,%zmm0,%zmm30
//	DPBF16_Z29_Z1_Z5         vdpbf16ps %zmm5,%zmm1,%zmm29
//	DPBF16_Z28_Z2_Z6         vdpbf16ps %zmm6,%zmm2,%zmm28
//	DPBF16_Z27_Z3_Z7         vdpbf16ps %zmm7,%zmm3,%zmm27
//	DPBF16_Z0_Z16_Z20        vdpbf16ps %zmm20,%zmm16,%zmm0
//	DPBF16_Z1_Z16_Z21        vdpbf16ps %zmm21,%zmm16,%zmm1
//	DPBF16_Z2_Z16_Z22        vdpbf16ps %zmm22,%zmm16,%zmm2
//	DPBF16_Z3_Z16_Z23        vdpbf16ps %zmm23,%zmm16,%zmm3
//	DPBF16_Z4_Z17_Z20        vdpbf16ps %zmm20,%zmm17,%zmm4
//	DPBF16_Z5_Z17_Z21        vdpbf16ps %zmm21,%zmm17,%zmm5
//	DPBF16_Z6_Z17_Z22        vdpbf16ps %zmm22,%zmm17,%zmm6
//	DPBF16_Z7_Z17_Z23        vdpbf16ps %zmm23,%zmm17,%zmm7
//	DPBF16_Z8_Z18_Z20        vdpbf16ps %zmm20,%zmm18,%zmm8
//	DPBF16_Z9_Z18_Z21        vdpbf16ps %zmm21,%zmm18,%zmm9
//	DPBF16_Z10_Z18_Z22       vdpbf16ps %zmm22,%zmm18,%zmm10
//	DPBF16_Z11_Z18_Z23       vdpbf16ps %zmm23,%zmm18,%zmm11
//	DPBF16_Z12_Z19_Z20       vdpbf16ps %zmm20,%zmm19,%zmm12
//	DPBF16_Z13_Z19_Z21       vdpbf16ps %zmm21,%zmm19,%zmm13
//	DPBF16_Z14_Z19_Z22       vdpbf16ps %zmm22,%zmm19,%zmm14
//	DPBF16_Z15_Z19_Z23       vdpbf16ps %zmm23,%zmm19,%zmm15

#define DPBF16_Z30_Z0_Z4 BYTE $0x62; BYTE $0x62; BYTE $0x7E; BYTE $0x48; BYTE $0x52; BYTE $0xF4
#define DPBF16_Z29_Z1_Z5 BYTE $0x62; BYTE $0x62; BYTE $0x76; BYTE $0x48; BYTE $0x52; BYTE $0xED
#define DPBF16_Z28_Z2_Z6 BYTE $0x62; BYTE $0x62; BYTE $0x6E; BYTE $0x48; BYTE $0x52; BYTE $0xE6
#define DPBF16_Z27_Z3_Z7 BYTE $0x62; BYTE $0x62; BYTE $0x66; BYTE $0x48; BYTE $0x52; BYTE $0xDF
#define DPBF16_Z0_Z16_Z20 BYTE $0x62; BYTE $0xB2; BYTE $0x7E; BYTE $0x40; BYTE $0x52; BYTE $0xC4
#define DPBF16_Z1_Z16_Z21 BYTE $0x62; BYTE $0xB2; BYTE $0x7E; BYTE $0x40; BYTE $0x52; BYTE $0xCD
#define DPBF16_Z2_Z16_Z22 BYTE $0x62; BYTE $0xB2; BYTE $0x7E; BYTE $0x40; BYTE $0x52; BYTE $0xD6
#define DPBF16_Z3_Z16_Z23 BYTE $0x62; BYTE $0xB2; BYTE $0x7E; BYTE $0x40; BYTE $0x52; BYTE $0xDF
#define DPBF16_Z4_Z17_Z20 BYTE $0x62; BYTE $0xB2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xE4
#define DPBF16_Z5_Z17_Z21 BYTE $0x62; BYTE $0xB2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xED
#define DPBF16_Z6_Z17_Z22 BYTE $0x62; BYTE $0xB2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xF6
#define DPBF16_Z7_Z17_Z23 BYTE $0x62; BYTE $0xB2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xFF
#define DPBF16_Z8_Z18_Z20 BYTE $0x62; BYTE $0x32; BYTE $0x6E; BYTE $0x40; BYTE $0x52; BYTE $0xC4
#define DPBF16_Z9_Z18_Z21 BYTE $0x62; BYTE $0x32; BYTE $0x6E; BYTE $0x40; BYTE $0x52; BYTE $0xCD
#define DPBF16_Z10_Z18_Z22 BYTE $0x62; BYTE $0x32; BYTE $0x6E; BYTE $0x40; BYTE $0x52; BYTE $0xD6
#define DPBF16_Z11_Z18_Z23 BYTE $0x62; BYTE $0x32; BYTE $0x6E; BYTE $0x40; BYTE $0x52; BYTE $0xDF
#define DPBF16_Z12_Z19_Z20 BYTE $0x62; BYTE $0x32; BYTE $0x66; BYTE $0x40; BYTE $0x52; BYTE $0xE4
#define DPBF16_Z13_Z19_Z21 BYTE $0x62; BYTE $0x32; BYTE $0x66; BYTE $0x40; BYTE $0x52; BYTE $0xED
#define DPBF16_Z14_Z19_Z22 BYTE $0x62; BYTE $0x32; BYTE $0x66; BYTE $0x40; BYTE $0x52; BYTE $0xF6
#define DPBF16_Z15_Z19_Z23 BYTE $0x62; BYTE $0x32; BYTE $0x66; BYTE $0x40; BYTE $0x52; BYTE $0xFF

// DPBF16_TILE4X4: the 4 × 4 tile's 16 products, Z(4r+t) += Z(16+r) · Z(20+t) in pairs.
#define DPBF16_TILE4X4 \
	DPBF16_Z0_Z16_Z20;  DPBF16_Z1_Z16_Z21;  DPBF16_Z2_Z16_Z22;  DPBF16_Z3_Z16_Z23; \
	DPBF16_Z4_Z17_Z20;  DPBF16_Z5_Z17_Z21;  DPBF16_Z6_Z17_Z22;  DPBF16_Z7_Z17_Z23; \
	DPBF16_Z8_Z18_Z20;  DPBF16_Z9_Z18_Z21;  DPBF16_Z10_Z18_Z22; DPBF16_Z11_Z18_Z23; \
	DPBF16_Z12_Z19_Z20; DPBF16_Z13_Z19_Z21; DPBF16_Z14_Z19_Z22; DPBF16_Z15_Z19_Z23

// func gemvBF16Dot(y *float32, w *byte, stride, rows int, x *uint16, n int)
//
// y[i] = Σ_{k<n} w_i[k]·x[k] for rows rows (w_i = w + i·stride bytes); four accumulators.
TEXT ·gemvBF16Dot(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ rows+24(FP), CX
	MOVQ x+32(FP), R9
	MOVQ n+40(FP), R8
	TESTQ CX, CX
	JEQ  done

rowloop:
	MOVQ   SI, R12
	MOVQ   R9, R13
	MOVQ   R8, BX
	VPXORD Z30, Z30, Z30
	VPXORD Z29, Z29, Z29
	VPXORD Z28, Z28, Z28
	VPXORD Z27, Z27, Z27
	CMPQ   BX, $128
	JLT    tail

loop128:
	VMOVDQU16 (R12), Z0
	VMOVDQU16 64(R12), Z1
	VMOVDQU16 128(R12), Z2
	VMOVDQU16 192(R12), Z3
	VMOVDQU16 (R13), Z4
	VMOVDQU16 64(R13), Z5
	VMOVDQU16 128(R13), Z6
	VMOVDQU16 192(R13), Z7
	DPBF16_Z30_Z0_Z4
	DPBF16_Z29_Z1_Z5
	DPBF16_Z28_Z2_Z6
	DPBF16_Z27_Z3_Z7
	ADDQ $256, R12
	ADDQ $256, R13
	SUBQ $128, BX
	CMPQ BX, $128
	JGE  loop128

tail:
	TESTQ BX, BX
	JEQ   sum

loop32:
	VMOVDQU16 (R12), Z0
	VMOVDQU16 (R13), Z4
	DPBF16_Z30_Z0_Z4
	ADDQ $64, R12
	ADDQ $64, R13
	SUBQ $32, BX
	JNE  loop32

sum:
	VADDPS Z29, Z30, Z30
	VADDPS Z27, Z28, Z28
	VADDPS Z28, Z30, Z30
	HSUM_STORE
	ADDQ $4, DI
	ADDQ DX, SI
	DECQ CX
	JNE  rowloop

done:
	VZEROUPPER
	RET

// HSUM4(acc, yacc, off): stores the sum of acc's 16 floats at off(DI) (yacc: acc's low half).
#define HSUM4(acc, yacc, off) \
	VEXTRACTF64X4 $1, acc, Y16   \
	VADDPS        Y16, yacc, Y16 \
	VEXTRACTF32X4 $1, Y16, X17   \
	VADDPS        X17, X16, X16  \
	VMOVHLPS      X16, X16, X17  \
	VADDPS        X17, X16, X16  \
	VMOVSHDUP     X16, X17       \
	VADDSS        X17, X16, X16  \
	VMOVSS        X16, off(DI)

// func gemm4x4BF16Dot(y *float32, ldy int, w *byte, stride int, x *uint16, ldx int, n int)
//
// A block of 4 weight rows × 4 tokens: Y[t·ldy + r] = Σ_{k<n} w_r[k]·x_t[k] (ldy, ldx in
// elements; stride in bytes); 16 accumulators, each weight and activation vector loaded once.
TEXT ·gemm4x4BF16Dot(SB), NOSPLIT, $0-56
	MOVQ y+0(FP), DI
	MOVQ ldy+8(FP), AX
	SHLQ $2, AX
	MOVQ w+16(FP), R12
	MOVQ stride+24(FP), DX
	MOVQ x+32(FP), R13
	MOVQ ldx+40(FP), R8
	SHLQ $1, R8
	MOVQ n+48(FP), BX
	LEAQ (R12)(DX*2), R14
	ADDQ DX, R14
	LEAQ (R13)(R8*2), R15
	ADDQ R8, R15
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

gloop:
	VMOVDQU16 (R12), Z16
	VMOVDQU16 (R12)(DX*1), Z17
	VMOVDQU16 (R12)(DX*2), Z18
	VMOVDQU16 (R14), Z19
	VMOVDQU16 (R13), Z20
	VMOVDQU16 (R13)(R8*1), Z21
	VMOVDQU16 (R13)(R8*2), Z22
	VMOVDQU16 (R15), Z23
	DPBF16_TILE4X4
	ADDQ $64, R12
	ADDQ $64, R14
	ADDQ $64, R13
	ADDQ $64, R15
	SUBQ $32, BX
	JNE  gloop
	HSUM4(Z0, Y0, 0)
	HSUM4(Z4, Y4, 4)
	HSUM4(Z8, Y8, 8)
	HSUM4(Z12, Y12, 12)
	ADDQ AX, DI
	HSUM4(Z1, Y1, 0)
	HSUM4(Z5, Y5, 4)
	HSUM4(Z9, Y9, 8)
	HSUM4(Z13, Y13, 12)
	ADDQ AX, DI
	HSUM4(Z2, Y2, 0)
	HSUM4(Z6, Y6, 4)
	HSUM4(Z10, Y10, 8)
	HSUM4(Z14, Y14, 12)
	ADDQ AX, DI
	HSUM4(Z3, Y3, 0)
	HSUM4(Z7, Y7, 4)
	HSUM4(Z11, Y11, 8)
	HSUM4(Z15, Y15, 12)
	VZEROUPPER
	RET

// Peak loops for BenchmarkFloatPeak: n iterations of 16 independent instructions on
// registers (no memory), VDPBF16PS (32 multiply-adds each; gemm4x4BF16Dot's tile) and
// VFMADD231PS (16 each): the two instructions' throughput on this CPU, against which the
// kernels are measured.

// func dpbf16PeakLoop(n int)
TEXT ·dpbf16PeakLoop(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TESTQ CX, CX
	JEQ  dpdone
dploop:
	DPBF16_TILE4X4
	DECQ CX
	JNE  dploop
dpdone:
	VZEROUPPER
	RET

// func fmaPeakLoop(n int)
TEXT ·fmaPeakLoop(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	TESTQ CX, CX
	JEQ  fmdone
fmloop:
	VFMADD231PS Z16, Z17, Z0
	VFMADD231PS Z16, Z17, Z1
	VFMADD231PS Z16, Z17, Z2
	VFMADD231PS Z16, Z17, Z3
	VFMADD231PS Z16, Z17, Z4
	VFMADD231PS Z16, Z17, Z5
	VFMADD231PS Z16, Z17, Z6
	VFMADD231PS Z16, Z17, Z7
	VFMADD231PS Z16, Z17, Z8
	VFMADD231PS Z16, Z17, Z9
	VFMADD231PS Z16, Z17, Z10
	VFMADD231PS Z16, Z17, Z11
	VFMADD231PS Z16, Z17, Z12
	VFMADD231PS Z16, Z17, Z13
	VFMADD231PS Z16, Z17, Z14
	VFMADD231PS Z16, Z17, Z15
	DECQ CX
	JNE  fmloop
fmdone:
	VZEROUPPER
	RET
