// Horizontal reductions and tail masks shared by the assembly files.

// HSUM_STORE adds the 16 float32 lanes of Z30 and stores the sum at (DI); clobbers X1 and X2.
#define HSUM_STORE \
	VEXTRACTF64X4 $1, Z30, Y1 \
	VADDPS        Y1, Y30, Y1 \
	VEXTRACTF128  $1, Y1, X2  \
	VADDPS        X2, X1, X1  \
	VMOVHLPS      X1, X1, X2  \
	VADDPS        X2, X1, X1  \
	VMOVSHDUP     X1, X2      \
	VADDSS        X2, X1, X1  \
	VMOVSS        X1, (DI)

// BFLY(op, z, t) applies op across the 16 lanes of z, leaving the result in every lane
// (clobbers t).
#define BFLY(op, z, t) \
	VSHUFF64X2 $0x4e, z, z, t \
	op         t, z, z        \
	VSHUFF64X2 $0xb1, z, z, t \
	op         t, z, z        \
	VPSHUFD    $0x4e, z, t    \
	op         t, z, z        \
	VPSHUFD    $0xb1, z, t    \
	op         t, z, z

// LOWMASK(t, kmov, k) sets mask k to the low CX lanes (CX below the mask's width: 16 for
// KMOVW, 32 for KMOVD), through register t.
#define LOWMASK(t, kmov, k) \
	MOVQ $1, t \
	SHLQ CX, t \
	DECQ t     \
	kmov t, k

// TAILMASK(n, k) sets mask k to the low n%16 lanes (n in a register, clobbers CX and R11).
#define TAILMASK(n, k) \
	MOVQ n, CX   \
	ANDQ $15, CX \
	LOWMASK(R11, KMOVW, k)
