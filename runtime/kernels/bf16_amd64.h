// The bf16 rounding of float32 (ggml_compute_fp32_to_bf16: nearest even; a NaN keeps its high
// half with the quiet bit set) in AVX-512 registers, for toBF16Asm (colsums_amd64.s) and
// gramPackPairs (gram_amd64.s). Generic code: f32ToBF16 and gramBF16.

// BF16_CONSTS puts the constants of BF16_RNE in Z27-Z31 (clobbers AX).
#define BF16_CONSTS \
	MOVL $0x7fffffff, AX \
	VPBROADCASTD AX, Z31 \
	MOVL $0x7f800000, AX \
	VPBROADCASTD AX, Z30 \
	MOVL $0x7fff, AX \
	VPBROADCASTD AX, Z29 \
	MOVL $1, AX \
	VPBROADCASTD AX, Z28 \
	MOVL $64, AX \
	VPBROADCASTD AX, Z27

// BF16_RNE(x, a, hi, r, k): r = the bf16 of x's 16 floats u, in the low half of each dword
// (0 above): (u + 0x7fff + (u>>16 & 1)) >> 16, for a NaN (u >> 16) | 64. a = |u| and
// hi = u >> 16 are left for the caller, k holds the NaN lanes.
#define BF16_RNE(x, a, hi, r, k) \
	VPANDD  Z31, x, a      \
	VPCMPUD $6, Z30, a, k  \
	VPSRLD  $16, x, hi     \
	VPANDD  Z28, hi, r     \
	VPADDD  Z29, r, r      \
	VPADDD  x, r, r        \
	VPSRLD  $16, r, r      \
	VPORD   Z27, hi, k, r
