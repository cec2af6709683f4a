//go:build amd64 && !purego

package kernels

import (
	"math/bits"
	"os"

	"golang.org/x/sys/cpu"
)

//go:noescape
func gramTile12x32(h *float64, ldh int, a *float32, b *float32, ldb int, k int, rows int, mask int)

//go:noescape
func gramPack(dst *float32, ldd int, src *float32, lds int, k int, lmask, smask int)

//go:noescape
func gramTile6x16(h *float64, ldh int, a *float32, lda int, b *float32, ldb int, k int, rows int, cols int)

//go:noescape
func gramPackAVX2Asm(dst *float32, ldd int, src *float32, lds int, k int, lmask, smask, nch int)

// gramAVX512 is the AVX-512F implementation.
var gramAVX512 = gramImpl{"avx512", 12, 32, gramTileAVX512, gramPackAVX512}

// gramAVX2 is the AVX2 + FMA3 implementation: the tiles of the others (so the same elements
// below the diagonal are written too), each as four sub-tiles of 6 × 16 in YMM registers.
var gramAVX2 = gramImpl{"avx2", 12, 32, gramTileAVX2, gramPackAVX2}

// gramNoAsm is GQUANT_NOASM=1 at start: the generic implementation even where the CPU has AVX2.
var gramNoAsm = os.Getenv("GQUANT_NOASM") == "1"

// gramFor returns the Gram implementation of kernel implementation im: the AVX-512 one for
// every assembly implementation (all of them need AVX-512F); for the generic one (the only
// implementation of CPUs without AVX-512, or forced by GQUANT_KERNELS=generic or SetImpl),
// the AVX2 one where the CPU has AVX2 and FMA3, since all give the same bits, unless
// GQUANT_NOASM=1; the generic one otherwise. An AMX-BF16 tile kernel would be chosen here for
// "amx".
func gramFor(im *implTable) gramImpl {
	x := &cpu.X86
	switch {
	case im != genericImpl && x.HasAVX512F:
		return gramAVX512
	case !gramNoAsm && x.HasAVX2 && x.HasFMA:
		return gramAVX2
	}
	return gramGo
}

// gramImpls returns the Gram implementations this CPU can run (for the tests and benchmarks),
// fastest first; the generic one is last.
func gramImpls() []gramImpl {
	var g []gramImpl
	if cpu.X86.HasAVX512F {
		g = append(g, gramAVX512)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		g = append(g, gramAVX2)
	}
	return append(g, gramGo)
}

// gramPackAVX512 is gramPackFunc over gramPack (gram_amd64.s).
func gramPackAVX512(dst []float32, ldd int, src []float32, lds, k, lmask, smask int) {
	if k <= 0 || smask == 0 {
		return
	}
	_ = dst[(k-1)*ldd+bits.Len(uint(smask))-1]
	_ = src[(k-1)*lds+bits.Len(uint(lmask))-1]
	gramPack(&dst[0], ldd, &src[0], lds, k, lmask, smask)
}

// gramTileAVX512 is gramTileFunc over gramTile12x32 (gram_amd64.s).
func gramTileAVX512(h []float64, ldh int, a, b []float32, ldb, k, rows, cols int) {
	if k <= 0 {
		return
	}
	// Bounds the kernel relies on (it reads b and h through masks, a in full).
	_ = a[k*12-1]
	_ = b[(k-1)*ldb+cols-1]
	_ = h[(rows-1)*ldh+cols-1]
	gramTile12x32(&h[0], ldh, &a[0], &b[0], ldb, k, rows, 1<<cols-1)
}

// gramPackAVX2 is gramPackFunc over gramPackAVX2Asm (gram_avx2_amd64.s).
func gramPackAVX2(dst []float32, ldd int, src []float32, lds, k, lmask, smask int) {
	if k <= 0 || smask == 0 {
		return
	}
	n := bits.Len(uint(smask))
	_ = dst[(k-1)*ldd+n-1]
	_ = src[(k-1)*lds+bits.Len(uint(lmask))-1]
	gramPackAVX2Asm(&dst[0], ldd, &src[0], lds, k, lmask, smask, (n+7)/8)
}

// gramTileAVX2 is gramTileFunc (R = 12, C = 32) over gramTile6x16 (gram_avx2_amd64.s): the
// sub-tiles of rows r, r+6 and columns j, j+16 that hold some of the tile's rows and cols.
func gramTileAVX2(h []float64, ldh int, a, b []float32, ldb, k, rows, cols int) {
	if k <= 0 {
		return
	}
	// Bounds the kernel relies on (it reads a in full, b and h in the tile's cols).
	_ = a[k*12-1]
	_ = b[(k-1)*ldb+cols-1]
	_ = h[(rows-1)*ldh+cols-1]
	for r := 0; r < rows; r += 6 {
		for j := 0; j < cols; j += 16 {
			gramTile6x16(&h[r*ldh+j], ldh, &a[r], 12, &b[j], ldb, k, min(6, rows-r), min(16, cols-j))
		}
	}
}
