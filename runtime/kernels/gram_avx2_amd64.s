//go:build amd64 && !purego

#include "textflag.h"

// Gram micro-kernel (AVX2 + FMA3) for AddGram: one sub-tile of 6 rows × 16 columns of h,
//
//	h[r·ldh + j] += float64(Σ_{t<k} a[lda·t + r]·b[t·ldb + j])   for r < rows, j < cols,
//
// the sum over t in float32, one FMA per t, in order from t = 0 (lane j of accumulator r is
// acc = fma(a, b, acc)): the operations of gramTile12x32 and gramTileGo, element by element.
// gramTileAVX2 runs four of them over one 12 × 32 tile of AddGram (lda = 12, ldb = 32). a is
// the broadcast side (6 values per token read in full, row stride lda elements), b the columns
// of x (row stride ldb elements; only the first cols are read), h float64 with row stride ldh
// elements. k ≥ 1, 1 ≤ rows ≤ 6, 1 ≤ cols ≤ 16.
//
// Shape: 6 × 16 (12 accumulators, 2 b loads and 6 broadcasts per token) measured 120 GFLOP/s
// per thread in cache (k = 256) on a Sapphire Rapids core at about 3.8 GHz, near the 32 flops
// per cycle of two 256-bit FMA ports; a 4 × 24 loop (3 loads, 4 broadcasts) 115, and it would
// not tile the 12 × 32 tiles. The token loop prefetches b 8 tokens ahead: 3 % faster in
// AddGram (c = 1024 and 3072, 512 tokens) than without.
//
// cols = 16 runs plain loads and stores; fewer columns run the same loop with the b loads
// (VMASKMOVPS) and the h updates (VMASKMOVPD) masked by ·gramMask16 (gramMask16<> below).
//
// Registers: Y0-Y11 the 12 accumulators (row r: Y(2r) columns 0-7, Y(2r+1) columns 8-15),
// Y12-Y13 the token's 16 b values, Y14-Y15 the broadcast a values; Y12-Y15 the epilogue.
//
// func gramTile6x16(h *float64, ldh int, a *float32, lda int, b *float32, ldb int, k int, rows int, cols int)

// gramMask16<>: 16 int32 −1, then 16 zeros; the 16 lanes from +4·(16 − cols) select cols columns.
DATA gramMask16<>+0x00(SB)/8, $0xffffffffffffffff
DATA gramMask16<>+0x08(SB)/8, $0xffffffffffffffff
DATA gramMask16<>+0x10(SB)/8, $0xffffffffffffffff
DATA gramMask16<>+0x18(SB)/8, $0xffffffffffffffff
DATA gramMask16<>+0x20(SB)/8, $0xffffffffffffffff
DATA gramMask16<>+0x28(SB)/8, $0xffffffffffffffff
DATA gramMask16<>+0x30(SB)/8, $0xffffffffffffffff
DATA gramMask16<>+0x38(SB)/8, $0xffffffffffffffff
DATA gramMask16<>+0x40(SB)/8, $0
DATA gramMask16<>+0x48(SB)/8, $0
DATA gramMask16<>+0x50(SB)/8, $0
DATA gramMask16<>+0x58(SB)/8, $0
DATA gramMask16<>+0x60(SB)/8, $0
DATA gramMask16<>+0x68(SB)/8, $0
DATA gramMask16<>+0x70(SB)/8, $0
DATA gramMask16<>+0x78(SB)/8, $0
GLOBL gramMask16<>(SB), RODATA|NOPTR, $128

// gramBits8<>: 1, 2, 4, …, 128 as int32 (bit q of a column mask to lane q).
DATA gramBits8<>+0x00(SB)/8, $0x0000000200000001
DATA gramBits8<>+0x08(SB)/8, $0x0000000800000004
DATA gramBits8<>+0x10(SB)/8, $0x0000002000000010
DATA gramBits8<>+0x18(SB)/8, $0x0000008000000040
GLOBL gramBits8<>(SB), RODATA|NOPTR, $32

// ROW(off, acc0, acc1, bc): acc0, acc1 += a[off bytes] · (Y12, Y13).
#define ROW(off, acc0, acc1, bc) \
	VBROADCASTSS off(SI), bc   \
	VFMADD231PS  Y12, bc, acc0 \
	VFMADD231PS  Y13, bc, acc1

