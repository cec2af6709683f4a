//go:build amd64 && !purego

#include "textflag.h"
#include "group_amd64.h"
#include "amx_amd64.h"

// AMX-INT8 kernels of the gqf group matrices (amx_group_amd64.go). For each 16-row block the
// B tiles are built from the packed codes (group.go's layout) into a scratch: signed weights w
// = c − z, B row r of a block holding, for each of its 16 rows, elements 4r … 4r+3; for int4
// chunk c gives rows 2c = (x & 0x0F0F0F0F) − z and 2c+1 = ((x>>4) & 0x0F0F0F0F) − z (VPSUBB,
// z in each byte of the lane: |w| ≤ 15), for int8 row c = x ^ 0x80808080 (q). Then every
// 16-token tile (the activations padded with zero tokens to whole tiles) takes, per
// activation block (a16) or unit (a8), one tile product per kstep elements:
//
//	a16: C_h += A_h · B (TDPBSSD, h = a>>8 signed), C_l += A_l · B (TDPBUSD, l = a&255
//	     unsigned); I = 256·C_h + C_l = Σ w·a exactly; y = y + float(I)·(s·d);
//	a8:  C += A · B (TDPBSSD); acc = acc + float(I)·s; at the end y = acc·d;
//
// the float operations of group.go in its order (VMULPS, VMULPS, VADDPS: no FMA), so the
// results are the AVX-512 kernels' bits. Tiles: tmm0 C_h (a8: C), tmm1 C_l, tmm5 and tmm6
// the same for every other unit, tmm2 A_h (a8: A), tmm3 A_l, tmm4 B; the configuration
// (GA_CFG) gives C 16 rows × 64 bytes, A 16 rows × kstep bytes, B kstep/4 rows × 64 bytes. The tile state lives only inside one call (LDTILECFG …
// TILERELEASE).
//
// Registers: R9 args, SI block, DI y of the block, R8 blocks left, BX tiles left, R15 y of the
// tile, R10 and R11 the tile's A rows (high, low bytes), R13 element offset in the row, R14 d
// of the unit, DX scales of the unit; AX and CX tile addresses and strides; 0(SP) d of the
// tile's first token (unit 0), 8(SP) the end of the unit. Z0-Z15 the tile's 16 tokens'
// accumulators (lane = row), Z16-Z17 scratch, Z31 the unit's scales.
//
// The Go assembler knows no AMX instruction: BYTE encodings (VEX, map 0F38, W0, L0; Intel SDM
// vol. 2), checked against GNU objdump by TestAMXGroupEncodings.
//
//	LDTILECFG  (CX)              C4 E2 78 49 01
//	TILERELEASE                  C4 E2 78 49 C0
//	TILEZERO   tmm0              C4 E2 7B 49 C0
//	TILEZERO   tmm1              C4 E2 7B 49 C8
//	TILELOADD  tmm2, (AX)(CX*1)  C4 E2 7B 4B 14 08
//	TILELOADD  tmm3, (AX)(CX*1)  C4 E2 7B 4B 1C 08
//	TILELOADD  tmm4, (AX)(CX*1)  C4 E2 7B 4B 24 08
//	TDPBSSD    tmm0, tmm2, tmm4  C4 E2 5B 5E C2   (tmm0 += tmm2 · tmm4, signed × signed)
//	TDPBUSD    tmm1, tmm3, tmm4  C4 E2 59 5E CB   (tmm1 += tmm3 · tmm4, unsigned × signed)
//	TILESTORED (AX)(CX*1), tmm0  C4 E2 7A 4B 04 08
//	TILESTORED (AX)(CX*1), tmm1  C4 E2 7A 4B 0C 08
//	TILEZERO   tmm5, tmm6        C4 E2 7B 49 E8, F0
//	TDPBSSD    tmm5, tmm2, tmm4  C4 E2 5B 5E EA
//	TDPBUSD    tmm6, tmm3, tmm4  C4 E2 59 5E F3
//	TILESTORED (AX)(CX*1), tmm5  C4 E2 7A 4B 2C 08
//	TILESTORED (AX)(CX*1), tmm6  C4 E2 7A 4B 34 08

