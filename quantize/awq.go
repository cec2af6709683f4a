package quantize

// AWQ (Lin et al., "AWQ: Activation-aware Weight Quantization", MLSys 2024) scale search for
// one linear layer, after mit-han-lab/llm-awq auto_scale.py _search_module_scale: input
// channel j is scaled by s_j = mean|x_j|^α (normalised so that max(s)·min(s) = 1), the weights
// W·diag(s) are quantized, and α is chosen on a grid to minimise the layer's output error
// ‖X·(Q(W·diag(s))·diag(s)⁻¹ − W)ᵀ‖² on sample activations. The caller folds 1/s into the
// operation producing the layer's input (the preceding RMSNorm weight: g_j / s_j), so that
// (x/s)·(W·diag(s))ᵀ = x·Wᵀ before quantization.
//
// The duo-scaling variant (AutoAWQ, duo_scaling=True) uses s_j = mean|x_j|^α / wmean_j^(1−α),
// where wmean_j is the mean over rows of |W_ij| / max|W| of its group.

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// AWQOptions tunes the AWQ search; the zero value is the reference (20 grid points, no duo
// scaling, RTN grids).
type AWQOptions struct {
	// Grid is the number of α values tried, α = i/Grid for i = 0 … Grid−1 (default 20).
	Grid int
	// DuoScaling divides by the weight magnitude term wmean^(1−α) (AutoAWQ's default).
	DuoScaling bool
	// ClipSearch fits the group grids with the importance-weighted clipping search, using
	// mean(x²)/s² of each scaled input channel as importance.
	ClipSearch bool
}

// AWQResult is the outcome of the search.
type AWQResult struct {
	// Scales are the per-input-channel factors s (len cols): Tensor encodes W·diag(s), and the
	// layer's input must be divided by s (fold 1/s into the preceding norm weight).
	Scales []float32
	// Alpha is the chosen exponent, or −1 when no scaling beat none (then Scales are 1).
	Alpha float64
	// Tensor is the quantized W·diag(s).
	Tensor *GroupTensor
	// Loss is the mean squared output error on the sample for the chosen scales, BaseLoss that
	// without scaling (s = 1, the same grid fitting: plain RTN unless ClipSearch).
	Loss, BaseLoss float64
}

// AWQ searches the activation-aware scales of the rows × cols layer w (row-major [out, in])
// from n sample input rows x (n × cols, row-major) and quantizes it with spec.
func AWQ(w []float32, rows, cols int, x []float32, n int, spec GroupSpec, opts AWQOptions) (*AWQResult, error) {
	if err := spec.Validate(rows, cols); err != nil {
		return nil, err
	}
	switch {
	case len(w) != rows*cols:
		return nil, fmt.Errorf("%v: awq: %d weights for a %d × %d matrix", spec, len(w), rows, cols)
	case n <= 0 || len(x) != n*cols:
		return nil, fmt.Errorf("%v: awq: %d activations for %d rows of %d", spec, len(x), n, cols)
	case opts.Grid < 0:
		return nil, fmt.Errorf("%v: awq: grid %d is negative", spec, opts.Grid)
	}
	if err := checkFinite(w, cols); err != nil {
		return nil, fmt.Errorf("%v: awq: %w", spec, err)
	}
	if err := checkFinite(x, cols); err != nil {
		return nil, fmt.Errorf("%v: awq: activation %w", spec, err)
	}
	grid := opts.Grid
	if grid == 0 {
		grid = 20
	}

	// Per-channel statistics: mean |x| and mean x².
	xmean, x2 := make([]float64, cols), make([]float64, cols)
	X := make([]float64, n*cols)
	for i, v := range x {
		f := float64(v)
		X[i] = f
		xmean[i%cols] += math.Abs(f)
		x2[i%cols] += float64(f * f)
	}
	for j := range xmean {
		xmean[j] /= float64(n)
		x2[j] /= float64(n)
	}
	var wmean []float64
	if opts.DuoScaling {
		wmean = groupNormalizedMean(w, rows, cols, spec.groupLen(cols))
	}

	ev := &awqEval{w: w, rows: rows, cols: cols, X: X, n: n, spec: spec, x2: x2, clip: opts.ClipSearch}
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
	for i := 0; i < grid; i++ {
		alpha := float64(i) / float64(grid)
		s := awqScales(xmean, wmean, alpha)
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

// awqScales computes s_j = max(xmean_j^α [/ (wmean_j^(1−α) + 1e-4)], 1e-4), normalised by
// sqrt(max(s)·min(s)), as the reference does.
func awqScales(xmean, wmean []float64, alpha float64) []float32 {
	s := make([]float64, len(xmean))
	lo, hi := math.Inf(1), 0.0
	for j, m := range xmean {
		v := math.Pow(m, alpha)
		if wmean != nil {
			v /= math.Pow(wmean[j], 1-alpha) + 1e-4
		}
		v = max(v, 1e-4)
		s[j] = v
		lo, hi = min(lo, v), max(hi, v)
	}
	norm := math.Sqrt(hi * lo)
	out := make([]float32, len(s))
	for j, v := range s {
		out[j] = float32(v / norm)
	}
	return out
}

// groupNormalizedMean is, per column, the mean over rows of |W_ij| divided by the largest
// |W| of the group holding (i, j).
func groupNormalizedMean(w []float32, rows, cols, gl int) []float64 {
	out := make([]float64, cols)
	for r := 0; r < rows; r++ {
		for k := 0; k < cols; k += gl {
			row := w[r*cols+k : r*cols+k+gl]
			var m float32
			for _, v := range row {
				m = max(m, abs32(v))
			}
			if m == 0 {
				continue
			}
			for j, v := range row {
				out[k+j] += float64(abs32(v)) / float64(m)
			}
		}
	}
	for j := range out {
		out[j] /= float64(rows)
	}
	return out
}

// awqEval measures the output error of candidate scales.
type awqEval struct {
	w          []float32
	rows, cols int
	X          []float64 // n × cols
	n          int
	spec       GroupSpec
	x2         []float64 // mean x² per input channel
	clip       bool
}

// loss quantizes W·diag(s) and returns the tensor and the mean squared output error
// mean((X·(Q·diag(s)⁻¹ − W)ᵀ)²) over the n × rows outputs.
func (e *awqEval) loss(s []float32) (*GroupTensor, float64, error) {
	rows, cols := e.rows, e.cols
	ws := make([]float32, len(e.w))
	for i, v := range e.w {
		ws[i] = float32(v * s[i%cols])
	}
	var imp []float32
	if e.clip {
		imp = make([]float32, cols)
		for j := range imp {
			imp[j] = float32(e.x2[j] / (float64(s[j]) * float64(s[j])))
		}
	}
	t, err := QuantizeGroups(e.spec, ws, rows, cols, imp)
	if err != nil {
		return nil, 0, err
	}
	deq := t.Dequantize()
	D := make([]float64, rows*cols)
	for i, v := range deq {
		D[i] = float64(v)/float64(s[i%cols]) - float64(e.w[i])
	}
	E := make([]float64, e.n*rows)
	blas64.Gemm(blas.NoTrans, blas.Trans, 1,
		blas64.General{Rows: e.n, Cols: cols, Stride: cols, Data: e.X},
		blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: D},
		0, blas64.General{Rows: e.n, Cols: rows, Stride: rows, Data: E})
	var sum float64
	for _, v := range E {
		sum += float64(v * v)
	}
	return t, sum / float64(len(E)), nil
}
