//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"

// Activation quantizers (AVX-512F/BW/VL): one token's row to llama.cpp's Q8_0/Q8_1 or Q8_K
// blocks, with exactly the arithmetic of quantizeQ8_0 / quantizeQ8_K (acts.go), writing both
// the ggml layout (qs, d, s or bsums) and the interleaved copy of pack.go (il, records).
// Group g of the token starts at il + g·ntok·(512 or 256) and rec + g·ntok·128.

// func quantQ8Asm(x *float32, qs *int8, d, s *float32, il *byte, rec *float32, nb, ntok int)
//
// nb blocks of 32; s is nil for Q8_0 (the records then get Σq) or Q8_1's sums (the records
// get s). The padding blocks of a partial last group are left alone.
TEXT ·quantQ8Asm(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), DI
	MOVQ qs+8(FP), SI
	MOVQ d+16(FP), R8
	MOVQ s+24(FP), R9
	MOVQ il+32(FP), R10
	MOVQ rec+40(FP), R11
	MOVQ nb+48(FP), R12
	MOVQ ntok+56(FP), BX
	MOVQ BX, DX
	SHLQ $9, BX
	SHLQ $7, DX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	MOVL $0x42fe0000, AX // 127.0
	VPBROADCASTD AX, Z30
	VMOVDQU32 scatter8<>(SB), Y29
	VPXORD Z28, Z28, Z28
	TESTQ R12, R12
	JEQ  q8done
q8group:
	MOVQ R10, R14
	MOVQ R11, R15
	MOVQ $16, R13
q8block:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VPANDD  Z31, Z0, Z2
	VPANDD  Z31, Z1, Z3
	VMAXPS  Z3, Z2, Z2
	BFLY(VMAXPS, Z2, Z3)       // amax
	VDIVPS  Z30, Z2, Z4        // d = amax/127
	VCMPPS  $4, Z28, Z2, K2    // amax != 0
	VDIVPS.Z Z2, Z30, K2, Z6   // id = 127/amax, or 0
	VCVTPS2PH $0, X4, X7
	VCVTPH2PS X7, X7           // fp16(d)
	VMOVSS  X7, (R8)
	VMOVSS  X7, (R15)
	VMULPS  Z6, Z0, Z0
	VMULPS  Z6, Z1, Z1
	VCVTPS2DQ Z0, Z0           // round to nearest even
	VCVTPS2DQ Z1, Z1
	VPADDD  Z1, Z0, Z8
	BFLY(VPADDD, Z8, Z9)       // Σq (the values are within ±127, so unsaturated)
	VPMOVSDB Z0, X10
	VPMOVSDB Z1, X11
	VMOVDQU X10, (SI)
	VMOVDQU X11, 16(SI)
	VINSERTI32X4 $1, X11, Y10, Y10
	KXNORW  K3, K3, K3
	VPSCATTERDD Y10, K3, (R14)(Y29*1)
	TESTQ   R9, R9
	JNE     q8s
	VMOVD   X8, 64(R15)
	JMP     q8next
q8s:
	VCVTDQ2PS X8, X9
	VMULSS  X4, X9, X9         // d·Σq with the unrounded d
	VCVTPS2PH $0, X9, X9
	VCVTPH2PS X9, X9
	VMOVSS  X9, (R9)
	VMOVSS  X9, 64(R15)
	ADDQ    $4, R9
q8next:
	ADDQ $128, DI
	ADDQ $32, SI
	ADDQ $4, R8
	ADDQ $4, R14
	ADDQ $4, R15
	DECQ R12
	JEQ  q8done
	DECQ R13
	JNE  q8block
	ADDQ BX, R10
	ADDQ DX, R11
	JMP  q8group
q8done:
	VZEROUPPER
	RET

// func quantQ8KAsm(x *float32, qs *int8, d *float32, bsums *int16, il *byte, rec *float32, nb, ntok int)
//
// nb super-blocks of 256, as quantize_row_q8_K_ref: the element of largest magnitude (the
// first one on ties) sets iscale = −127/max; q = min(127, round(iscale·x)); d = 1/iscale.
TEXT ·quantQ8KAsm(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), DI
	MOVQ qs+8(FP), SI
	MOVQ d+16(FP), R8
	MOVQ bsums+24(FP), R9
	MOVQ il+32(FP), R10
	MOVQ rec+40(FP), R11
	MOVQ nb+48(FP), R12
	MOVQ ntok+56(FP), BX
	MOVQ BX, DX
	SHLQ $8, BX
	SHLQ $7, DX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	MOVL $0xc2fe0000, AX // −127.0
	VPBROADCASTD AX, Z30
	MOVL $127, AX
	VPBROADCASTD AX, Z27
	MOVL $0x3f800000, AX // 1.0
	VMOVD AX, X26
	VMOVDQU32 scatter4<>(SB), X29
	TESTQ R12, R12
	JEQ  kdone