#define TOKEN \
	ROW(0, Y0, Y1, Y14)   \
	ROW(4, Y2, Y3, Y15)   \
	ROW(8, Y4, Y5, Y14)   \
	ROW(12, Y6, Y7, Y15)  \
	ROW(16, Y8, Y9, Y14)  \
	ROW(20, Y10, Y11, Y15)

// ADD4(src, off): h[off bytes + 0..3] += float64(src's 4 floats) (src an X register).
#define ADD4(src, off) \
	VCVTPS2PD src, Y12        \
	VADDPD    off(R8), Y12, Y12 \
	VMOVUPD   Y12, off(R8)

// STORE_ROW(acc0, acc0x, acc1, acc1x): adds one row of accumulators to h at R8, then R8 += ldh.
#define STORE_ROW(acc0, acc0x, acc1, acc1x) \
	ADD4(acc0x, 0)                 \
	VEXTRACTF128 $1, acc0, X13     \
	ADD4(X13, 32)                  \
	ADD4(acc1x, 64)                \
	VEXTRACTF128 $1, acc1, X13     \
	ADD4(X13, 96)                  \
	ADDQ R9, R8

// MADD4(src, off, moff): ADD4 on the columns of the mask at moff(R11) (int32 lanes widened).
#define MADD4(src, off, moff) \
	VPMOVSXDQ  moff(R11), Y15      \
	VCVTPS2PD  src, Y12            \
	VMASKMOVPD off(R8), Y15, Y13   \
	VADDPD     Y13, Y12, Y12       \
	VMASKMOVPD Y12, Y15, off(R8)

#define MSTORE_ROW(acc0, acc0x, acc1, acc1x) \
	MADD4(acc0x, 0, 0)             \
	VEXTRACTF128 $1, acc0, X14     \
	MADD4(X14, 32, 16)             \
	MADD4(acc1x, 64, 32)           \
	VEXTRACTF128 $1, acc1, X14     \
	MADD4(X14, 96, 48)             \
	ADDQ R9, R8

TEXT ·gramTile6x16(SB), NOSPLIT, $0-72
	MOVQ h+0(FP), R8
	MOVQ ldh+8(FP), R9
	SHLQ $3, R9
	MOVQ a+16(FP), SI
	MOVQ lda+24(FP), BX
	SHLQ $2, BX
	MOVQ b+32(FP), DI
	MOVQ ldb+40(FP), DX
	SHLQ $2, DX
	MOVQ k+48(FP), CX
	MOVQ rows+56(FP), R10
	MOVQ cols+64(FP), AX

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

	CMPQ AX, $16
	JNE  masked

loop:
	PREFETCHT0 (DI)(DX*8) // b, 8 tokens ahead
	VMOVUPS    (DI), Y12
	VMOVUPS    32(DI), Y13
	TOKEN
	ADDQ       BX, SI
	ADDQ       DX, DI
	DECQ       CX
	JNZ        loop

	STORE_ROW(Y0, X0, Y1, X1)
	CMPQ R10, $1
	JLE  done
	STORE_ROW(Y2, X2, Y3, X3)
	CMPQ R10, $2
	JLE  done
	STORE_ROW(Y4, X4, Y5, X5)
	CMPQ R10, $3
	JLE  done
	STORE_ROW(Y6, X6, Y7, X7)
	CMPQ R10, $4
	JLE  done
	STORE_ROW(Y8, X8, Y9, X9)
	CMPQ R10, $5
	JLE  done
	STORE_ROW(Y10, X10, Y11, X11)

done:
	VZEROUPPER
	RET

masked:
	// R11 = the column mask: gramMask16<> + 4·(16 − cols).
	LEAQ gramMask16<>(SB), R11
	NEGQ AX
	LEAQ 64(R11)(AX*4), R11