// LDTILECFG_CX, TILERELEASE, TILEZERO_T0 and ZERO16: amx_amd64.h.
#define G_TILEZERO_T1  BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8
#define G_TILELOADD_T2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x14; BYTE $0x08
#define G_TILELOADD_T3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x1C; BYTE $0x08
#define G_TILELOADD_T4 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x08
#define G_TDPBSSD_T0   BYTE $0xC4; BYTE $0xE2; BYTE $0x5B; BYTE $0x5E; BYTE $0xC2
#define G_TDPBUSD_T1   BYTE $0xC4; BYTE $0xE2; BYTE $0x59; BYTE $0x5E; BYTE $0xCB
#define G_TILESTORED_T0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x08
#define G_TILESTORED_T1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x08
#define G_TILEZERO_T5  BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xE8
#define G_TILEZERO_T6  BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xF0
#define G_TDPBSSD_T5   BYTE $0xC4; BYTE $0xE2; BYTE $0x5B; BYTE $0x5E; BYTE $0xEA
#define G_TDPBUSD_T6   BYTE $0xC4; BYTE $0xE2; BYTE $0x59; BYTE $0x5E; BYTE $0xF3
#define G_TILESTORED_T5 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x2C; BYTE $0x08
#define G_TILESTORED_T6 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x34; BYTE $0x08

// START: configuration and constants (Z30 0x0F0F0F0F, Z29 0x80808080, Z28 0x01010101).
#define START \
	MOVQ p+0(FP), R9          \
	MOVQ GA_CFG(R9), CX       \
	LDTILECFG_CX            \
	MOVL $0x0f0f0f0f, AX      \
	VPBROADCASTD AX, Z30      \
	MOVL $0x80808080, AX      \
	VPBROADCASTD AX, Z29      \
	MOVL $0x01010101, AX      \
	VPBROADCASTD AX, Z28      \
	MOVQ GA_Y(R9), DI         \
	MOVQ GA_W(R9), SI         \
	MOVQ GA_BLOCKS(R9), R8    \
	KMOVW GA_MASK(R9), K1

// BUILDB writes the block's B tiles (all of its row) to GA_B.
#define BUILDB \
	MOVQ GA_B(R9), AX               \
	MOVQ GA_HDR(R9), R12            \
	ADDQ SI, R12                    \
	CMPQ GA_ZCONST(R9), $128        \
	JEQ  b8                         \
	MOVQ GA_ZOFF(R9), DX            \
	ADDQ SI, DX                     \
	MOVQ GA_UNITS(R9), R13          \
bunit:                              \
	VPBROADCASTD GA_ZCONST(R9), Z20 \
	CMPQ GA_ZOFF(R9), $0            \
	JEQ  bz                         \
	VPMOVZXBD (DX), Z20             \
bz:                                 \
	VPMULLD Z28, Z20, Z20           \
	MOVQ GA_CHUNKS(R9), CX          \
bchunk:                             \
	VMOVDQU32 (R12), Z21            \
	VPANDD    Z30, Z21, Z22         \
	VPSUBB    Z20, Z22, Z22         \
	VMOVDQU32 Z22, (AX)             \
	VPSRLD    $4, Z21, Z23          \
	VPANDD    Z30, Z23, Z23         \
	VPSUBB    Z20, Z23, Z23         \
	VMOVDQU32 Z23, 64(AX)           \
	ADDQ $64, R12                   \
	ADDQ $128, AX                   \
	DECQ CX                         \
	JNE  bchunk                     \
	ADDQ $16, DX                    \
	DECQ R13                        \
	JNE  bunit                      \
	JMP  bdone                      \
b8:                                 \
	MOVQ GA_LDA(R9), CX             \
	SHRQ $2, CX                     \
