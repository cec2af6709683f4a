package quantize

// The float64 kernels of GPTQ: C −= A·B (gemmSub: the lazy block update, and the trailing
// updates of the Cholesky factorisation and the triangular inverse), W −= e·uᵀ over a few rows
// (gerSub: the column loop inside a block) and w −= e·u (axpySub: the triangular solves).
//
// Every implementation (generic Go, AVX2, AVX-512) computes each element of the result by the
// same sequence of IEEE operations: c ← c − round(a_t·b_t) for t = 0, 1, …, k−1 in order, a
// separately rounded product and subtraction (no fused multiply-add; see
// TestNoFusedMultiplyAdd). The register blocking, the cache blocking over rows, columns and k,
// and the packing only decide where the operands are read from, never the order of the
// operations on one element, so the bits do not depend on the implementation, on the CPU, on
// the blocking, or on which rows a call is given. This is also the order of gonum's serial
// Dgemm (c += (−a)·b, one AxpyUnitary per t), which GPTQ used before: the lazy update gives its
// bits exactly (TestGPTQGemmMatchesGonum).

// Register tile of the kernels: gemmMR rows × gemmNR columns of C per call.
const (
	gemmMR = 4
	gemmNR = 32
)

// Cache blocking: k in chunks of gemmKC, columns in chunks of gemmNC (the packed B panel,
// gemmKC × gemmNC, stays in L2 while the rows pass), rows in blocks of gemmMC (packed A). A row
// tile's packed A (gemmKC × gemmMR) stays in L1 while it meets the panel's strips, and C is
// read and written once per k chunk, row by row.
const (
	gemmKC = 128
	gemmMC = 128
	gemmNC = 1024
)

// gemmKernel computes the gemmMR × gemmNR tile at c (row stride ldc):
// c[r][j] −= Σ_t a[t·gemmMR+r] · b[t·gemmNR+j], t = 0..k−1 in order. a and b are packed.
var gemmKernel = gemmKernelGo

// axpySub computes w[j] −= e·u[j] for j < len(w) (len(u) ≥ len(w)).
var axpySub = axpySubGo

// gerSub computes w[r·ldw+j] −= e[r]·u[j] for r < len(e), j < n (a rank-1 update of
// len(e) rows of n columns).
var gerSub = gerSubGo

// gemmImpl names the kernels in use (for tests and benchmarks).
var gemmImpl = "go"

func useGemmGo() {
	gemmKernel, axpySub, gerSub, gemmImpl = gemmKernelGo, axpySubGo, gerSubGo, "go"
}

// gemmWork holds the packing buffers of one goroutine's GEMM calls.
type gemmWork struct {
	ap, bp []float64
	tile   [gemmMR * gemmNR]float64
}

func gemmGrow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// gemmSub computes C −= A·B for the m × n matrix C (row stride ldc), with A m × k (row stride
// lda) and B k × n (row stride ldb), or, with transB, B = Pᵀ for P n × k (row stride ldb).
// With lower, only C[i][j] with j ≤ i is needed (other elements may be changed arbitrarily).
// Each element of C is updated in the order described at the top of this file.
func gemmSub(w *gemmWork, m, n, k int, a []float64, lda int, b []float64, ldb int, transB bool, c []float64, ldc int, lower bool) {
	if m <= 0 || n <= 0 || k <= 0 {
		return
	}
	for pc := 0; pc < k; pc += gemmKC {
		kc := min(gemmKC, k-pc)
		for jc := 0; jc < n; jc += gemmNC {
			nc := min(gemmNC, n-jc)
			if lower && jc >= m {
				break
			}
			strips := (nc + gemmNR - 1) / gemmNR
			w.bp = gemmGrow(w.bp, strips*kc*gemmNR)
			gemmPackB(w.bp, b, ldb, transB, pc, kc, jc, nc)
			ic0 := 0
			if lower { // rows above jc have no element in this chunk
				ic0 = jc / gemmMR * gemmMR
			}
			for ic := ic0; ic < m; ic += gemmMC {
				mc := min(gemmMC, m-ic)
				tiles := (mc + gemmMR - 1) / gemmMR
				w.ap = gemmGrow(w.ap, tiles*kc*gemmMR)
				gemmPackA(w.ap, a, lda, ic, mc, pc, kc)
				for q := 0; q < tiles; q++ {
					i0 := ic + q*gemmMR
					mr := min(gemmMR, m-i0)
					as := w.ap[q*kc*gemmMR : (q+1)*kc*gemmMR]
					for s := 0; s < strips; s++ {
						j0 := jc + s*gemmNR
						if lower && i0+mr-1 < j0 {
							break
						}
						nr := min(gemmNR, n-j0)
						bs := w.bp[s*kc*gemmNR : (s+1)*kc*gemmNR]
						if mr == gemmMR && nr == gemmNR {
							gemmKernel(kc, as, bs, c[i0*ldc+j0:], ldc)
							continue
						}
						// Edge tile: through a full scratch tile (padding rows of A and
						// columns of B are zero; their results are dropped).
						t := w.tile[:]
						for r := 0; r < mr; r++ {
							copy(t[r*gemmNR:r*gemmNR+nr], c[(i0+r)*ldc+j0:(i0+r)*ldc+j0+nr])
						}
						gemmKernel(kc, as, bs, t, gemmNR)
						for r := 0; r < mr; r++ {
							copy(c[(i0+r)*ldc+j0:(i0+r)*ldc+j0+nr], t[r*gemmNR:r*gemmNR+nr])
						}
					}
				}
			}
		}
	}
}

