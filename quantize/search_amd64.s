//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"
#include "funcdata.h"

// AVX-512 kernels of the K-quant scale searches (see search_amd64.go). Every lane performs the
// float32 operations of one scalar search of qkx.go / qx.go in the same order; products and
// sums are separate VMULPS / VADDPS (no FMA). nearest_int is ggml's magic-number rounding:
// (bits(v + 12582912) & 0x7fffff) − 0x400000, on integers, then clamped with VPMAXSD/VPMINSD.

// hiOne: 0 in lanes 0..7, 1 in lanes 8..15 (trial t in the low half, t+1 in the high half).
DATA hiOne<>+0(SB)/8, $0
DATA hiOne<>+8(SB)/8, $0
DATA hiOne<>+16(SB)/8, $0
DATA hiOne<>+24(SB)/8, $0
DATA hiOne<>+32(SB)/8, $0x0000000100000001
DATA hiOne<>+40(SB)/8, $0x0000000100000001
DATA hiOne<>+48(SB)/8, $0x0000000100000001
DATA hiOne<>+56(SB)/8, $0x0000000100000001
GLOBL hiOne<>(SB), RODATA|NOPTR, $64

// iota8: 0, 1, …, 7.
DATA iota8<>+0(SB)/8, $0x0000000100000000
DATA iota8<>+8(SB)/8, $0x0000000300000002
DATA iota8<>+16(SB)/8, $0x0000000500000004
DATA iota8<>+24(SB)/8, $0x0000000700000006
GLOBL iota8<>(SB), RODATA|NOPTR, $32

// NEAREST_CLAMP turns the float32 lanes of v into ggml's nearest_int(v), clamped to [lo, hi],
// as int32 lanes: magic 12582912.0 in M, 0x7fffff in K, 0x400000 in H.
#define NEAREST_CLAMP(v, M, K, H, lo, hi) \
	VADDPS  M, v, v  \
	VPANDD  K, v, v  \
	VPSUBD  H, v, v  \
	VPMAXSD lo, v, v \
	VPMINSD hi, v, v

// func qkxKernelAVX512(st *qkxState, x, w *float32, L *uint8, k int)
//
// The k ≤ 8 sub-blocks of st.n elements at x (weights at w) are the lanes. The frame holds
// x and w transposed (xT, wT: element i of every sub-block in one vector, at 0(SP) and
// 1024(SP)) and the levels of the two trials of a pass (lT, 16 lanes, at 2048(SP)).
//
// Register use in the pass loop:
//   Z0 iscale (per lane), Z1 min in force (low and high halves alike), Z2..Z4 Σw·l, Σ(w·l)·l,
//   Σ(w·l)·x, Z5 magic, Z6 0x7fffff, Z7 0x400000, Z8 nmax (int), Z9 zero, Z16 fitted scale,
//   Z17 fitted min, Z18 error, Z20 rdelta, Z21 rmin, Z22 float32(nmax), Z23 |·| mask,
//   Z25 ntrials (int), Z26 one (int), Z27 two (int), K7 searches that run (max != min),
//   DI state, CX n, R9 1 during the first pass (the starting point), else 0.
TEXT ·qkxKernelAVX512(SB), $4096-40
	NO_LOCAL_POINTERS
	MOVQ st+0(FP), DI
	MOVQ x+8(FP), R11
	MOVQ w+16(FP), R12
	MOVQ L+24(FP), R13
	MOVQ k+32(FP), R14
	MOVQ qkxState_n(DI), CX

	// Transpose x and w into the frame with gathers: lane s reads element s·n + i; lanes
	// s ≥ k are zero (max == min: they stay out of the search).
	MOVQ         $1, R15
	MOVQ         R14, CX
	SHLQ         CX, R15
	DECQ         R15                   // lanes < k
	MOVQ         qkxState_n(DI), CX
	VPBROADCASTD CX, Y24
	VPMULLD      iota8<>(SB), Y24, Y24 // s·n
	LEAQ         0(SP), SI
	LEAQ         1024(SP), R8
	MOVQ         R11, AX
	MOVQ         R12, BX
	MOVQ         CX, DX