b8loop:                             \
	VPXORD    (R12), Z29, Z21       \
	VMOVDQU32 Z21, (AX)             \
	ADDQ $64, R12                   \
	ADDQ $64, AX                    \
	DECQ CX                         \
	JNE  b8loop                     \
bdone:

// TILE_START: the tile's accumulators, scales and offsets.
#define TILE_START \
	ZERO16                \
	MOVQ SI, DX           \
	MOVQ 0(SP), R14       \
	XORQ R13, R13

// LOAD_A(T, reg): tile T = the kstep elements at R13 of the 16 tokens' rows at reg.
#define LOAD_A(T, reg) \
	MOVQ GA_LDA(R9), CX   \
	LEAQ (reg)(R13*1), AX \
	T

// LOAD_B: tmm4 = the block's B rows of the elements at R13.
#define LOAD_B \
	MOVQ R13, AX     \
	SHLQ $4, AX      \
	ADDQ GA_B(R9), AX \
	MOVQ $64, CX     \
	G_TILELOADD_T4

// POST_A16(t, acc): I = 256·C_h + C_l of token t (C rows at AX, C_l 1 KB further);
// acc = acc + float(I)·(s·d).
#define POST_A16(t, acc) \
	VPSLLD      $8, (64*(t))(AX), Z16      \
	VPADDD      (1024+64*(t))(AX), Z16, Z16 \
	VCVTDQ2PS   Z16, Z16                   \
	VMULPS.BCST (4*(t))(R14), Z31, Z17     \
	VMULPS      Z17, Z16, Z16              \
	VADDPS      Z16, acc, acc

// POST_A8(t, acc): acc = acc + float(I)·s.
#define POST_A8(t, acc) \
	VCVTDQ2PS (64*(t))(AX), Z16 \
	VMULPS    Z31, Z16, Z16     \
	VADDPS    Z16, acc, acc

#define POSTS(POST) \
	POST(0, Z0)   \
	POST(1, Z1)   \
	POST(2, Z2)   \
	POST(3, Z3)   \
	POST(4, Z4)   \
	POST(5, Z5)   \
	POST(6, Z6)   \
	POST(7, Z7)   \
	POST(8, Z8)   \
	POST(9, Z9)   \
	POST(10, Z10) \
	POST(11, Z11) \
	POST(12, Z12) \
	POST(13, Z13) \
	POST(14, Z14) \
	POST(15, Z15)

// a8: y = acc·d (d of token t at R14).
#define FIN(t, acc) VMULPS.BCST (4*(t))(R14), acc, acc
#define FINS \
	FIN(0, Z0)   \
	FIN(1, Z1)   \
	FIN(2, Z2)   \
	FIN(3, Z3)   \
	FIN(4, Z4)   \
	FIN(5, Z5)   \
	FIN(6, Z6)   \
	FIN(7, Z7)   \
	FIN(8, Z8)   \
	FIN(9, Z9)   \
	FIN(10, Z10) \
	FIN(11, Z11) \
	FIN(12, Z12) \
	FIN(13, Z13) \
	FIN(14, Z14) \
	FIN(15, Z15)

// STORE_TILE stores the rows of K1 of the tile's tokens (16, or GA_NTLAST for the last tile)
// at R15 + t·ldy.
#define ST(acc) \
	VMOVUPS acc, K1, (AX) \
	DECQ    CX            \
	JEQ     stored        \
	ADDQ    R12, AX
#define STORE_TILE \
	MOVQ $16, CX             \
	CMPQ BX, $1              \
	JNE  sfull               \
	MOVQ GA_NTLAST(R9), CX   \
sfull:                       \
	MOVQ R15, AX             \
	MOVQ GA_LDY(R9), R12     \
	ST(Z0)                   \
	ST(Z1)                   \
	ST(Z2)                   \
	ST(Z3)                   \
	ST(Z4)                   \
	ST(Z5)                   \
	ST(Z6)                   \
	ST(Z7)                   \
	ST(Z8)                   \
	ST(Z9)                   \
	ST(Z10)                  \
	ST(Z11)                  \
	ST(Z12)                  \
	ST(Z13)                  \
	ST(Z14)                  \
	VMOVUPS Z15, K1, (AX)    \