// gemmPackA packs rows [ic, ic+mc) and columns [pc, pc+kc) of A into tiles of gemmMR rows, each
// tile k-major (t·gemmMR + r), the rows past the end zero.
func gemmPackA(dst, a []float64, lda, ic, mc, pc, kc int) {
	for q := 0; q*gemmMR < mc; q++ {
		d := dst[q*kc*gemmMR : (q+1)*kc*gemmMR]
		for r := 0; r < gemmMR; r++ {
			i := q*gemmMR + r
			if i >= mc {
				for t := 0; t < kc; t++ {
					d[t*gemmMR+r] = 0
				}
				continue
			}
			row := a[(ic+i)*lda+pc : (ic+i)*lda+pc+kc]
			for t, v := range row {
				d[t*gemmMR+r] = v
			}
		}
	}
}

// gemmPackB packs rows [pc, pc+kc) and columns [jc, jc+nc) of B (or of Pᵀ with transB) into strips
// of gemmNR columns, each strip k-major (t·gemmNR + j), the columns past the end zero.
func gemmPackB(dst, b []float64, ldb int, transB bool, pc, kc, jc, nc int) {
	for s := 0; s*gemmNR < nc; s++ {
		d := dst[s*kc*gemmNR : (s+1)*kc*gemmNR]
		j0 := jc + s*gemmNR
		nr := min(gemmNR, jc+nc-j0)
		if !transB {
			for t := 0; t < kc; t++ {
				dt := d[t*gemmNR : (t+1)*gemmNR]
				copy(dt, b[(pc+t)*ldb+j0:(pc+t)*ldb+j0+nr])
				clear(dt[nr:])
			}
			continue
		}
		for j := 0; j < gemmNR; j++ {
			if j >= nr {
				for t := 0; t < kc; t++ {
					d[t*gemmNR+j] = 0
				}
				continue
			}
			row := b[(j0+j)*ldb+pc : (j0+j)*ldb+pc+kc]
			for t, v := range row {
				d[t*gemmNR+j] = v
			}
		}
	}
}

// gemmKernelGo is the generic gemmKernel: 1 row × 4 columns at a time, products rounded
// before they are subtracted (the explicit float64 conversions keep the compiler from fusing).
func gemmKernelGo(k int, a, b, c []float64, ldc int) {
	a = a[:k*gemmMR]
	b = b[:k*gemmNR]
	for r := 0; r < gemmMR; r++ {
		cr := c[r*ldc : r*ldc+gemmNR]
		for j := 0; j < gemmNR; j += 4 {
			c0, c1, c2, c3 := cr[j], cr[j+1], cr[j+2], cr[j+3]
			for t := 0; t < k; t++ {
				x := a[t*gemmMR+r]
				bt := b[t*gemmNR+j : t*gemmNR+j+4]
				c0 -= float64(x * bt[0])
				c1 -= float64(x * bt[1])
				c2 -= float64(x * bt[2])
				c3 -= float64(x * bt[3])
			}
			cr[j], cr[j+1], cr[j+2], cr[j+3] = c0, c1, c2, c3
		}
	}
}

// gerSubGo is the generic gerSub.
func gerSubGo(e, u, w []float64, ldw, n int) {
	u = u[:n]
	for r, er := range e {
		wr := w[r*ldw : r*ldw+n]
		for j := range wr {
			wr[j] -= float64(er * u[j])
		}
	}
}

// axpySubGo is the generic axpySub.
func axpySubGo(e float64, u, w []float64) {
	u = u[:len(w)]
	for j := range w {
		w[j] -= float64(e * u[j])
	}
}
