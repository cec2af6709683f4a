//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/bits"
	"os"
	"sync"

	"golang.org/x/sys/cpu"
)

//go:noescape
func gramTile12x32(h *float64, ldh int, a *float32, b *float32, ldb int, k int, rows int, mask int)

//go:noescape
func gramTile12x32BF16(h *float64, ldh int, a *float32, b *float32, ldb int, k int, rows int, mask int)

//go:noescape
func gramPackPairs(dst *float32, ldd int, src *float32, lds int, k int, lmask, smask int)

//go:noescape
func gramPack(dst *float32, ldd int, src *float32, lds int, k int, lmask, smask int)

//go:noescape
func gramTile6x16(h *float64, ldh int, a *float32, lda int, b *float32, ldb int, k int, rows int, cols int)

//go:noescape
func gramPackAVX2Asm(dst *float32, ldd int, src *float32, lds int, k int, lmask, smask, nch int)

// gramAVX512BF16 is the AVX-512-BF16 implementation: VDPBF16PS over pairs of tokens.
var gramAVX512BF16 = gramImpl{"avx512bf16", 12, 32, true, gramTileAVX512BF16, gramPackPairsAVX512}

// gramAVX512 is the AVX-512F implementation.
var gramAVX512 = gramImpl{"avx512", 12, 32, false, gramTileAVX512, gramPackAVX512}

// gramAVX2 is the AVX2 + FMA3 implementation: the tiles of the others (so the same elements
// below the diagonal are written too), each as four sub-tiles of 6 × 16 in YMM registers.
var gramAVX2 = gramImpl{"avx2", 12, 32, false, gramTileAVX2, gramPackAVX2}

// gramPairsOK reports whether this CPU has AVX512_BF16 and its VDPBF16PS adds a pair's two
// products as Intel defines it (the high halves' product first, a rounding after each: two
// float32 FMAs), which the pair kernel's bits rely on: checked once on cases that tell that
// order and rounding from the others (one rounding of both, the low half first, a wider
// accumulator), and on random pairs, against gramTileGo on the same values.
var gramPairsOK = sync.OnceValue(func() bool {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BF16 {
		return false
	}
	const R, C, k = 12, 32, 9 // tokens: 4 pairs and an odd one
	a, b := make([]float32, k*R), make([]float32, k*C)
	// Row 0 (a = 1 for tokens 0-3): token 0 gives 1, token 1 nothing, then the pair of tokens
	// 2 and 3 adds, to column 0, 2⁻²⁴ twice: 1 with a rounding after each product, 1 + 2⁻²³
	// with one for both; to column 1, 2⁻²⁴ (a tie: stays 1) and then 2⁻²⁴(1 + 2⁻⁷): 1 + 2⁻²³
	// in token order, 1 + 2⁻²² the other way round.
	a[0], a[R], a[2*R], a[3*R] = 1, 1, 1, 1
	b[0], b[2*C], b[3*C] = 1, 0x1p-24, 0x1p-24
	b[1], b[2*C+1], b[3*C+1] = 1, 0x1p-24, 0x1p-24*(1+0x1p-7)
	rng := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		if i%C >= 2 {
			rng = rng*6364136223846793005 + 1442695040888963407
			b[i] = gramBF16(float32(int32(rng>>32)) * 0x1p-28)
		}
	}
	for i := range a {
		if i%R >= 1 {
			rng = rng*6364136223846793005 + 1442695040888963407
			a[i] = gramBF16(float32(int32(rng>>32)) * 0x1p-30)
		}
	}
	want, got := make([]float64, R*C), make([]float64, R*C)
	gramTileGo(want, C, a, b, C, k, R, C)
	pa, pb := make([]float32, (k+1)/2*R), make([]float32, (k+1)/2*C)
	gramPackPairsAVX512(pa, R, a, R, k, 1<<R-1, 1<<R-1)
	gramPackPairsAVX512(pb, C, b, C, k, 1<<C-1, 1<<C-1)
	gramTileAVX512BF16(got, C, pa, pb, C, (k+1)/2, R, C)
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			return false
		}
	}
	return want[0] == 1 && want[1] == 1+0x1p-23
})

// gramNoAsm is GQUANT_NOASM=1 at start: the generic implementation even where the CPU has AVX2.
var gramNoAsm = os.Getenv("GQUANT_NOASM") == "1"

// gramFor returns the Gram implementation of kernel implementation im: for every assembly
// implementation (all of them need AVX-512F) the AVX-512-BF16 one where gramPairsOK, the
// AVX-512 one otherwise; for the generic one (the only implementation of CPUs without
// AVX-512, or forced by GQUANT_KERNELS=generic or SetImpl), the AVX2 one where the CPU has AVX2
// and FMA3, since all give the same bits, unless GQUANT_NOASM=1; the generic one otherwise.
// An AMX-BF16 tile kernel would be chosen here for "amx".
func gramFor(im *implTable) gramImpl {
	x := &cpu.X86
	switch {
	case im != genericImpl && x.HasAVX512F && gramPairsOK():
		return gramAVX512BF16
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
	if gramPairsOK() {
		g = append(g, gramAVX512BF16)
	}
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

// gramPackPairsAVX512 is the pair gramPackFunc over gramPackPairs (gram_amd64.s).
func gramPackPairsAVX512(dst []float32, ldd int, src []float32, lds, k, lmask, smask int) {
	if k <= 0 || smask == 0 {
		return
	}
	_ = dst[((k+1)/2-1)*ldd+bits.Len(uint(smask))-1]
	_ = src[(k-1)*lds+bits.Len(uint(lmask))-1]
	gramPackPairs(&dst[0], ldd, &src[0], lds, k, lmask, smask)
}

// gramTileAVX512BF16 is the pair gramTileFunc over gramTile12x32BF16 (gram_amd64.s).
func gramTileAVX512BF16(h []float64, ldh int, a, b []float32, ldb, k, rows, cols int) {
	if k <= 0 {
		return
	}
	_ = a[k*12-1]
	_ = b[(k-1)*ldb+cols-1]
	_ = h[(rows-1)*ldh+cols-1]
	gramTile12x32BF16(&h[0], ldh, &a[0], &b[0], ldb, k, rows, 1<<cols-1)
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