transpose:
	KMOVW      R15, K1
	VPXORD     Y10, Y10, Y10
	VGATHERDPS (AX)(Y24*4), K1, Y10
	VMOVUPS    Y10, (SI)
	KMOVW      R15, K1
	VPXORD     Y11, Y11, Y11
	VGATHERDPS (BX)(Y24*4), K1, Y11
	VMOVUPS    Y11, (R8)
	ADDQ       $4, AX
	ADDQ       $4, BX
	ADDQ       $32, SI
	ADDQ       $32, R8
	DECQ       DX
	JNZ        transpose

	// Constants.
	MOVL         $0x4B400000, AX // 12582912.0
	VPBROADCASTD AX, Z5
	MOVL         $0x007fffff, AX
	VPBROADCASTD AX, Z6
	MOVL         $0x00400000, AX
	VPBROADCASTD AX, Z7
	VPBROADCASTD qkxState_nmax(DI), Z8
	VPXORD       Z9, Z9, Z9
	VBROADCASTSS qkxState_rdelta(DI), Z20
	VBROADCASTSS qkxState_rmin(DI), Z21
	VCVTDQ2PS    Z8, Z22
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z23
	VPBROADCASTD qkxState_ntrials(DI), Z25
	MOVL         $1, AX
	VPBROADCASTD AX, Z26
	MOVL         $2, AX
	VPBROADCASTD AX, Z27

	// min, max, Σw and Σw·x of each sub-block, in element order (8 lanes).
	LEAQ    0(SP), SI
	LEAQ    1024(SP), R8
	VMOVUPS (SI), Y0           // min = x[0]
	VMOVAPS Y0, Y1             // max = x[0]
	VMOVUPS (R8), Y2           // sum_w = w[0]
	VMULPS  Y0, Y2, Y3         // sum_x = sum_w·x[0]
	MOVQ    CX, BX
	DECQ    BX
	JZ      statsdone

stats:
	ADDQ    $32, SI
	ADDQ    $32, R8
	VMOVUPS (SI), Y10
	VMOVUPS (R8), Y11
	VMINPS  Y0, Y10, Y0        // x < min ? x : min
	VMAXPS  Y1, Y10, Y1        // x > max ? x : max
	VADDPS  Y11, Y2, Y2
	VMULPS  Y10, Y11, Y12
	VADDPS  Y12, Y3, Y3
	DECQ    BX
	JNZ     stats

statsdone:
	VMINPS  Y0, Y9, Y0         // 0 < min ? 0 : min  (if min > 0: min = 0)
	VCMPPS  $4, Y0, Y1, K7     // max != min (NaN: true): the search runs
	VMOVUPS Y0, qkxState_minv(DI)
	VMOVUPS Y1, qkxState_maxv(DI)
	VMOVUPS Y2, qkxState_sumW(DI)
	VMOVUPS Y3, qkxState_sumX(DI)

	// t = 0 for the searches that run, ntrials (done) for the others.
	VMOVDQU32 Y25, Y10
	VPXORD    Y10, Y10, K7, Y10
	VMOVDQU32 Y10, qkxState_t(DI)

	MOVQ $1, R9

pass:
	// Lane inputs: low half trial t, high half trial t+1, both with the min in force.
	VBROADCASTF32X8 qkxState_minv(DI), Z1
	VBROADCASTF32X8 qkxState_maxv(DI), Z10
	VSUBPS          Z1, Z10, Z10            // max − min
	TESTQ           R9, R9
	JZ              trialnum
	VMOVAPS         Z22, Z11                // the starting point: nmax/(max − min)
	JMP             havenum

trialnum:
	VBROADCASTI32X8 qkxState_t(DI), Z11
	VPADDD          hiOne<>(SB), Z11, Z11
	VCVTDQ2PS       Z11, Z11                // float32(is)
	VMULPS          Z20, Z11, Z11           // rdelta·is
	VADDPS          Z21, Z11, Z11           // rmin + rdelta·is
	VADDPS          Z22, Z11, Z11           // … + nmax

havenum:
	VDIVPS Z10, Z11, Z0                     // iscale = num/(max − min)

	// Pass A: levels l = clamp(nearest_int(iscale·(x − min)), 0, nmax), stored as floats, and
	// the sums Σ w·l, Σ (w·l)·l, Σ (w·l)·x.
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	LEAQ   0(SP), SI
	LEAQ   1024(SP), R8
	LEAQ   2048(SP), R10
	MOVQ   CX, BX

