//go:build amd64 && !purego

#include "textflag.h"
#include "bf16_amd64.h"

// func colSumsAsm(s2, s1 *float64, am *float32, x *float32, n, ld, blocks int)
//
// For blocks blocks of 32 columns (s2, s1, am and x advanced by 32 per block) and the n rows of
// x (ld floats apart), in row order: s2[j] += float64(x)², s1[j] += float64(x) (float64, the
// square exact), am[j] = max(|x|, am[j]) (NaN leaves am). The operations of addColumnSumsGo.
TEXT ·colSumsAsm(SB), NOSPLIT, $0-56
	MOVQ s2+0(FP), DI
	MOVQ s1+8(FP), R8
	MOVQ am+16(FP), R9
	MOVQ x+24(FP), SI
	MOVQ n+32(FP), CX
	MOVQ ld+40(FP), DX
	SHLQ $2, DX
	MOVQ blocks+48(FP), BX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	TESTQ CX, CX
	JEQ  done
	TESTQ BX, BX
	JEQ  done
block:
	VMOVUPD (DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD 128(DI), Z2
	VMOVUPD 192(DI), Z3
	VMOVUPD (R8), Z4
	VMOVUPD 64(R8), Z5
	VMOVUPD 128(R8), Z6
	VMOVUPD 192(R8), Z7
	VMOVUPS (R9), Z8
	VMOVUPS 64(R9), Z9
	MOVQ SI, R10
	MOVQ CX, R11
row:
	VMOVUPS (R10), Z10
	VMOVUPS 64(R10), Z11
	VPANDD  Z31, Z10, Z12
	VPANDD  Z31, Z11, Z13
	VMAXPS  Z8, Z12, Z8 // am = |x| > am ? |x| : am (NaN: am)
	VMAXPS  Z9, Z13, Z9
	VCVTPS2PD (R10), Z14
	VCVTPS2PD 32(R10), Z15
	VCVTPS2PD 64(R10), Z16
	VCVTPS2PD 96(R10), Z17
	VFMADD231PD Z14, Z14, Z0
	VFMADD231PD Z15, Z15, Z1
	VFMADD231PD Z16, Z16, Z2
	VFMADD231PD Z17, Z17, Z3
	VADDPD  Z14, Z4, Z4
	VADDPD  Z15, Z5, Z5
	VADDPD  Z16, Z6, Z6
	VADDPD  Z17, Z7, Z7
	ADDQ DX, R10
	DECQ R11
	JNE  row
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	VMOVUPD Z4, (R8)
	VMOVUPD Z5, 64(R8)
	VMOVUPD Z6, 128(R8)
	VMOVUPD Z7, 192(R8)
	VMOVUPS Z8, (R9)
	VMOVUPS Z9, 64(R9)
	ADDQ $256, DI
	ADDQ $256, R8
	ADDQ $128, R9
	ADDQ $128, SI
	DECQ BX
	JNE  block
done:
	VZEROUPPER
	RET

// func toBF16Asm(bf *uint16, f *float32, x *float32, n int)
//
// bf[i] = ggml_compute_fp32_to_bf16(x[i]) (nearest even; NaN: the high half with the quiet
// bit set), f[i] = that bf16 widened; n a multiple of 16. The operations of f32ToBF16.
TEXT ·toBF16Asm(SB), NOSPLIT, $0-32
	MOVQ bf+0(FP), DI
	MOVQ f+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JEQ  bdone
	BF16_CONSTS
bloop:
	VMOVDQU32 (SI), Z0
	BF16_RNE(Z0, Z1, Z2, Z3, K1)
	VPMOVDW   Z3, (DI)
	VPSLLD    $16, Z3, Z3
	VMOVDQU32 Z3, (R8)
	ADDQ $64, SI
	ADDQ $32, DI
	ADDQ $64, R8
	DECQ CX
	JNE  bloop
bdone:
	VZEROUPPER
	RET
