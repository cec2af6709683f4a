//go:build amd64

#include "textflag.h"

// AMX instructions as BYTE sequences (Go's assembler does not know them). Every encoding is
// VEX.128.xx.0F38.W0 (C4 [RXB 00010] [W vvvv L pp] opcode ModRM [SIB] [disp]); the AT&T
// form objdump prints is given with each, and the tests check that objdump agrees.

#define LDTILECFG_RAX     BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00 // ldtilecfg (%rax)
#define STTILECFG_RAX     BYTE $0xc4; BYTE $0xe2; BYTE $0x79; BYTE $0x49; BYTE $0x00 // sttilecfg (%rax)
#define TILERELEASE       BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0 // tilerelease

// tileloadd (%r8,%r9,1),%tmm1
#define LOAD_TMM1_R8_R9   BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x0c; BYTE $0x08
// tileloadd (%r10,%r11,1),%tmm2
#define LOAD_TMM2_R10_R11 BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x1a
// tileloadd 0x0(%r13,%r12,1),%tmm0
#define LOAD_TMM0_R13_R12 BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x44; BYTE $0x25; BYTE $0x00
// tilestored %tmm0,0x0(%r13,%r12,1)
#define STORE_TMM0_R13_R12 BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x44; BYTE $0x25; BYTE $0x00
// tdpbssd %tmm2,%tmm1,%tmm0
#define TDPBSSD_0_1_2     BYTE $0xc4; BYTE $0xe2; BYTE $0x6b; BYTE $0x5e; BYTE $0xc1

// func LoadConfig(cfg *[64]byte)
TEXT ·LoadConfig(SB), NOSPLIT, $0-8
	MOVQ cfg+0(FP), AX
	LDTILECFG_RAX
	RET

// func StoreConfig(cfg *[64]byte)
TEXT ·StoreConfig(SB), NOSPLIT, $0-8
	MOVQ cfg+0(FP), AX
	STTILECFG_RAX
	RET

// func LoadConfigInline()
TEXT ·LoadConfigInline(SB), NOSPLIT, $0-0
	// ldtilecfg 0x2(%rip): the configuration starts 2 bytes after this instruction,
	// behind the short jump over it.
	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x05; BYTE $0x02; BYTE $0x00; BYTE $0x00; BYTE $0x00
	BYTE $0xeb; BYTE $0x40 // jmp over the 64 bytes below
	// InlineConfig: palette 1; tmm0 colsb 12 (byte 16); tmm7 colsb 64 (byte 30);
	// tmm0 rows 5 (byte 48); tmm7 rows 16 (byte 55).
	BYTE $0x01; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00
	BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00
	BYTE $0x0c; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00
	BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x40; BYTE $0x00
	BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00
	BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00
	BYTE $0x05; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x10
	BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00
	RET

// func Release()
TEXT ·Release(SB), NOSPLIT, $0-0
	TILERELEASE
	RET

// func GemmSSD(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)
TEXT ·GemmSSD(SB), NOSPLIT, $0-56
	MOVQ cfg+0(FP), AX
	MOVQ a+8(FP), R8
	MOVQ strideA+32(FP), R9
	MOVQ b+16(FP), R10
	MOVQ strideB+40(FP), R11
	MOVQ c+24(FP), R13
	MOVQ strideC+48(FP), R12
	LDTILECFG_RAX
	LOAD_TMM1_R8_R9
	LOAD_TMM2_R10_R11
	LOAD_TMM0_R13_R12
	TDPBSSD_0_1_2
	STORE_TMM0_R13_R12
	TILERELEASE
	RET

