package quantize

// SmoothQuant (Xiao et al., ICML 2023) migration scales, after mit-han-lab/smoothquant
// smooth.py smooth_ln_fcs: activation outliers are moved into the weights by
// X·W ᵀ = (X·diag(s)⁻¹)·(W·diag(s))ᵀ with s_j = max|X_j|^α / max|W_·j|^(1−α). The caller divides
// the preceding norm weight by s and multiplies the input columns of every linear layer fed by
// that norm (q, k and v together; gate and up together) by s.

import (
	"fmt"
	"math"
)

// ColumnAbsMax returns max_i |W_ij| for each input column j of the rows × cols weight w. For
// layers sharing an input, take the element-wise maximum of their results.
func ColumnAbsMax(w []float32, rows, cols int) []float32 {
	out := make([]float32, cols)
	for r := 0; r < rows; r++ {
		for j, v := range w[r*cols : (r+1)*cols] {
			out[j] = max(out[j], abs32(v))
		}
	}
	return out
}

// SmoothScales returns s_j = max(actMax_j^α / max(wMax_j, 1e-5)^(1−α), 1e-5), the reference's
// clamps included, from the per-channel calibration maxima of |X| (actMax) and of |W|
// (wMax, see ColumnAbsMax). α is the migration strength in [0, 1] (0.5 is the paper's default,
// 0.8–0.85 for larger models).
func SmoothScales(actMax, wMax []float32, alpha float64) ([]float32, error) {
	if len(actMax) != len(wMax) {
		return nil, fmt.Errorf("smoothquant: %d activation maxima for %d weight columns", len(actMax), len(wMax))
	}
	if !(alpha >= 0 && alpha <= 1) {
		return nil, fmt.Errorf("smoothquant: alpha %g outside [0, 1]", alpha)
	}
	s := make([]float32, len(actMax))
	for j := range s {
		a, w := float64(actMax[j]), float64(wMax[j])
		if !(a >= 0) || math.IsInf(a, 0) || !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("smoothquant: channel %d: maxima %g, %g (want finite and ≥ 0)", j, a, w)
		}
		s[j] = float32(max(math.Pow(a, alpha)/math.Pow(max(w, 1e-5), 1-alpha), 1e-5))
	}
	return s, nil
}
