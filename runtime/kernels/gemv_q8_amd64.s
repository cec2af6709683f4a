//go:build amd64 && !purego

#include "textflag.h"
#include "hsum_amd64.h"
#include "gemv_prefetch_amd64.h"

// Integer GEMV kernels (AVX-512 BW + VNNI) over the interleaved layouts of pack.go: per group
// of 16 lanes, VPDPBUSD accumulates each lane's (weight code u8) × (activation s8) products in
// its own 32-bit lane; offsets are removed with the activation sums, then the lane sums are
// scaled in float32 and accumulated in Z30 (Z29 for K-quant mins).
//
// Arguments (all kernels):
//   y      *float32 output, rows consecutive floats
//   w      *byte    first packed row; stride bytes between rows
//   rows   int
//   groups int      groups per row
//   act    *byte    interleaved activation codes of the token's first group
//   meta   *float32 the token's first 128-byte record (pack.go's ilRecord): Q8_0 16 scales d
//                   then 16 code sums; Q8_1 16 d then 16 s; Q8_K 16 sums of 16 codes then d
//   ntok   int      tokens in the activation batch: the next group of the same token is
//                   ntok groups (and records) further on
//
// Register use: DI y, SI row, DX stride, CX rows left, R8 groups, R9 act, R10 meta, R11 act
// step per group, R15 meta step per group; per row R12 w, R13 act, R14 meta, BX groups left;
// AX scratch.


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
	SHLQ $9, R11            \
	SHLQ $7, R15             \
	MOVL $0x0f0f0f0f, AX     \
	VPBROADCASTD AX, Z31     \
	MOVL $0x10101010, AX     \
	VPBROADCASTD AX, Z28     \
	MOVL $0x30303030, AX     \
	VPBROADCASTD AX, Z25

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

// NIB(c) loads nibble chunk c of the group into Z1 (low nibbles: step 2c) and Z2 (high: 2c+1).
#define NIB(c) \
	VMOVDQU64 ((c)*64)(R12), Z1 \
	VPSRLW    $4, Z1, Z2      \
	VPANDD    Z31, Z1, Z1     \
	VPANDD    Z31, Z2, Z2

// HI5(s, off, reg) adds 16 to the bytes of reg whose bit is set in the 64-bit mask at off+8s.
#define HI5(s, off, reg) \
	KMOVQ (off+8*(s))(R12), K1 \
	VPADDB Z28, reg, K1, reg

// DOT2(c) accumulates steps 2c, 2c+1 from Z1, Z2 into Z0, Z5.
#define DOT2(c) \
	VPDPBUSD (2*(c)*64)(R13), Z1, Z0 \
	VPDPBUSD ((2*(c)+1)*64)(R13), Z2, Z5

// IQ4(reg) maps codes 0..15 to IQ4_NL's values + 128 (table in Z24).
#define IQ4(reg) VPSHUFB reg, Z24, reg

// DSCALE(doff): Z4 = d_w (fp16 at doff) · d_a, computed at the start of a group so that its
// latency hides behind the dot products.
#define DSCALE(doff) \
	VCVTPH2PS doff(R12), Z4 \
	VMULPS    (R14), Z4, Z4

// FINISH32(shift) turns the lane sums of Z0+Z5 into floats: subtracts (Σa)<<shift (the code
// offset times the record's block sums) and accumulates float(sum)·Z4 into Z30.
#define FINISH32(shift) \
	VPADDD      Z5, Z0, Z0       \
	VMOVDQU32   64(R14), Z3      \
	VPSLLD      $shift, Z3, Z3   \
	VPSUBD      Z3, Z0, Z0       \
	VCVTDQ2PS   Z0, Z0           \
	VFMADD231PS Z4, Z0, Z30

#define FINISH32_NOOFF \
	VPADDD      Z5, Z0, Z0       \
	VCVTDQ2PS   Z0, Z0           \
	VFMADD231PS Z4, Z0, Z30

// MIN32(moff) adds m_w (fp16 at moff) · s_a (after the group's 16 scales) into Z30.
#define MIN32(moff) \
	VCVTPH2PS   moff(R12), Z4 \
	VFMADD231PS 64(R14), Z4, Z30

#define NEXT32(gbytes) \
	ADDQ $gbytes, R12 \
	ADDQ R11, R13     \
	ADDQ R15, R14     \
	DECQ BX

// func gemvQ4_0(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ4_0(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	DSCALE(256)
	PREFETCH_LINES_5
	NIB(0)
	DOT2(0)
	NIB(1)
	DOT2(1)
	NIB(2)
	DOT2(2)
	NIB(3)
	DOT2(3)
	FINISH32(3)
	NEXT32(288)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// func gemvIQ4_NL(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvIQ4_NL(SB), NOSPLIT, $0-64
	LOAD_ARGS
	VBROADCASTI32X4 ·iq4nlPlus128(SB), Z24
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	DSCALE(256)
	PREFETCH_LINES_5
	NIB(0)
	IQ4(Z1)
	IQ4(Z2)
	DOT2(0)
	NIB(1)
	IQ4(Z1)
	IQ4(Z2)
	DOT2(1)
	NIB(2)
	IQ4(Z1)
	IQ4(Z2)
	DOT2(2)
	NIB(3)
	IQ4(Z1)
	IQ4(Z2)
	DOT2(3)
	FINISH32(7)
	NEXT32(288)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// func gemvQ4_1(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ4_1(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	DSCALE(256)
	PREFETCH_LINES_5
	NIB(0)
	DOT2(0)
	NIB(1)
	DOT2(1)
	NIB(2)
	DOT2(2)
	NIB(3)
	DOT2(3)
	FINISH32_NOOFF
	MIN32(288)
	NEXT32(320)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// Q5 chunk: nibbles plus the fifth bits (masks at 256 + 8·step).
#define NIB5(c) \
	NIB(c)              \
	HI5(2*c, 256, Z1)   \
	HI5(2*c+1, 256, Z2)

// func gemvQ5_0(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ5_0(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	DSCALE(320)
	PREFETCH_LINES_6
	NIB5(0)
	DOT2(0)
	NIB5(1)
	DOT2(1)
	NIB5(2)
	DOT2(2)
	NIB5(3)
	DOT2(3)
	FINISH32(4)
	NEXT32(352)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// func gemvQ5_1(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ5_1(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	DSCALE(320)
	PREFETCH_LINES_6
	NIB5(0)
	DOT2(0)
	NIB5(1)
	DOT2(1)
	NIB5(2)
	DOT2(2)
	NIB5(3)
	DOT2(3)
	FINISH32_NOOFF
	MIN32(352)
	NEXT32(384)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET

// Q8 step pair: weights (q+128) at steps 2c, 2c+1.
#define W8(c) \
	VMOVDQU64 (2*(c)*64)(R12), Z1     \
	VMOVDQU64 ((2*(c)+1)*64)(R12), Z2 \
	DOT2(c)

// func gemvQ8_0(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)
TEXT ·gemvQ8_0(SB), NOSPLIT, $0-64
	LOAD_ARGS
row:
	ROW_START
group:
	VPXORD Z0, Z0, Z0
	VPXORD Z5, Z5, Z5
	DSCALE(512)
	PREFETCH_LINES_9
	W8(0)
	W8(1)
	W8(2)
	W8(3)
	FINISH32(7)
	NEXT32(544)
	JNE group
	ROW_END
	JNE row
	VZEROUPPER
	RET
