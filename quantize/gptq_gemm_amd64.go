//go:build amd64 && !purego

package quantize

import (
	"os"

	"golang.org/x/sys/cpu"
)

// AVX-512 (F) and AVX2 versions of gemmKernel and axpySub (gptq_gemm_amd64.s), chosen at init;
// GQUANT_NOASM=1 or -tags purego keeps the Go code. They give the Go code's bits (see
// gptq_gemm.go), so the choice changes only the speed.

func init() {
	if os.Getenv("GQUANT_NOASM") == "1" {
		return
	}
	switch {
	case cpu.X86.HasAVX512F:
		useGemmAVX512()
	case cpu.X86.HasAVX2:
		useGemmAVX2()
	}
}

func useGemmAVX512() {
	gemmKernel, axpySub, gerSub, gemmImpl = gemmKernelAVX512Go, axpySubAVX512Go, gerSubAVX512Go, "avx512"
}

func useGemmAVX2() {
	gemmKernel, axpySub, gerSub, gemmImpl = gemmKernelAVX2Go, axpySubAVX2Go, gerSubAVX2Go, "avx2"
}

//go:noescape
func gemmKernelAVX512(k int, a, b, c *float64, ldc int)

//go:noescape
func gemmKernelAVX2(k int, a, b, c *float64, ldc int)

//go:noescape
func axpySubAVX512(e float64, u, w *float64, n int)

//go:noescape
func axpySubAVX2(e float64, u, w *float64, n int)

//go:noescape
func gerSubAVX512(e *float64, m int, u, w *float64, ldw, n int)

//go:noescape
func gerSubAVX2(e *float64, m int, u, w *float64, ldw, n int)

// gemmCheckTile panics unless the kernel's operands lie inside a, b and c.
func gemmCheckTile(k int, a, b, c []float64, ldc int) {
	if k < 0 || len(a) < k*gemmMR || len(b) < k*gemmNR || ldc < gemmNR || len(c) < (gemmMR-1)*ldc+gemmNR {
		panic("quantize: gemm kernel operands out of range")
	}
}

func gemmKernelAVX512Go(k int, a, b, c []float64, ldc int) {
	gemmCheckTile(k, a, b, c, ldc)
	if k == 0 {
		return
	}
	gemmKernelAVX512(k, &a[0], &b[0], &c[0], ldc)
}

func gemmKernelAVX2Go(k int, a, b, c []float64, ldc int) {
	gemmCheckTile(k, a, b, c, ldc)
	if k == 0 {
		return
	}
	gemmKernelAVX2(k, &a[0], &b[0], &c[0], ldc)
}

func axpySubAVX512Go(e float64, u, w []float64) {
	u = u[:len(w)]
	n := len(w) &^ 7
	if n > 0 {
		axpySubAVX512(e, &u[0], &w[0], n)
	}
	for j := n; j < len(w); j++ {
		w[j] -= float64(e * u[j])
	}
}

func axpySubAVX2Go(e float64, u, w []float64) {
	u = u[:len(w)]
	n := len(w) &^ 3
	if n > 0 {
		axpySubAVX2(e, &u[0], &w[0], n)
	}
	for j := n; j < len(w); j++ {
		w[j] -= float64(e * u[j])
	}
}

// gerCheck panics unless gerSub's operands lie inside e, u and w.
func gerCheck(e, u, w []float64, ldw, n int) {
	m := len(e)
	if n < 0 || len(u) < n || (m > 1 && ldw < n) || (m > 0 && n > 0 && len(w) < (m-1)*ldw+n) {
		panic("quantize: gerSub operands out of range")
	}
}

func gerSubAVX512Go(e, u, w []float64, ldw, n int) {
	gerCheck(e, u, w, ldw, n)
	if len(e) == 0 || n == 0 {
		return
	}
	gerSubAVX512(&e[0], len(e), &u[0], &w[0], ldw, n)
}

func gerSubAVX2Go(e, u, w []float64, ldw, n int) {
	gerCheck(e, u, w, ldw, n)
	if len(e) == 0 || n == 0 {
		return
	}
	gerSubAVX2(&e[0], len(e), &u[0], &w[0], ldw, n)
}