passA:
	VBROADCASTF32X8 (SI), Z10               // x
	VBROADCASTF32X8 (R8), Z11               // w
	VSUBPS          Z1, Z10, Z12            // x − min
	VMULPS          Z0, Z12, Z12            // iscale·(x − min)
	NEAREST_CLAMP(Z12, Z5, Z6, Z7, Z9, Z8)
	VCVTDQ2PS       Z12, Z12                // l
	VMOVUPS         Z12, (R10)
	VMULPS          Z12, Z11, Z13           // w·l
	VADDPS          Z13, Z2, Z2
	VMULPS          Z12, Z13, Z14           // (w·l)·l
	VADDPS          Z14, Z3, Z3
	VMULPS          Z10, Z13, Z15           // (w·l)·x
	VADDPS          Z15, Z4, Z4
	ADDQ            $32, SI
	ADDQ            $32, R8
	ADDQ            $64, R10
	DECQ            BX
	JNZ             passA

	TESTQ R9, R9
	JZ    fit

	// The starting point: scale 1/iscale, min as is; it always competes.
	MOVL         $0x3f800000, AX            // 1.0
	VPBROADCASTD AX, Z16
	VDIVPS       Z0, Z16, Z16
	VMOVAPS      Z1, Z17
	KXNORW       K1, K1, K1
	JMP          passB

fit:
	// D = sum_w·sum_l2 − sum_l·sum_l; fit when D > 0.
	VBROADCASTF32X8 qkxState_sumW(DI), Z18
	VBROADCASTF32X8 qkxState_sumX(DI), Z19
	VMULPS          Z3, Z18, Z10            // sum_w·sum_l2
	VMULPS          Z2, Z2, Z11             // sum_l·sum_l
	VSUBPS          Z11, Z10, Z10           // D
	VCMPPS          $0x1e, Z9, Z10, K1      // D > 0
	// scale = (sum_w·sum_xl − sum_x·sum_l)/D
	VMULPS          Z4, Z18, Z11
	VMULPS          Z2, Z19, Z12
	VSUBPS          Z12, Z11, Z11
	VDIVPS          Z10, Z11, Z16
	// min = (sum_l2·sum_x − sum_l·sum_xl)/D
	VMULPS          Z19, Z3, Z11
	VMULPS          Z4, Z2, Z12
	VSUBPS          Z12, Z11, Z11
	VDIVPS          Z10, Z11, Z17
	// if min > 0: min = 0, scale = sum_xl/sum_l2
	VCMPPS          $0x1e, Z9, Z17, K2
	VDIVPS          Z3, Z4, K2, Z16
	VMOVAPS         Z9, K2, Z17

passB:
	// Pass B: error Σ w·(scale·l + min − x)² (or Σ w·|…|) in element order.
	VPXORD Z18, Z18, Z18
	LEAQ   0(SP), SI
	LEAQ   1024(SP), R8
	LEAQ   2048(SP), R10
	MOVQ   CX, BX
	CMPL   qkxState_useMad(DI), $0
	JNE    passBmad

passBsq:
	VMOVUPS         (R10), Z12              // l
	VBROADCASTF32X8 (SI), Z10               // x
	VBROADCASTF32X8 (R8), Z11               // w
	VMULPS          Z12, Z16, Z13           // scale·l
	VADDPS          Z17, Z13, Z13           // + min
	VSUBPS          Z10, Z13, Z13           // − x
	VMULPS          Z13, Z13, Z13           // diff²
	VMULPS          Z13, Z11, Z13           // w·diff²
	VADDPS          Z13, Z18, Z18
	ADDQ            $32, SI
	ADDQ            $32, R8
	ADDQ            $64, R10
	DECQ            BX
	JNZ             passBsq
	JMP             decide

passBmad:
	VMOVUPS         (R10), Z12
	VBROADCASTF32X8 (SI), Z10
	VBROADCASTF32X8 (R8), Z11
	VMULPS          Z12, Z16, Z13
	VADDPS          Z17, Z13, Z13
	VSUBPS          Z10, Z13, Z13
	VPANDD          Z23, Z13, Z13           // |diff|
	VMULPS          Z13, Z11, Z13
	VADDPS          Z13, Z18, Z18
	ADDQ            $32, SI
	ADDQ            $32, R8
	ADDQ            $64, R10
	DECQ            BX
	JNZ             passBmad

decide:
	TESTQ R9, R9
	JZ    choose

	// The starting point is the best so far.
	VMOVUPS Y18, qkxState_best(DI)
	VMOVUPS Y16, qkxState_scale(DI)
	VMOVUPS Y0, qkxState_kIscale(DI)
	VMOVUPS Y1, qkxState_kMin(DI)
	XORQ    R9, R9
	JMP     check