ksuper:
	// amax over the 256 values
	VPXORD Z2, Z2, Z2
	XORQ CX, CX
kmax:
	VPANDD  (DI)(CX*1), Z31, Z3
	VMAXPS  Z3, Z2, Z2
	ADDQ $64, CX
	CMPQ CX, $1024
	JLT  kmax
	BFLY(VMAXPS, Z2, Z3)
	VPXORD  Z28, Z28, Z28
	VCMPPS  $0, Z28, Z2, K1 // amax == 0
	KORTESTW K1, K1
	JNE     kzero
	// the first element whose magnitude is amax
	XORQ CX, CX
kfind:
	VPANDD  (DI)(CX*1), Z31, Z3
	VCMPPS  $0, Z2, Z3, K1
	KORTESTW K1, K1
	JNE     kfound
	ADDQ $64, CX
	CMPQ CX, $1024
	JLT  kfind
	JMP  kzero // no match: NaNs; treat as an empty block
kfound:
	KMOVW   K1, AX
	TZCNTL  AX, AX
	LEAQ    (CX)(AX*4), AX
	VBROADCASTSS (DI)(AX*1), Z4 // mx
	VDIVPS  Z4, Z30, Z5         // iscale = −127/mx
	VDIVSS  X5, X26, X6         // d = 1/iscale
	VMOVSS  X6, (R8)
	VMOVSS  X6, 64(R11)
	// 16 sub-blocks of 16
	MOVQ R10, R14
	XORQ CX, CX
	XORQ R13, R13
ksub:
	VMULPS  (DI)(CX*4), Z5, Z0
	VCVTPS2DQ Z0, Z0
	VPMINSD Z27, Z0, Z0
	VMOVDQA64 Z0, Z8
	BFLY(VPADDD, Z8, Z9)
	VMOVD   X8, AX
	MOVW    AX, (R9)(R13*2)
	MOVL    AX, (R11)(R13*4)
	VPMOVSDB Z0, X10
	VMOVDQU X10, (SI)(CX*1)
	KXNORW  K3, K3, K3
	VPSCATTERDD X10, K3, (R14)(X29*1)
	ADDQ $4, R14
	ADDQ $16, CX
	INCQ R13
	CMPQ R13, $16
	JLT  ksub
	JMP  knext
kzero:
	// d = 0, zero codes and sums
	VPXORD  Z0, Z0, Z0
	MOVL    $0, (R8)
	MOVL    $0, 64(R11)
	VMOVDQU64 Z0, (SI)
	VMOVDQU64 Z0, 64(SI)
	VMOVDQU64 Z0, 128(SI)
	VMOVDQU64 Z0, 192(SI)
	VMOVDQU64 Z0, (R10)
	VMOVDQU64 Z0, 64(R10)
	VMOVDQU64 Z0, 128(R10)
	VMOVDQU64 Z0, 192(R10)
	VMOVDQU64 Z0, (R11)
	VMOVDQU64 Y0, (R9)
knext:
	ADDQ $1024, DI
	ADDQ $256, SI
	ADDQ $4, R8
	ADDQ $32, R9
	ADDQ BX, R10
	ADDQ DX, R11
	DECQ R12
	JNE  ksuper
kdone:
	VZEROUPPER
	RET

// Scatter offsets: word s of a block or sub-block goes to step s (64 bytes per step).
DATA scatter8<>+0(SB)/4, $0
DATA scatter8<>+4(SB)/4, $64
DATA scatter8<>+8(SB)/4, $128
DATA scatter8<>+12(SB)/4, $192
DATA scatter8<>+16(SB)/4, $256
DATA scatter8<>+20(SB)/4, $320
DATA scatter8<>+24(SB)/4, $384
DATA scatter8<>+28(SB)/4, $448
GLOBL scatter8<>(SB), RODATA|NOPTR, $32

DATA scatter4<>+0(SB)/4, $0
DATA scatter4<>+4(SB)/4, $64
DATA scatter4<>+8(SB)/4, $128
DATA scatter4<>+12(SB)/4, $192
GLOBL scatter4<>(SB), RODATA|NOPTR, $16
