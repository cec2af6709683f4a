// Offsets of the fields of groupArgs (group_amd64.go), the argument block of the group kernels
// (gemm_group_amd64.s, amx_group_amd64.s), from the go_asm.h that the Go toolchain generates
// for the package's assembly.
#include "go_asm.h"

#define GA_Y groupArgs_y
#define GA_LDY groupArgs_ldy
#define GA_W groupArgs_w
#define GA_WSTRIDE groupArgs_wstride
#define GA_BLOCKS groupArgs_blocks
#define GA_MASK groupArgs_mask
#define GA_ACT groupArgs_act
#define GA_ACTSTEP groupArgs_actStep
#define GA_GD groupArgs_gd
#define GA_GS groupArgs_gs
#define GA_METASTEP groupArgs_metaStep
#define GA_HDR groupArgs_hdr
#define GA_UNITS groupArgs_units
#define GA_CHUNKS groupArgs_chunks
#define GA_SSTEP groupArgs_sstep
#define GA_ZOFF groupArgs_zoff
#define GA_ZCONST groupArgs_zconst
#define GA_B groupArgs_b
#define GA_LDA groupArgs_lda
#define GA_KSTEP groupArgs_kstep
#define GA_NTILES groupArgs_ntiles
#define GA_CFG groupArgs_cfg
#define GA_CBUF groupArgs_cbuf
#define GA_ACT2 groupArgs_act2
#define GA_NTLAST groupArgs_ntlast
#define GA_UNIT groupArgs_unit