choose:
	// Trial t (low half) is kept when it runs, fits and its error is strictly below the best.
	// Otherwise trial t+1 (high half), computed with the same min, is decided the same way.
	VMOVDQU32      qkxState_t(DI), Y24
	VPCMPD         $1, Y25, Y24, K3         // t < ntrials
	VPADDD         Y26, Y24, Y28
	VPCMPD         $1, Y25, Y28, K4         // t+1 < ntrials
	KSHIFTRW       $8, K1, K5               // D > 0 of trial t+1
	KANDW          K1, K3, K3
	KANDW          K5, K4, K4
	VMOVUPS        qkxState_best(DI), Y29
	VCMPPS         $0x11, Y29, Y18, K2      // error(t) < best
	KANDW          K2, K3, K3               // K3: keep trial t
	VEXTRACTF32X8  $1, Z18, Y28             // error(t+1)
	VCMPPS         $0x11, Y29, Y28, K2      // error(t+1) < best
	KANDW          K2, K4, K4
	KANDNW         K4, K3, K4               // K4: keep trial t+1 (trial t not kept)
	KORW           K3, K4, K2               // K2: keep either

	VMOVUPS        Y18, K3, Y29
	VMOVUPS        Y28, K4, Y29
	VMOVUPS        Y29, qkxState_best(DI)

	VMOVUPS        qkxState_scale(DI), Y29
	VEXTRACTF32X8  $1, Z16, Y28
	VMOVUPS        Y16, K3, Y29
	VMOVUPS        Y28, K4, Y29
	VMOVUPS        Y29, qkxState_scale(DI)

	VMOVUPS        qkxState_kIscale(DI), Y29
	VEXTRACTF32X8  $1, Z0, Y28
	VMOVUPS        Y0, K3, Y29
	VMOVUPS        Y28, K4, Y29
	VMOVUPS        Y29, qkxState_kIscale(DI)

	VMOVUPS        qkxState_kMin(DI), Y29   // the min that produced the kept levels
	VMOVUPS        Y1, K2, Y29
	VMOVUPS        Y29, qkxState_kMin(DI)

	VMOVAPS        Y1, Y29                  // the new min in force
	VEXTRACTF32X8  $1, Z17, Y28
	VMOVUPS        Y17, K3, Y29
	VMOVUPS        Y28, K4, Y29
	VMOVUPS        Y29, qkxState_minv(DI)

	VPADDD         Y27, Y24, Y24            // t += 2, or 1 when trial t was kept
	VPSUBD         Y26, Y24, K3, Y24
	VMOVDQU32      Y24, qkxState_t(DI)

check:
	VMOVDQU32 qkxState_t(DI), Y24
	VPCMPD    $1, Y25, Y24, K3
	KTESTW    K3, K3
	JNZ       pass

	// Final levels of the kept trial, row by row (sub-block s at x + 4·s·n, L + s·n):
	// clamp(nearest_int(kIscale·(x − kMin)), 0, nmax); 0 for the searches that did not run.
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVW AX, K5                   // elements 0..15 of a row
	SHRQ  $16, AX
	KMOVW AX, K6                   // elements 16..31
	KMOVW K7, R9
	MOVQ  R11, SI
	XORQ  BX, BX

final:
	BTL          BX, R9
	JCC          deadrow
	VBROADCASTSS qkxState_kIscale(DI)(BX*4), Z0
	VBROADCASTSS qkxState_kMin(DI)(BX*4), Z1
	VMOVUPS.Z    (SI), K5, Z10
	VMOVUPS.Z    64(SI), K6, Z11
	VSUBPS       Z1, Z10, Z10
	VSUBPS       Z1, Z11, Z11
	VMULPS       Z0, Z10, Z10
	VMULPS       Z0, Z11, Z11
	NEAREST_CLAMP(Z10, Z5, Z6, Z7, Z9, Z8)
	NEAREST_CLAMP(Z11, Z5, Z6, Z7, Z9, Z8)
	VPMOVDB      Z10, X10
	VPMOVDB      Z11, X11
	JMP          storerow

deadrow:
	VPXORD X10, X10, X10
	VPXORD X11, X11, X11

storerow:
	VMOVDQU8 X10, K5, (R13)
	VMOVDQU8 X11, K6, 16(R13)
	LEAQ     (SI)(CX*4), SI
	ADDQ     CX, R13
	INCQ     BX
	CMPQ     BX, R14
	JLT      final

	// scale (0 for the searches that did not run) and −min.
	VMOVUPS   qkxState_scale(DI), Y2
	VMOVUPS.Z Y2, K7, Y2
	VMOVUPS   Y2, qkxState_scale(DI)
	VMOVUPS   qkxState_minv(DI), Y3
	MOVL      $0x80000000, AX
	VPBROADCASTD AX, Y4
	VPXORD    Y4, Y3, Y3
	VMOVUPS   Y3, qkxState_mins(DI)
	VZEROUPPER
	RET