// func GemmSUD(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)
TEXT ·GemmSUD(SB), NOSPLIT, $0-56
	MOVQ cfg+0(FP), AX
	MOVQ a+8(FP), SI
	SUBQ $0x40, SI
	MOVQ strideA+32(FP), DX
	MOVQ b+16(FP), DI
	SUBQ $0x1000, DI
	MOVQ strideB+40(FP), BX
	SHRQ $2, BX
	MOVQ c+24(FP), CX
	MOVQ strideC+48(FP), R8
	SHRQ $1, R8
	LDTILECFG_RAX
	// tileloadd 0x40(%rsi,%rdx,1),%tmm4
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x64; BYTE $0x16; BYTE $0x40
	// tileloadd 0x1000(%rdi,%rbx,4),%tmm5
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0xac; BYTE $0x9f; BYTE $0x00; BYTE $0x10; BYTE $0x00; BYTE $0x00
	// tileloadd (%rcx,%r8,2),%tmm3
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x1c; BYTE $0x41
	// tdpbsud %tmm5,%tmm4,%tmm3
	BYTE $0xc4; BYTE $0xe2; BYTE $0x52; BYTE $0x5e; BYTE $0xdc
	// tilestored %tmm3,(%rcx,%r8,2)
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x1c; BYTE $0x41
	TILERELEASE
	RET

// func GemmUSD(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)
TEXT ·GemmUSD(SB), NOSPLIT, $0-56
	MOVQ cfg+0(FP), AX
	MOVQ a+8(FP), R12
	MOVQ strideA+32(FP), R9
	MOVQ b+16(FP), R11
	MOVQ strideB+40(FP), R10
	MOVQ c+24(FP), DX
	MOVQ strideC+48(FP), SI
	LDTILECFG_RAX
	// tileloaddt1 (%r12,%r9,1),%tmm6
	BYTE $0xc4; BYTE $0x82; BYTE $0x79; BYTE $0x4b; BYTE $0x34; BYTE $0x0c
	// tileloadd (%r11,%r10,1),%tmm7
	BYTE $0xc4; BYTE $0x82; BYTE $0x7b; BYTE $0x4b; BYTE $0x3c; BYTE $0x13
	// tileloadd (%rdx,%rsi,1),%tmm5
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x32
	// tdpbusd %tmm7,%tmm6,%tmm5
	BYTE $0xc4; BYTE $0xe2; BYTE $0x41; BYTE $0x5e; BYTE $0xee
	// tilestored %tmm5,(%rdx,%rsi,1)
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x2c; BYTE $0x32
	TILERELEASE
	RET

// func GemmUUD(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)
TEXT ·GemmUUD(SB), NOSPLIT, $0-56
	MOVQ cfg+0(FP), AX
	MOVQ a+8(FP), SI
	MOVQ strideA+32(FP), DX
	MOVQ b+16(FP), DI
	MOVQ strideB+40(FP), BX
	MOVQ c+24(FP), CX
	MOVQ strideC+48(FP), R8
	LDTILECFG_RAX
	// tileloadd (%rsi,%rdx,1),%tmm0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x04; BYTE $0x16
	// tileloadd (%rdi,%rbx,1),%tmm7
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x3c; BYTE $0x1f
	// tileloadd (%rcx,%r8,1),%tmm6
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x01
	// tdpbuud %tmm7,%tmm0,%tmm6
	BYTE $0xc4; BYTE $0xe2; BYTE $0x40; BYTE $0x5e; BYTE $0xf0
	// tilestored %tmm6,(%rcx,%r8,1)
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x34; BYTE $0x01
	TILERELEASE
	RET

// func GemmBF16(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)
TEXT ·GemmBF16(SB), NOSPLIT, $0-56
	MOVQ cfg+0(FP), AX
	MOVQ a+8(FP), SI
	MOVQ strideA+32(FP), DX
	MOVQ b+16(FP), DI
	MOVQ strideB+40(FP), BX
	MOVQ c+24(FP), CX
	MOVQ strideC+48(FP), R8
	LDTILECFG_RAX
	// tileloadd (%rsi,%rdx,1),%tmm2
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x16
	// tileloadd (%rdi,%rbx,1),%tmm3
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x1c; BYTE $0x1f
	// tileloadd (%rcx,%r8,1),%tmm1
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x0c; BYTE $0x01
	// tdpbf16ps %tmm3,%tmm2,%tmm1
	BYTE $0xc4; BYTE $0xe2; BYTE $0x62; BYTE $0x5c; BYTE $0xca
	// tilestored %tmm1,(%rcx,%r8,1)
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x0c; BYTE $0x01
	TILERELEASE
	RET

