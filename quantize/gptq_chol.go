package quantize

import (
	"fmt"
	"math"
)

// The inverse Hessian's factor, without forming the inverse.
//
// GPTQ needs U, upper triangular with H⁻¹ = UᵀU (torch.linalg.cholesky(H⁻¹, upper=True) in the
// reference). With J the reversal (J[i][n−1−i] = 1), let L be the lower Cholesky factor of
// JHJ: JHJ = LLᵀ. Then H = (JLJ)(JLJ)ᵀ with JLJ upper triangular, so
// H⁻¹ = (JLJ)⁻ᵀ(JLJ)⁻¹ = (JL⁻¹J)ᵀ(JL⁻¹J), and JL⁻¹J is upper triangular with a positive
// diagonal: it is U (the Cholesky factor is unique). In a row-major n × n array, JAJ is the
// array read backwards, so U is L⁻¹ with its n² elements reversed.
//
// This costs n³/3 multiply-adds (a Cholesky factorisation and a triangular inverse) where
// LAPACK's route (potrf, potri, potrf) costs 2n³/3 (its potri is also unblocked in gonum), and
// never forms the worse-conditioned H⁻¹. Both steps are blocked, with their trailing updates in
// gemmSub, and both compute every element with one fixed sequence of operations whatever the
// block size (sequential sums, ascending index, products rounded before they are subtracted):
//
//	L[i][j] = (a[i][j] − Σ_{t<j} L[i][t]·L[j][t]) / L[j][j],   L[i][i] = √(a[i][i] − Σ_{t<i} L[i][t]²)
//	X[i][j] = (0 − Σ_{j≤t<i} L[i][t]·X[t][j]) / L[i][i],       X[i][i] = 1 / L[i][i]   (X = L⁻¹)
//
// so the factor's bits depend only on H (TestGPTQFactorMatchesScalar).

// cholNB is the block size of the factorisation and of the inverse; cholPB the sub-block of
// the factorisation's panel solve.
const (
	cholNB = 128
	cholPB = 32
)

// invCholUpper returns U, upper triangular with H⁻¹ = UᵀU, row-major n × n with zeros below
// the diagonal, in h's array (h, the damped Hessian in processing order, is overwritten).
func invCholUpper(h []float64, n int) ([]float64, error) {
	return invCholUpperNB(h, n, cholNB)
}

func invCholUpperNB(h []float64, n, nb int) ([]float64, error) {
	var w gemmWork
	reverseF64(h[:n*n])
	if !cholLower(&w, h, n, nb) {
		return nil, fmt.Errorf("gptq: Hessian is not positive definite after damping (increase Damp)")
	}
	for i := 0; i < n; i++ {
		clear(h[i*n+i+1 : (i+1)*n])
	}
	invLower(&w, h, n, nb)
	reverseF64(h[:n*n])
	// An element that overflowed: v·0 is NaN only for ±Inf and NaN, and NaN propagates.
	for i := 0; i < n; i++ {
		var z0, z1 float64
		row := h[i*n+i : (i+1)*n]
		for j := 0; j+1 < len(row); j += 2 {
			z0 += float64(row[j] * 0)
			z1 += float64(row[j+1] * 0)
		}
		if z := z0 + z1 + float64(row[len(row)-1]*0); z != 0 {
			return nil, fmt.Errorf("gptq: Hessian is singular (increase Damp): row %d of the inverse factor is not finite", i)
		}
	}
	return h[:n*n], nil
}

func reverseF64(a []float64) {
	for i, j := 0, len(a)-1; i < j; i, j = i+1, j-1 {
		a[i], a[j] = a[j], a[i]
	}
}