// func qxKernelAVX512(st *qxState, x, qw *float32, L *int8, n, nmax int, numer *[24]float32) float32
//
// make_qx_quants (rmse_type 1) for n ≤ 32 elements: Z0/Z1 hold x[0:16]/x[16:32] (K1/K2 mark
// the n elements); the 19 trials are lanes 0..15 of Z registers and 16..18 of Y registers.
TEXT ·qxKernelAVX512(SB), NOSPLIT, $0-60
	MOVQ st+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ qw+16(FP), R8
	MOVQ L+24(FP), R11
	MOVQ n+32(FP), CX
	MOVQ nmax+40(FP), R12
	MOVQ numer+48(FP), R13

	// K1, K2: the first n elements.
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVW AX, K1
	SHRQ  $16, AX
	KMOVW AX, K2
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z 64(SI), K2, Z1

	// amax = max |x| (NaN ignored, as "ax > amax" ignores it); max = the first x with
	// |x| = amax.
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	VPXORD       Z30, Z30, Z30
	VPANDD       Z31, Z0, Z2
	VPANDD       Z31, Z1, Z3
	VMAXPS       Z30, Z2, Z4       // |x| > 0 ? |x| : 0
	VMAXPS       Z30, Z3, Z5
	VMAXPS       Z5, Z4, Z4
	VSHUFF32X4   $0x4e, Z4, Z4, Z5
	VMAXPS       Z5, Z4, Z4
	VSHUFF32X4   $0xb1, Z4, Z4, Z5
	VMAXPS       Z5, Z4, Z4
	VPERMILPS    $0x4e, Z4, Z5
	VMAXPS       Z5, Z4, Z4
	VPERMILPS    $0xb1, Z4, Z5
	VMAXPS       Z5, Z4, Z4        // amax in every lane
	VBROADCASTSS qxState_eps(DI), X6
	VCMPPS       $0x11, X6, X4, K3 // amax < GROUP_MAX_EPS
	KMOVW        K3, AX
	TESTL        $1, AX
	JNZ          allzero
	VCMPPS       $0, Z4, Z2, K3    // |x| == amax
	VCMPPS       $0, Z4, Z3, K4
	KMOVW        K3, AX
	KMOVW        K4, BX
	SHLQ         $16, BX
	ORQ          BX, AX
	BSFQ         AX, AX
	VBROADCASTSS (SI)(AX*4), Z7    // max

	// iscale of each trial = numer/max.
	VMOVUPS (R13), Z8
	VDIVPS  Z7, Z8, Z8
	VMOVUPS Z8, qxState_iscale(DI)
	VMOVUPS 64(R13), Y9
	VDIVPS  Y7, Y9, Y9
	VMOVUPS Y9, qxState_iscale+64(DI)

	// w = qw, or x²; wx = w·x.
	TESTQ     R8, R8
	JZ        wsquare
	VMOVUPS.Z (R8), K1, Z10
	VMOVUPS.Z 64(R8), K2, Z11
	JMP       haveweights

wsquare:
	VMULPS Z0, Z0, Z10
	VMULPS Z1, Z1, Z11

haveweights:
	VMOVUPS Z10, qxState_w(DI)
	VMOVUPS Z11, qxState_w+64(DI)
	VMULPS  Z0, Z10, Z12
	VMULPS  Z1, Z11, Z13
	VMOVUPS Z12, qxState_wx(DI)
	VMOVUPS Z13, qxState_wx+64(DI)

	// Constants: magic, 0x7fffff, 0x400000, −nmax, nmax−1.
	MOVL         $0x4B400000, AX
	VPBROADCASTD AX, Z5
	MOVL         $0x007fffff, AX
	VPBROADCASTD AX, Z6
	MOVL         $0x00400000, AX
	VPBROADCASTD AX, Z7
	VPBROADCASTD R12, Z29          // nmax
	VPSUBD       Z29, Z30, Z27     // −nmax
	VPTERNLOGD   $0xff, Z26, Z26, Z26
	VPADDD       Z26, Z29, Z28     // nmax − 1

	// Sums of every trial over the elements, in element order.
	VPXORD Z10, Z10, Z10 // Σ wx·l, trials 0..15
	VPXORD Z11, Z11, Z11 // Σ (w·l)·l
	VPXORD Y12, Y12, Y12 // trials 16..18
	VPXORD Y13, Y13, Y13
	LEAQ   qxState_w(DI), R8
	LEAQ   qxState_wx(DI), R10
	MOVQ   SI, R9
	MOVQ   CX, BX

