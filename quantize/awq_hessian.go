package quantize

// AWQ's scale search driven by calibration statistics instead of sample activations: the
// layer's squared output error over the calibration set, ‖X·Δᵀ‖² with Δ = Q(W·diag(s))·diag(s)⁻¹
// − W, equals Σ_r Δ_r·H·Δ_rᵀ with H = XᵀX, so the Hessian gquant calibrate stores gives the
// exact loss of AWQ's search without keeping activations. Without a Hessian the diagonal
// Σx² alone gives the loss of independent input channels (the imatrix approximation).
//
// The scales are powers of a per-channel activation magnitude (AWQ uses mean|x|; calibration
// statistics hold Σx² and Σx, so the root mean square is the usual choice). Layers sharing an
// input (q, k and v; gate and up) are searched together by passing their weights stacked row
// after row: the loss of the stack is the sum of the layers' losses.

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// AWQStats are the statistics of a layer's input that the search needs.
type AWQStats struct {
	// H is Σ xᵀx over the calibration inputs (cols × cols, row-major), or nil.
	H []float64
	// Diag is Σ x_j² per input channel (used when H is nil; any positive factor is irrelevant).
	Diag []float64
	// Mag is the activation magnitude per input channel (mean|x| or the RMS), > 0 for live
	// channels; the scales are s_j ∝ Mag_j^α.
	Mag []float64
}

// AWQHessian searches AWQ's per-input-channel scales for the rows × cols weights w (one layer,
// or several layers sharing the input stacked row after row) from input statistics st, as AWQ
// does it: α on a grid of opts.Grid points in [0, 1), s = Mag^α (or the duo-scaling variant),
// normalised so that max(s)·min(s) = 1, each candidate quantized by plain round-to-nearest
// with spec. Result.Tensor is that RTN encoding of W·diag(s); callers usually re-encode the
// scaled weights (for example with QuantizeGroupsHessian). Loss and BaseLoss are Σ Δ·H·Δᵀ
// (or Σ Δ²·Diag) for the chosen and for unit scales.
func AWQHessian(w []float32, rows, cols int, st AWQStats, spec GroupSpec, opts AWQOptions) (*AWQResult, error) {
	if err := spec.Validate(rows, cols); err != nil {
		return nil, err
	}
	switch {
	case len(w) != rows*cols:
		return nil, fmt.Errorf("%v: awq: %d weights for a %d × %d matrix", spec, len(w), rows, cols)
	case st.H != nil && len(st.H) != cols*cols:
		return nil, fmt.Errorf("%v: awq: Hessian of %d values for %d columns", spec, len(st.H), cols)
	case st.H == nil && len(st.Diag) != cols:
		return nil, fmt.Errorf("%v: awq: %d Σx² values for %d columns", spec, len(st.Diag), cols)
	case len(st.Mag) != cols:
		return nil, fmt.Errorf("%v: awq: %d magnitudes for %d columns", spec, len(st.Mag), cols)
	case opts.Grid < 0:
		return nil, fmt.Errorf("%v: awq: grid %d is negative", spec, opts.Grid)
	}
	if err := checkFinite(w, cols); err != nil {
		return nil, fmt.Errorf("%v: awq: %w", spec, err)
	}
	for _, v := range [][]float64{st.H, st.Diag, st.Mag} {
		for i, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%v: awq: statistic [%d] is %g", spec, i, x)
			}
		}
	}
	grid := opts.Grid
	if grid == 0 {
		grid = 20
	}
	mag := make([]float64, cols)
	for j, m := range st.Mag {
		mag[j] = math.Max(m, 0)
	}
	var wmean []float64
	if opts.DuoScaling {
		wmean = groupNormalizedMean(w, rows, cols, spec.groupLen(cols))
	}
	ev := &awqHEval{w: w, rows: rows, cols: cols, spec: spec, st: st}
	ones := make([]float32, cols)
	for j := range ones {
		ones[j] = 1
	}
	best := &AWQResult{Scales: ones, Alpha: -1}
	var err error
	if best.Tensor, best.Loss, err = ev.loss(ones); err != nil {
		return nil, err
	}
	best.BaseLoss = best.Loss
	for i := 1; i < grid; i++ { // α = 0 gives unit scales: the baseline above
		alpha := float64(i) / float64(grid)
		s := awqScales(mag, wmean, alpha)
		t, l, err := ev.loss(s)
		if err != nil {
			return nil, err
		}
		if l < best.Loss {
			best.Scales, best.Alpha, best.Tensor, best.Loss = s, alpha, t, l
		}
	}
	return best, nil
}

// awqHEval measures the output error of candidate scales from input statistics.
type awqHEval struct {
	w          []float32
	rows, cols int
	spec       GroupSpec
	st         AWQStats
}

// loss quantizes W·diag(s) by RTN and returns the tensor and Σ_r Δ_r·H·Δ_rᵀ.
func (e *awqHEval) loss(s []float32) (*GroupTensor, float64, error) {
	rows, cols := e.rows, e.cols
	ws := make([]float32, len(e.w))
	for i, v := range e.w {
		ws[i] = float32(v * s[i%cols])
	}
	t, err := QuantizeGroups(e.spec, ws, rows, cols, nil)
	if err != nil {
		return nil, 0, err
	}
	deq := t.Dequantize()
	D := make([]float64, rows*cols)
	for i, v := range deq {
		D[i] = float64(v)/float64(s[i%cols]) - float64(e.w[i])
	}
	return t, quadLoss(D, rows, cols, e.st.H, e.st.Diag), nil
}

// quadLoss returns Σ_r D_r·H·D_rᵀ for the rows × cols matrix D, or Σ D_rj²·diag_j when H is nil.
func quadLoss(D []float64, rows, cols int, H, diag []float64) float64 {
	var sum float64
	if H == nil {
		for i, d := range D {
			sum += float64(d*d) * diag[i%cols]
		}
		return sum
	}
	E := make([]float64, rows*cols)
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: D},
		blas64.General{Rows: cols, Cols: cols, Stride: cols, Data: H},
		0, blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: E})
	for i, d := range D {
		sum += float64(d * E[i])
	}
	return sum
}

// ScaleHessian returns D⁻¹·H·D⁻¹ for D = diag(s): the Hessian of the input x/s of a layer whose
// input columns were divided by s (AWQ's or SmoothQuant's folding).
func ScaleHessian(H []float64, s []float32) []float64 {
	n := len(s)
	out := make([]float64, len(H))
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			out[i*n+j] = H[i*n+j] / (float64(s[i]) * float64(s[j]))
		}
	}
	return out
}