mloop:
	VMOVUPS    (R11), Y12
	VMASKMOVPS (DI), Y12, Y12
	VMOVUPS    32(R11), Y13
	VMASKMOVPS 32(DI), Y13, Y13
	TOKEN
	ADDQ       BX, SI
	ADDQ       DX, DI
	DECQ       CX
	JNZ        mloop

	MSTORE_ROW(Y0, X0, Y1, X1)
	CMPQ R10, $1
	JLE  done
	MSTORE_ROW(Y2, X2, Y3, X3)
	CMPQ R10, $2
	JLE  done
	MSTORE_ROW(Y4, X4, Y5, X5)
	CMPQ R10, $3
	JLE  done
	MSTORE_ROW(Y6, X6, Y7, X7)
	CMPQ R10, $4
	JLE  done
	MSTORE_ROW(Y8, X8, Y9, X9)
	CMPQ R10, $5
	JLE  done
	MSTORE_ROW(Y10, X10, Y11, X11)
	JMP  done

// Packing for AddGram (AVX2): k rows of up to 32 floats from src (row stride lds elements) to
// dst (row stride ldd elements), dst[t·ldd + j] = src[t·lds + j] for the columns j of lmask and
// 0 for the other columns of smask; only the columns of smask are written (smask a superset of
// lmask, its bits from 0 to 8·nch − 1 at most, nch ≥ 1). k ≥ 1. The same as gramPack.
//
// Y8-Y11: the load masks of the four groups of 8 columns, Y12-Y15 the store masks.
//
// func gramPackAVX2Asm(dst *float32, ldd int, src *float32, lds int, k int, lmask, smask, nch int)

// MASK8(gpr, shift, dst): dst = lanes q of −1 where bit shift + q of gpr is set (AX, Y7 clobbered).
#define MASK8(gpr, shift, dst) \
	MOVL         gpr, AX   \
	SHRL         $shift, AX \
	VMOVD        AX, X7    \
	VPBROADCASTD X7, dst   \
	VPAND        Y6, dst, dst \
	VPCMPEQD     Y6, dst, dst

// PACK8(off, lm, sm): 8 columns at off bytes.
#define PACK8(off, lm, sm) \
	VMASKMOVPS off(SI), lm, Y0 \
	VMASKMOVPS Y0, sm, off(DI)

TEXT ·gramPackAVX2Asm(SB), NOSPLIT, $0-64
	MOVQ    dst+0(FP), DI
	MOVQ    ldd+8(FP), DX
	SHLQ    $2, DX
	MOVQ    src+16(FP), SI
	MOVQ    lds+24(FP), R8
	SHLQ    $2, R8
	MOVQ    k+32(FP), CX
	MOVQ    lmask+40(FP), BX
	MOVQ    smask+48(FP), R9
	MOVQ    nch+56(FP), R10
	VMOVDQU gramBits8<>(SB), Y6
	MASK8(BX, 0, Y8)
	MASK8(BX, 8, Y9)
	MASK8(BX, 16, Y10)
	MASK8(BX, 24, Y11)
	MASK8(R9, 0, Y12)
	MASK8(R9, 8, Y13)
	MASK8(R9, 16, Y14)
	MASK8(R9, 24, Y15)
	CMPQ    R10, $4
	JNE     partial
	CMPL    R9, $0xffffffff
	JNE     partial

full: // all 32 columns stored: plain stores
	VMASKMOVPS (SI), Y8, Y0
	VMASKMOVPS 32(SI), Y9, Y1
	VMASKMOVPS 64(SI), Y10, Y2
	VMASKMOVPS 96(SI), Y11, Y3
	VMOVUPS    Y0, (DI)
	VMOVUPS    Y1, 32(DI)
	VMOVUPS    Y2, 64(DI)
	VMOVUPS    Y3, 96(DI)
	ADDQ       R8, SI
	ADDQ       DX, DI
	DECQ       CX
	JNZ        full
	VZEROUPPER
	RET

partial: // the first nch groups of 8 columns, masked stores
	PACK8(0, Y8, Y12)
	CMPQ R10, $2
	JL   next
	PACK8(32, Y9, Y13)
	CMPQ R10, $3
	JL   next
	PACK8(64, Y10, Y14)
	CMPQ R10, $4
	JL   next
	PACK8(96, Y11, Y15)

next:
	ADDQ R8, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  partial
	VZEROUPPER
	RET
