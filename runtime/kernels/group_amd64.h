// Offsets of the fields of groupArgs (group_amd64.go), the argument block of the group kernels
// (gemm_group_amd64.s); TestGroupArgsOffsets checks them against the Go struct.
#define GA_Y 0
#define GA_LDY 8
#define GA_W 16
#define GA_WSTRIDE 24
#define GA_BLOCKS 32
#define GA_MASK 40
#define GA_ACT 48
#define GA_ACTSTEP 56
#define GA_GD 64
#define GA_GS 72
#define GA_METASTEP 80
#define GA_HDR 88
#define GA_UNITS 96
#define GA_CHUNKS 104
#define GA_SSTEP 112
#define GA_ZOFF 120
#define GA_ZCONST 128
#define GA_B 136
#define GA_LDA 144
#define GA_KSTEP 152
#define GA_NTILES 160
#define GA_CFG 168
#define GA_CBUF 176
#define GA_ACT2 184
#define GA_NTLAST 192
#define GA_UNIT 200
