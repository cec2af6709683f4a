package quantize

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestOutputError: Σ_r (ŵ_r − w_r)·H·(ŵ_r − w_r)ᵀ with H = XᵀX is ‖X(Ŵ − W)ᵀ‖², computed
// directly from the inputs X (more rows than one block), and with H nil the diagonal's sum.
func TestOutputError(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, cols, n = 150, 24, 40
	w, wq := make([]float32, rows*cols), make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
		wq[i] = w[i] + float32(0.1*rng.NormFloat64())
	}
	X := make([]float64, n*cols)
	for i := range X {
		X[i] = rng.NormFloat64() + float64(i%cols)/8
	}
	H := make([]float64, cols*cols)
	diag := make([]float32, cols)
	for t0 := 0; t0 < n; t0++ {
		for i := 0; i < cols; i++ {
			for j := 0; j < cols; j++ {
				H[i*cols+j] += X[t0*cols+i] * X[t0*cols+j]
			}
		}
	}
	for j := range diag {
		diag[j] = float32(H[j*cols+j])
	}
	var want, wantDiag float64
	for r := 0; r < rows; r++ {
		for t0 := 0; t0 < n; t0++ {
			var s float64
			for j := 0; j < cols; j++ {
				s += X[t0*cols+j] * (float64(wq[r*cols+j]) - float64(w[r*cols+j]))
			}
			want += s * s
		}
		for j := 0; j < cols; j++ {
			d := float64(wq[r*cols+j]) - float64(w[r*cols+j])
			wantDiag += d * d * float64(diag[j])
		}
	}
	if got := OutputError(w, wq, rows, cols, H, nil); math.Abs(got/want-1) > 1e-12 {
		t.Errorf("OutputError = %.15g, ‖X(Ŵ − W)ᵀ‖² = %.15g", got, want)
	}
	if got := OutputError(w, wq, rows, cols, nil, diag); math.Abs(got/wantDiag-1) > 1e-12 {
		t.Errorf("OutputError with the diagonal = %.15g, want %.15g", got, wantDiag)
	}
}
