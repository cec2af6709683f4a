//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"
#include "gemv_prefetch_amd64.h"

// GEMV kernels (AVX-512 BW + VNNI) for the i-quants on a grid (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S,
// IQ1_M, IQ3_XXS, IQ3_S) and the ternary types (TQ1_0, TQ2_0) × Q8_K, over pack.go's layouts
// for them: a group is one 256-element super-block whose 16 lanes are its 16-element
// sub-blocks, its grid points already decoded to small codes. Arguments, registers and the
// Q8_K records as in gemv_k_amd64.s.
//
// Per step (64 codes, one per byte): the 2-bit codes are shifted out of the crumbs, the
// plane's 64 bits (KMOVQ) add 4 to the codes whose value has its bit (sign or delta), and one
// VPSHUFB (table in Z24, iqLUT) maps the 3-bit code to the value plus an offset (64, or 16
// for IQ1_*), an unsigned byte for VPDPBUSD. IQ3_* keep a nibble per value (sign included),
// mapped as IQ4_XS's codes are. Per lane, the offset times the Q8_K sum of its 16 activations
// is subtracted, the exact integer is multiplied by the lane's scale, converted, and
// accumulated by one FMA with d·d_a (d with the type's constant factor, from the packed
// group). The multi-token kernels (gemm_iq_amd64.s) do exactly the same float operations.

#define IQ_LOAD_ARGS \
	MOVQ y+0(FP), DI         \
	MOVQ w+8(FP), SI         \
	MOVQ stride+16(FP), DX   \
	MOVQ rows+24(FP), CX     \
	MOVQ groups+32(FP), R8   \
	MOVQ act+40(FP), R9      \
	MOVQ meta+48(FP), R10    \
	MOVQ ntok+56(FP), R11    \
	MOVQ R11, R15            \
	SHLQ $8, R11             \
	SHLQ $7, R15             \
	MOVL $0x03030303, AX     \
	VPBROADCASTD AX, Z31     \
	MOVL $0x04040404, AX     \
	VPBROADCASTD AX, Z28     \
	MOVL $0x0f0f0f0f, AX     \
	VPBROADCASTD AX, Z27

#define ROW_START \
	MOVQ SI, R12         \
	MOVQ R9, R13         \
	MOVQ R10, R14        \
	MOVQ R8, BX          \
	VPXORD Z30, Z30, Z30

#define ROW_END \
	HSUM_STORE  \
	ADDQ $4, DI \
	ADDQ DX, SI \
	DECQ CX

#define NEXTG(gbytes) \
	ADDQ $gbytes, R12 \
	ADDQ R11, R13     \
	ADDQ R15, R14     \
	DECQ BX

#define PF2 \
	PREFETCHT0 (pfDist)(R12)    \
	PREFETCHT0 (pfDist+64)(R12)

// CRUMB(sh, reg): reg = the 2-bit codes of the step at bit sh of the crumbs in Z16.
#define CRUMB(sh, reg) \
	VPSRLW $sh, Z16, reg \
	VPANDD Z31, reg, reg

// PLANE(s, k, reg): reg += 4 where plane s has its bit, then the table lookup.
#define PLANE(s, k, reg) \
	KMOVQ   (64+8*(s))(R12), k \
	VPADDB  Z28, reg, k, reg   \
	VPSHUFB reg, Z24, reg

// LSCALE(lsoff, doff): Z4 = the lane scales (u8 at lsoff), Z11 = d (f32 at doff) · d_a.
#define LSCALE(lsoff, doff) \
	VPMOVZXBD    lsoff(R12), Z4    \
	VMOVSS       doff(R12), X11    \
	VMULSS       64(R14), X11, X11 \
	VBROADCASTSS X11, Z11

// LFINISH(shift): Z0+Z5 hold Σ (value + offset)·a per lane; subtracts (Σa)<<shift, scales by
// the lane's integer scale and accumulates float(·)·d·d_a into Z30.
#define LFINISH(shift) \
	VPADDD      Z5, Z0, Z0     \
	VMOVDQU32   (R14), Z3      \
	VPSLLD      $shift, Z3, Z3 \
	VPSUBD      Z3, Z0, Z0     \
	VPMULLD     Z4, Z0, Z0     \
	VCVTDQ2PS   Z0, Z0         \
	VFMADD231PS Z11, Z0, Z30

// GRID2_BODY(shift): IQ2_*, IQ1_* (groups of 116 bytes: crumbs, plane, ls at 96, d at 112).
#define GRID2_BODY(shift) \
row:                          \
	ROW_START                  \
