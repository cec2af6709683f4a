// Shared by the AMX kernels (amx_amd64.s, amx_group_amd64.s): the tile instructions they both
// issue, as BYTE encodings (the Go assembler knows no AMX instruction; VEX, map 0F38, W0, L0;
// Intel SDM vol. 2; checked against GNU objdump by TestAMXEncodings and
// TestAMXGroupEncodings), and the zeroing of the 16 accumulators Z0-Z15.
//
//	LDTILECFG  (CX)              C4 E2 78 49 01
//	TILERELEASE                  C4 E2 78 49 C0
//	TILEZERO   tmm0              C4 E2 7B 49 C0

#define LDTILECFG_CX     BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x01
#define TILERELEASE      BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
#define TILEZERO_T0      BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0

// ZERO16 zeroes Z0-Z15.
#define ZERO16 \
	VPXORD Z0, Z0, Z0    \
	VPXORD Z1, Z1, Z1    \
	VPXORD Z2, Z2, Z2    \
	VPXORD Z3, Z3, Z3    \
	VPXORD Z4, Z4, Z4    \
	VPXORD Z5, Z5, Z5    \
	VPXORD Z6, Z6, Z6    \
	VPXORD Z7, Z7, Z7    \
	VPXORD Z8, Z8, Z8    \
	VPXORD Z9, Z9, Z9    \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15
