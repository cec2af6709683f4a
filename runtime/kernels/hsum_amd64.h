// Horizontal sum shared by the GEMV kernels.

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