group:                        \
	VMOVDQU64 (R12), Z16       \
	LSCALE(96, 112)            \
	PF2                        \
	VPXORD    Z0, Z0, Z0       \
	VPXORD    Z5, Z5, Z5       \
	VPANDD    Z31, Z16, Z1     \
	PLANE(0, K1, Z1)           \
	CRUMB(2, Z2)               \
	PLANE(1, K2, Z2)           \
	CRUMB(4, Z6)               \
	PLANE(2, K3, Z6)           \
	CRUMB(6, Z7)               \
	PLANE(3, K4, Z7)           \
	VPDPBUSD  0(R13), Z1, Z0   \
	VPDPBUSD  64(R13), Z2, Z5  \
	VPDPBUSD  128(R13), Z6, Z0 \
	VPDPBUSD  192(R13), Z7, Z5 \
	LFINISH(shift)             \
	NEXTG(116)                 \
	JNE group                  \
	ROW_END                    \
	JNE row                    \
	VZEROUPPER                 \
	RET

// func gemvIQ2(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
// (IQ2_XXS, IQ2_XS and IQ2_S: one packed layout)
TEXT ·gemvIQ2(SB), NOSPLIT, $0-64
	IQ_LOAD_ARGS
	VBROADCASTI32X4 ·iq2LUT(SB), Z24
	GRID2_BODY(6)

// func gemvIQ1(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
// (IQ1_S and IQ1_M)
TEXT ·gemvIQ1(SB), NOSPLIT, $0-64
	IQ_LOAD_ARGS
	VBROADCASTI32X4 ·iq1LUT(SB), Z24
	GRID2_BODY(4)

// GRID3_BODY: IQ3_* (groups of 148 bytes: nibbles, ls at 128, d at 144; offset 64).
#define GRID3_BODY \
row:                          \
	ROW_START                  \
group:                        \
	VMOVDQU64 (R12), Z1        \
	VMOVDQU64 64(R12), Z6      \
	LSCALE(128, 144)           \
	PREFETCH_LINES_3           \
	VPXORD    Z0, Z0, Z0       \
	VPXORD    Z5, Z5, Z5       \
	VPSRLW    $4, Z1, Z2       \
	VPSRLW    $4, Z6, Z7       \
	VPANDD    Z27, Z1, Z1      \
	VPANDD    Z27, Z2, Z2      \
	VPANDD    Z27, Z6, Z6      \
	VPANDD    Z27, Z7, Z7      \
	VPSHUFB   Z1, Z24, Z1      \
	VPSHUFB   Z2, Z24, Z2      \
	VPSHUFB   Z6, Z24, Z6      \
	VPSHUFB   Z7, Z24, Z7      \
	VPDPBUSD  0(R13), Z1, Z0   \
	VPDPBUSD  64(R13), Z2, Z5  \
	VPDPBUSD  128(R13), Z6, Z0 \
	VPDPBUSD  192(R13), Z7, Z5 \
	LFINISH(6)                 \
	NEXTG(148)                 \
	JNE group                  \
	ROW_END                    \
	JNE row                    \
	VZEROUPPER                 \
	RET

// func gemvIQ3_XXS(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvIQ3_XXS(SB), NOSPLIT, $0-64
	IQ_LOAD_ARGS
	VBROADCASTI32X4 ·iq3XXSLUT(SB), Z24
	GRID3_BODY

// func gemvIQ3_S(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvIQ3_S(SB), NOSPLIT, $0-64
	IQ_LOAD_ARGS
	VBROADCASTI32X4 ·iq3SLUT(SB), Z24
	GRID3_BODY

// TERN_BODY: TQ1_0, TQ2_0 (groups of 66 bytes: crumbs, fp16 d at 64): the trits are the
// unsigned bytes; the offset 1 is removed with the Q8_K sums, there is no lane scale.
#define TERN_BODY \
row:                          \
	ROW_START                  \
group:                        \
	VMOVDQU64 (R12), Z16       \
	VPBROADCASTW 64(R12), X11  \
	VCVTPH2PS X11, X11         \
	VMULSS    64(R14), X11, X11 \
	VBROADCASTSS X11, Z11      \
	PF2                        \
	VPXORD    Z0, Z0, Z0       \
	VPXORD    Z5, Z5, Z5       \
	VPANDD    Z31, Z16, Z1     \
	CRUMB(2, Z2)               \
	CRUMB(4, Z6)               \
	CRUMB(6, Z7)               \
	VPDPBUSD  0(R13), Z1, Z0   \
	VPDPBUSD  64(R13), Z2, Z5  \
	VPDPBUSD  128(R13), Z6, Z0 \
	VPDPBUSD  192(R13), Z7, Z5 \
	VPADDD    Z5, Z0, Z0       \
	VPSUBD    (R14), Z0, Z0    \
	VCVTDQ2PS Z0, Z0           \
	VFMADD231PS Z11, Z0, Z30   \
	NEXTG(66)                  \
	JNE group                  \
	ROW_END                    \
	JNE row                    \
	VZEROUPPER                 \
	RET

// func gemvTQ(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
// (TQ1_0 and TQ2_0)
TEXT ·gemvTQ(SB), NOSPLIT, $0-64
	IQ_LOAD_ARGS
	TERN_BODY
