package quantize

// Group grids chosen on the layer's output error: AWQ's auto_clip (mit-han-lab/llm-awq
// auto_clip.py) shrinks each group's range and keeps the factor with the least output error
// on sample activations. With H = XᵀX the error of one group g of a row, its other columns
// left exact, is δ·H_gg·δᵀ (δ the group's rounding error, H_gg the group's diagonal block of H),
// which QuantizeGroupsHessian minimises over the same shrink factors as QuantizeGroups' clip
// search. Unlike the diagonal importance it sees correlated input channels.

import (
	"fmt"
	"math"
)

// QuantizeGroupsHessian encodes the rows × cols weights w with spec, choosing each group's
// range among the shrink factors 1, 1−1/40, …, 0.5 for the least δ·H_gg·δᵀ, where H (cols × cols,
// row-major, Σ xᵀx of the layer's input) is the Hessian of the output error. The unshrunk
// range wins ties. Per-channel specs (Group 0) use the whole H.
func QuantizeGroupsHessian(spec GroupSpec, w []float32, rows, cols int, H []float64) (*GroupTensor, error) {
	if err := spec.Validate(rows, cols); err != nil {
		return nil, err
	}
	switch {
	case len(w) != rows*cols:
		return nil, fmt.Errorf("%v: %d weights for a %d × %d matrix", spec, len(w), rows, cols)
	case len(H) != cols*cols:
		return nil, fmt.Errorf("%v: Hessian of %d values for %d columns", spec, len(H), cols)
	}
	if err := checkFinite(w, cols); err != nil {
		return nil, fmt.Errorf("%v: %w", spec, err)
	}
	for i, v := range H {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%v: Hessian [%d, %d] is %g", spec, i/cols, i%cols, v)
		}
	}
	t := newGroupTensor(spec, rows, cols)
	gl, ng := spec.groupLen(cols), t.Groups()
	// The diagonal blocks of H, each gl × gl.
	blocks := make([][]float64, ng)
	for k := range blocks {
		b := make([]float64, gl*gl)
		for i := 0; i < gl; i++ {
			copy(b[i*gl:(i+1)*gl], H[(k*gl+i)*cols+k*gl:(k*gl+i)*cols+(k+1)*gl])
		}
		blocks[k] = b
	}
	d := make([]float64, gl)
	errOf := func(g grid, x []float32, hb []float64) float64 {
		for i, v := range x {
			d[i] = float64(v - g.value(g.code(v)))
		}
		var e float64
		for i, di := range d {
			if di == 0 {
				continue
			}
			row := hb[i*gl : (i+1)*gl]
			var s float64
			for j, dj := range d {
				s += float64(row[j] * dj) // explicit rounding: no FMA (see nofma_test.go)
			}
			e += float64(di * s)
		}
		return e
	}
	for r := 0; r < rows; r++ {
		for k := 0; k < ng; k++ {
			x := w[r*cols+k*gl : r*cols+(k+1)*gl]
			best := spec.gridFor(x, 1)
			if best.scale != 0 {
				bestErr := errOf(best, x, blocks[k])
				for i := 1; i <= clipSteps; i++ {
					p := 1 - float32(i)*(1-clipMin)/clipSteps
					g := spec.gridFor(x, p)
					if g.scale == 0 {
						continue
					}
					if e := errOf(g, x, blocks[k]); e < bestErr {
						best, bestErr = g, e
					}
				}
			}
			if err := t.setGrid(r, k, best); err != nil {
				return nil, err
			}
			for i, v := range x {
				t.setCode(r, k*gl+i, best.code(v))
			}
		}
	}
	return t, nil
}