// cholLower overwrites the lower triangle of the symmetric a (n × n, row-major; the upper
// triangle is never read, and is left with arbitrary values) with its Cholesky factor L,
// a = LLᵀ, in blocks of nb columns (right-looking). It reports false when a is not positive
// definite.
func cholLower(w *gemmWork, a []float64, n, nb int) bool {
	lt := make([]float64, nb*nb) // the diagonal block of L, transposed
	for k0 := 0; k0 < n; k0 += nb {
		k1 := min(k0+nb, n)
		kb := k1 - k0
		// Diagonal block (earlier blocks' terms already subtracted).
		for i := k0; i < k1; i++ {
			ri := a[i*n : i*n+i+1]
			for j := k0; j < i; j++ {
				rj := a[j*n : j*n+j+1]
				s := ri[j]
				for t := k0; t < j; t++ {
					s -= float64(ri[t] * rj[t])
				}
				ri[j] = s / rj[j]
			}
			s := ri[i]
			for t := k0; t < i; t++ {
				s -= float64(ri[t] * ri[t])
			}
			if !(s > 0) || math.IsInf(s, 0) {
				return false
			}
			ri[i] = math.Sqrt(s)
		}
		if k1 == n {
			break
		}
		for j := 0; j < kb; j++ {
			for jp := j + 1; jp < kb; jp++ {
				lt[j*nb+jp] = a[(k0+jp)*n+k0+j]
			}
		}
		// Panel below it: row i solves x·L_kkᵀ = a[i, k0:k1], column by column, in
		// sub-blocks of cholPB columns: inside one, a few rows at a time by axpySub (their
		// chains of dependent operations overlap); then the sub-block's terms for the later
		// columns in one gemmSub.
		for jb := 0; jb < kb; jb += cholPB {
			je := min(jb+cholPB, kb)
			for r0 := k1; r0 < n; r0 += gptqRowTile {
				r1 := min(r0+gptqRowTile, n)
				for j := jb; j < je; j++ {
					d := a[(k0+j)*n+k0+j]
					u := lt[j*nb+j+1 : j*nb+je]
					for i := r0; i < r1; i++ {
						seg := a[i*n+k0+j : i*n+k0+je]
						x := seg[0] / d
						seg[0] = x
						axpySub(x, u, seg[1:])
					}
				}
			}
			if je < kb {
				gemmSub(w, n-k1, kb-je, je-jb, a[k1*n+k0+jb:], n, a[(k0+je)*n+k0+jb:], n, true, a[k1*n+k0+je:], n, false)
			}
		}
		// Trailing lower triangle: a[k1:, k1:] −= P·Pᵀ, P = L[k1:, k0:k1].
		m := n - k1
		gemmSub(w, m, m, kb, a[k1*n+k0:], n, a[k1*n+k0:], n, true, a[k1*n+k1:], n, true)
	}
	return true
}

// invLower overwrites a, lower triangular with zeros above the diagonal and a positive
// diagonal (n × n, row-major), with its inverse (also lower triangular), in blocks of nb rows.
func invLower(w *gemmWork, a []float64, n, nb int) {
	T := make([]float64, min(nb, n)*n)
	ld := make([]float64, nb*nb) // the diagonal block of L
	s := make([]float64, n)
	for i0 := 0; i0 < n; i0 += nb {
		i1 := min(i0+nb, n)
		ib := i1 - i0
		// T = 0 − L[i0:i1, :i0] · X[:i0, :i0], block row of X by block row: block row
		// [t0, t1) of X is zero right of column t1. Each element gets its terms in ascending t.
		T = T[:ib*i0]
		clear(T)
		for t0 := 0; t0 < i0; t0 += nb {
			t1 := min(t0+nb, i0)
			gemmSub(w, ib, t1, t1-t0, a[i0*n+t0:], n, a[t0*n:], n, false, T, i0, false)
		}
		for r := 0; r < ib; r++ {
			copy(ld[r*nb:r*nb+ib], a[(i0+r)*n+i0:(i0+r)*n+i1])
		}
		// Rows of the block in order: the terms of the block's own earlier rows, then the
		// division.
		for i := i0; i < i1; i++ {
			r := i - i0
			copy(s[:i0], T[r*i0:(r+1)*i0])
			clear(s[i0:i])
			s[i] = 1
			li := ld[r*nb : r*nb+ib]
			for t := i0; t < i; t++ {
				axpySub(li[t-i0], a[t*n:t*n+t+1], s[:t+1])
			}
			d := li[r]
			xi := a[i*n : i*n+i+1]
			for j := range xi {
				xi[j] = s[j] / d
			}
		}
	}
}