stored:

// NEXT_TILE advances the A rows, the tile's d and its outputs by 16 tokens.
#define NEXT_TILE \
	MOVQ GA_LDA(R9), AX \
	SHLQ $4, AX         \
	ADDQ AX, R10        \
	ADDQ AX, R11        \
	ADDQ $64, 0(SP)     \
	MOVQ GA_LDY(R9), AX \
	SHLQ $4, AX         \
	ADDQ AX, R15        \
	DECQ BX

#define BLOCK_START \
	BUILDB                 \
	MOVQ GA_ACT(R9), R10   \
	MOVQ GA_ACT2(R9), R11  \
	MOVQ GA_GD(R9), AX     \
	MOVQ AX, 0(SP)         \
	MOVQ DI, R15           \
	MOVQ GA_NTILES(R9), BX

#define NEXT_BLOCK \
	ADDQ $64, DI            \
	ADDQ GA_WSTRIDE(R9), SI \
	DECQ R8

#define UNIT_END \
	MOVQ R13, AX          \
	ADDQ GA_UNIT(R9), AX  \
	MOVQ AX, 8(SP)

// The units of a tile alternate between two sets of C tiles (a16: set 0 tmm0, tmm1, set 1
// tmm5, tmm6; a8: tmm0, tmm5), stored at cbuf (set 0) and cbuf + 2 KB (set 1). The AMX unit
// runs tile instructions in order, and a tile stored is not written again until the store has
// read it: so a unit's C tiles are stored while the next unit's first tile products run (each
// store right after a product on the other set), and zeroed again after that unit's last
// product; its float work follows. R13 is the offset of the unit being issued; DX and R14
// (scales, d) follow the units the float work has reached.

// C_ADDR(off): AX = cbuf + off, CX = 64 (the C rows' stride).
#define C_ADDR(off) \
	MOVQ GA_CBUF(R9), AX \
	ADDQ $off, AX        \
	MOVQ $64, CX

// UNIT16(lbl, lend, TH, TL, SH, SL, ZEROS): the unit at R13 into a set (TH, TL multiply),
// the previous unit's set stored by SH and SL during the first step (NONE: no previous unit)
// and zeroed by ZEROS after the last step.
#define UNIT16(lbl, lend, TH, TL, SH, SL, ZEROS) \
	UNIT_END                    \
	LOAD_A(G_TILELOADD_T2, R10) \
	LOAD_A(G_TILELOADD_T3, R11) \
	LOAD_B                      \
	TH                          \
	SH                          \
	TL                          \
	SL                          \
	ADDQ GA_KSTEP(R9), R13      \
	CMPQ R13, 8(SP)             \
	JGE  lend                   \
lbl:                            \
	LOAD_A(G_TILELOADD_T2, R10) \
	LOAD_A(G_TILELOADD_T3, R11) \
	LOAD_B                      \
	TH                          \
	TL                          \
	ADDQ GA_KSTEP(R9), R13      \
	CMPQ R13, 8(SP)             \
	JLT  lbl                    \
lend:                           \
	ZEROS

#define NONE
// The stores of set 0 (at cbuf) and set 1 (at cbuf + 2 KB), C_h then C_l 1 KB further.
#define SH0 \
	C_ADDR(0)        \
	G_TILESTORED_T0
#define SL0 \
	ADDQ $1024, AX   \
	G_TILESTORED_T1
#define SH1 \
	C_ADDR(2048)     \
	G_TILESTORED_T5
#define SL1 \
	ADDQ $1024, AX   \
	G_TILESTORED_T6
#define ZC0 \
	TILEZERO_T0 \
	G_TILEZERO_T1
#define ZC1 \
	G_TILEZERO_T5 \
	G_TILEZERO_T6