qxloop:
	VBROADCASTSS (R9), Z14  // x
	VBROADCASTSS (R8), Z15  // w
	VBROADCASTSS (R10), Z16 // w·x

	VMULPS    Z14, Z8, Z17
	NEAREST_CLAMP(Z17, Z5, Z6, Z7, Z27, Z28)
	VCVTDQ2PS Z17, Z17      // l
	VMULPS    Z17, Z16, Z18 // wx·l
	VADDPS    Z18, Z10, Z10
	VMULPS    Z17, Z15, Z19 // w·l
	VMULPS    Z17, Z19, Z19 // (w·l)·l
	VADDPS    Z19, Z11, Z11

	VMULPS    Y14, Y9, Y20
	NEAREST_CLAMP(Y20, Y5, Y6, Y7, Y27, Y28)
	VCVTDQ2PS Y20, Y20
	VMULPS    Y20, Y16, Y21
	VADDPS    Y21, Y12, Y12
	VMULPS    Y20, Y15, Y22
	VMULPS    Y20, Y22, Y22
	VADDPS    Y22, Y13, Y13

	ADDQ $4, R9
	ADDQ $4, R8
	ADDQ $4, R10
	DECQ BX
	JNZ  qxloop

	VMOVUPS Z10, qxState_sumlx(DI)
	VMOVUPS Y12, qxState_sumlx+64(DI)
	VMOVUPS Z11, qxState_suml2(DI)
	VMOVUPS Y13, qxState_suml2+64(DI)

	// ggml's choice: trial 9 (is = 0) first, then 0..8 and 10..18 (is = −9..−1, 1..9).
	// X20 scale, X21 best, DX the best trial (Z0..Z7 hold on to x and the constants).
	VMOVSS  qxState_sumlx+36(DI), X22
	VMOVSS  qxState_suml2+36(DI), X23
	VXORPS  X20, X20, X20
	VCMPSS  $4, X30, X23, K3        // suml2 != 0
	VDIVSS  X23, X22, K3, X20         // scale = sumlx/suml2
	VMULSS  X22, X20, X21             // best = scale·sumlx
	MOVL    $9, DX
	XORL    BX, BX

choice:
	CMPL    BX, $9
	JEQ     nexttrial
	VMOVSS  qxState_sumlx(DI)(BX*4), X22
	VMOVSS  qxState_suml2(DI)(BX*4), X23
	VCMPSS  $0x1e, X30, X23, K3     // suml2 > 0
	VMULSS  X22, X22, X24             // sumlx·sumlx
	VMULSS  X23, X21, X25             // best·suml2
	VCMPSS  $0x1e, X25, X24, K4      // sumlx² > best·suml2
	KANDW   K3, K4, K4
	KMOVW   K4, AX
	TESTL   AX, AX
	JZ      nexttrial
	VDIVSS  X23, X22, X20             // scale = sumlx/suml2
	VMULSS  X22, X20, X21             // best = scale·sumlx
	MOVL    BX, DX

nexttrial:
	INCL BX
	CMPL BX, $19
	JLT  choice

	// L = clamp(nearest_int(iscale·x), −nmax, nmax−1) + nmax with the chosen trial's iscale.
	VBROADCASTSS qxState_iscale(DI)(DX*4), Z14
	VMULPS       Z14, Z0, Z15
	NEAREST_CLAMP(Z15, Z5, Z6, Z7, Z27, Z28)
	VPADDD       Z29, Z15, Z15
	VPMOVDB      Z15, X15
	VMOVDQU8     X15, K1, (R11)
	VMULPS       Z14, Z1, Z16
	NEAREST_CLAMP(Z16, Z5, Z6, Z7, Z27, Z28)
	VPADDD       Z29, Z16, Z16
	VPMOVDB      Z16, X16
	VMOVDQU8     X16, K2, 16(R11)
	VMOVSS       X20, ret+56(FP)
	VZEROUPPER
	RET

allzero:
	VPXORD   X15, X15, X15
	VMOVDQU8 X15, K1, (R11)
	VMOVDQU8 X15, K2, 16(R11)
	MOVL     $0, ret+56(FP)
	VZEROUPPER
	RET
