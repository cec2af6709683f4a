package quantize

// The GPTQ code as it was before gptq_chol.go and gptq_gemm.go, kept for the benchmark's
// baseline and as a reference for the tests: the factor by LAPACK (gonum's potrf, potri,
// potrf) and the column loop with gonum's AxpyUnitary and blas64.Gemm for the lazy updates.

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// legacyNewGPTQPlan is NewGPTQPlan with LAPACK's factor.
func legacyNewGPTQPlan(H []float64, cols, groupSize int, opts GPTQOptions) (*GPTQPlan, error) {
	return newGPTQPlan(H, cols, groupSize, opts, lapackInvCholUpper, false)
}

// legacyGPTQ is GPTQ as it was: LAPACK's factor and the old Run.
func legacyGPTQ(w []float32, rows, cols int, H []float64, spec GroupSpec, opts GPTQOptions) (*GroupTensor, error) {
	p, err := legacyNewGPTQPlan(H, cols, spec.Group, opts)
	if err != nil {
		return nil, err
	}
	q := &groupQuantizer{t: newGroupTensor(spec, rows, cols)}
	gidx, err := p.legacyRun(q, w, rows)
	if err != nil {
		return nil, err
	}
	q.t.GIdx = gidx
	return q.t, nil
}

// lapackInvCholUpper returns U, upper triangular with H⁻¹ = UᵀU (torch.linalg.cholesky(H⁻¹,
// upper=True) in the reference), row-major n × n with zeros below the diagonal. h is
// overwritten. LAPACK is called directly (potrf, potri, potrf): mat.Cholesky would also
// estimate condition numbers, which costs as much as the inverse.
func lapackInvCholUpper(h []float64, n int) ([]float64, error) {
	a := blas64.Symmetric{Uplo: blas.Upper, N: n, Data: h, Stride: n}
	t, ok := lapack64.Potrf(a)
	if !ok {
		return nil, fmt.Errorf("gptq: Hessian is not positive definite after damping (increase Damp)")
	}
	inv, ok := lapack64.Potri(t)
	if !ok {
		return nil, fmt.Errorf("gptq: Hessian is singular (increase Damp)")
	}
	u, ok := lapack64.Potrf(inv)
	if !ok {
		return nil, fmt.Errorf("gptq: inverse Hessian is not positive definite (increase Damp)")
	}
	U := make([]float64, n*n)
	for i := 0; i < n; i++ {
		copy(U[i*n+i:(i+1)*n], u.Data[i*u.Stride+i:i*u.Stride+n])
	}
	return U, nil
}

func (p *GPTQPlan) legacyRun(q GPTQQuantizer, w []float32, rows int) ([]int32, error) {
	cols, G, bs := p.cols, p.G, p.bs
	if rows <= 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("gptq: %d weights for rows of %d", len(w), cols)
	}
	if g := q.GroupSize(); g != G && !(g <= 0 && G == cols) {
		return nil, fmt.Errorf("gptq: codec groups of %d, plan groups of %d", g, G)
	}
	if err := checkFinite(w, cols); err != nil {
		return nil, fmt.Errorf("gptq: %w", err)
	}
	// Working copy in float64, dead inputs zeroed.
	W := make([]float64, rows*cols)
	for i, v := range w {
		W[i] = float64(v)
	}
	for i, d := range p.dead {
		if d {
			for r := 0; r < rows; r++ {
				W[r*cols+i] = 0
			}
		}
	}
	// Static groups: fitted from the original (dead-zeroed) weights in original order.
	if p.static {
		if err := fitGroups(q, W, rows, cols, 0, cols, G, p.diag0, p.clip); err != nil {
			return nil, err
		}
	}
	if p.actOrder {
		W = permuteCols(W, rows, cols, p.perm)
	}
	U, perm, static := p.U, p.perm, p.static
	groupOf := func(pos int) int { // group of processing position pos
		if static {
			return perm[pos] / G
		}
		return pos / G
	}
	if !static && G == cols { // per channel: one grid per row, from the starting weights
		if err := fitGroups(q, W, rows, cols, 0, cols, G, p.diag, p.clip); err != nil {
			return nil, err
		}
	}
	errBlk := make([]float64, rows*bs)
	for i1 := 0; i1 < cols; i1 += bs {
		i2 := min(i1+bs, cols)
		nb := i2 - i1
		for i := i1; i < i2; i++ {
			if !static && G < cols && i%G == 0 {
				if err := fitGroups(q, W, rows, cols, i, i+G, G, p.diag, p.clip); err != nil {
					return nil, err
				}
			}
			d := U[i*cols+i]
			urow := U[i*cols : (i+1)*cols]
			g, c := groupOf(i), perm[i]
			for r := 0; r < rows; r++ {
				wr := W[r*cols : (r+1)*cols]
				x := wr[i]
				qv := float64(q.Round(r, g, c, float32(x)))
				e := (x - qv) / d
				errBlk[r*bs+(i-i1)] = e
				for j := i + 1; j < i2; j++ {
					wr[j] -= float64(e * urow[j])
				}
			}
		}
		// Lazy batch update of the columns after the block: W[:, i2:] -= Err · U[i1:i2, i2:].
		// gonum's Gemm accumulates each element over k in order whatever the number of rows,
		// so a row gets the same bits in any block of rows (TestGPTQRowBlocks).
		if i2 < cols {
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1,
				blas64.General{Rows: rows, Cols: nb, Stride: bs, Data: errBlk},
				blas64.General{Rows: nb, Cols: cols - i2, Stride: cols, Data: U[i1*cols+i2:]},
				1,
				blas64.General{Rows: rows, Cols: cols - i2, Stride: cols, Data: W[i2:]})
		}
	}
	if !p.actOrder || static || G == cols {
		return nil, nil
	}
	gidx := make([]int32, cols)
	for pos, c := range perm {
		gidx[c] = int32(pos / G)
	}
	return gidx, nil
}

// permuteCols returns W with its columns reordered: out[:, p] = W[:, perm[p]].
func permuteCols(W []float64, rows, cols int, perm []int) []float64 {
	out := make([]float64, len(W))
	for r := 0; r < rows; r++ {
		for p, c := range perm {
			out[r*cols+p] = W[r*cols+c]
		}
	}
	return out
}