// POST16(off): the float work of the unit whose C tiles were stored at cbuf + off.
#define POST16(off) \
	C_ADDR(off)               \
	VMOVUPS (DX), Z31         \
	POSTS(POST_A16)           \
	ADDQ GA_SSTEP(R9), DX     \
	ADDQ GA_METASTEP(R9), R14

// func amxGroupA16(p *groupArgs)
TEXT ·amxGroupA16(SB), NOSPLIT, $16-8
	START
	ZC0
	ZC1
block16:
	BLOCK_START
tile16:
	TILE_START
	UNIT16(u16a, u16ae, G_TDPBSSD_T0, G_TDPBUSD_T1, NONE, NONE, NONE)
pipe16:
	CMPQ R13, GA_LDA(R9)
	JGE  last16a
	UNIT16(u16b, u16be, G_TDPBSSD_T5, G_TDPBUSD_T6, SH0, SL0, ZC0)
	POST16(0)
	CMPQ R13, GA_LDA(R9)
	JGE  last16b
	UNIT16(u16c, u16ce, G_TDPBSSD_T0, G_TDPBUSD_T1, SH1, SL1, ZC1)
	POST16(2048)
	JMP  pipe16
last16a: // the last unit is in set 0
	SH0
	SL0
	ZC0
	POST16(0)
	JMP  done16
last16b:
	SH1
	SL1
	ZC1
	POST16(2048)
done16:
	STORE_TILE
	NEXT_TILE
	JNE  tile16
	NEXT_BLOCK
	JNE  block16
	TILERELEASE
	VZEROUPPER
	RET

// UNIT8(lbl, lend, T, S, Z): a8's unit at R13 into a set's C (T multiplies), the previous
// unit's C stored by S during the first step and zeroed by Z after the last.
#define UNIT8(lbl, lend, T, S, Z) \
	UNIT_END                    \
	LOAD_A(G_TILELOADD_T2, R10) \
	LOAD_B                      \
	T                           \
	S                           \
	ADDQ GA_KSTEP(R9), R13      \
	CMPQ R13, 8(SP)             \
	JGE  lend                   \
lbl:                            \
	LOAD_A(G_TILELOADD_T2, R10) \
	LOAD_B                      \
	T                           \
	ADDQ GA_KSTEP(R9), R13      \
	CMPQ R13, 8(SP)             \
	JLT  lbl                    \
lend:                           \
	Z

#define S80 \
	C_ADDR(0)       \
	G_TILESTORED_T0
#define S81 \
	C_ADDR(2048)    \
	G_TILESTORED_T5

// POST8(off): the float work of the unit whose C tile was stored at cbuf + off.
#define POST8(off) \
	C_ADDR(off)           \
	VMOVUPS (DX), Z31     \
	POSTS(POST_A8)        \
	ADDQ GA_SSTEP(R9), DX

// func amxGroupA8(p *groupArgs)
TEXT ·amxGroupA8(SB), NOSPLIT, $16-8
	START
	TILEZERO_T0
	G_TILEZERO_T5
block8:
	BLOCK_START
tile8:
	TILE_START
	UNIT8(u8a, u8ae, G_TDPBSSD_T0, NONE, NONE)
pipe8:
	CMPQ R13, GA_LDA(R9)
	JGE  last8a
	UNIT8(u8b, u8be, G_TDPBSSD_T5, S80, TILEZERO_T0)
	POST8(0)
	CMPQ R13, GA_LDA(R9)
	JGE  last8b
	UNIT8(u8c, u8ce, G_TDPBSSD_T0, S81, G_TILEZERO_T5)
	POST8(2048)
	JMP  pipe8
last8a:
	S80
	TILEZERO_T0
	POST8(0)
	JMP  done8
last8b:
	S81
	G_TILEZERO_T5
	POST8(2048)
done8:
	FINS
	STORE_TILE
	NEXT_TILE
	JNE  tile8
	NEXT_BLOCK
	JNE  block8
	TILERELEASE
	VZEROUPPER
	RET