// func LoadABC(a, b, c *byte, strideA, strideB, strideC int)
TEXT ·LoadABC(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), R8
	MOVQ strideA+24(FP), R9
	MOVQ b+8(FP), R10
	MOVQ strideB+32(FP), R11
	MOVQ c+16(FP), R13
	MOVQ strideC+40(FP), R12
	LOAD_TMM1_R8_R9
	LOAD_TMM2_R10_R11
	LOAD_TMM0_R13_R12
	RET

// func DotSSD()
TEXT ·DotSSD(SB), NOSPLIT, $0-0
	TDPBSSD_0_1_2
	RET

// func StoreC(c *byte, strideC int)
TEXT ·StoreC(SB), NOSPLIT, $0-16
	MOVQ c+0(FP), R13
	MOVQ strideC+8(FP), R12
	STORE_TMM0_R13_R12
	RET

// func ZeroTile(cfg *[64]byte, src, dst *byte, stride int)
TEXT ·ZeroTile(SB), NOSPLIT, $0-32
	MOVQ cfg+0(FP), AX
	MOVQ src+8(FP), DX
	MOVQ dst+16(FP), DI
	MOVQ stride+24(FP), SI
	LDTILECFG_RAX
	// tileloadd (%rdx,%rsi,1),%tmm4
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x32
	// tilezero %tmm4
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xe0
	// tilestored %tmm4,(%rdi,%rsi,1)
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x24; BYTE $0x37
	TILERELEASE
	RET

// func LoadBroadcast(cfg *[64]byte, src, dst *byte, stride int)
TEXT ·LoadBroadcast(SB), NOSPLIT, $0-32
	MOVQ cfg+0(FP), AX
	MOVQ src+8(FP), DX
	MOVQ dst+16(FP), DI
	MOVQ stride+24(FP), SI
	LDTILECFG_RAX
	// tileloadd (%rdx,%riz,1),%tmm3: SIB index 100b = no index, stride 0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x1c; BYTE $0x22
	// tilestored %tmm3,(%rdi,%rsi,1)
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x1c; BYTE $0x37
	TILERELEASE
	RET

// func UD2()
TEXT ·UD2(SB), NOSPLIT, $0-0
	BYTE $0x0f; BYTE $0x0b
	RET

// func abi0Entries(out *[numFuncs]unsafe.Pointer)
TEXT ·abi0Entries(SB), NOSPLIT, $0-8
	MOVQ out+0(FP), DI
	LEAQ ·LoadConfig(SB), AX
	MOVQ AX, 0(DI)
	LEAQ ·StoreConfig(SB), AX
	MOVQ AX, 8(DI)
	LEAQ ·LoadConfigInline(SB), AX
	MOVQ AX, 16(DI)
	LEAQ ·Release(SB), AX
	MOVQ AX, 24(DI)
	LEAQ ·GemmSSD(SB), AX
	MOVQ AX, 32(DI)
	LEAQ ·GemmSUD(SB), AX
	MOVQ AX, 40(DI)
	LEAQ ·GemmUSD(SB), AX
	MOVQ AX, 48(DI)
	LEAQ ·GemmUUD(SB), AX
	MOVQ AX, 56(DI)
	LEAQ ·GemmBF16(SB), AX
	MOVQ AX, 64(DI)
	LEAQ ·LoadABC(SB), AX
	MOVQ AX, 72(DI)
	LEAQ ·DotSSD(SB), AX
	MOVQ AX, 80(DI)
	LEAQ ·StoreC(SB), AX
	MOVQ AX, 88(DI)
	LEAQ ·ZeroTile(SB), AX
	MOVQ AX, 96(DI)
	LEAQ ·LoadBroadcast(SB), AX
	MOVQ AX, 104(DI)
	LEAQ ·UD2(SB), AX
	MOVQ AX, 112(DI)
	RET
