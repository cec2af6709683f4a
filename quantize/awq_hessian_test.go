package quantize

import (
	"bytes"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// randLayer returns rows × cols weights and n × cols activations with a few loud channels.
func randLayer(rng *rand.Rand, rows, cols, n int) (w, x []float32) {
	w = make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	x = make([]float32, n*cols)
	for i := range x {
		s := 1.0
		if i%cols%17 == 3 {
			s = 12 // salient channels
		}
		x[i] = float32(rng.NormFloat64() * s)
	}
	return w, x
}

// gram returns XᵀX (cols × cols) in float64.
func gram(x []float32, n, cols int) []float64 {
	h := make([]float64, cols*cols)
	for r := 0; r < n; r++ {
		row := x[r*cols : (r+1)*cols]
		for i, a := range row {
			for j, b := range row {
				h[i*cols+j] += float64(a) * float64(b)
			}
		}
	}
	return h
}

// TestAWQHessianMatchesSamples: the Hessian form of the loss equals AWQ's loss on the samples
// themselves (mean over n·rows outputs there, a sum here), so both searches pick the same
// scales.
func TestAWQHessianMatchesSamples(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	rows, cols, n := 24, 64, 200
	w, x := randLayer(rng, rows, cols, n)
	spec := GroupSpec{Bits: 4, Group: 32}
	ref, err := AWQ(w, rows, cols, x, n, spec, AWQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mag := make([]float64, cols)
	for i, v := range x {
		mag[i%cols] += math.Abs(float64(v)) / float64(n)
	}
	got, err := AWQHessian(w, rows, cols, AWQStats{H: gram(x, n, cols), Mag: mag}, spec, AWQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Alpha != ref.Alpha || !slices.Equal(got.Scales, ref.Scales) {
		t.Fatalf("α %g, want %g (scales differ: %v)", got.Alpha, ref.Alpha, !slices.Equal(got.Scales, ref.Scales))
	}
	norm := float64(n * rows)
	for _, c := range []struct{ got, want float64 }{{got.Loss, ref.Loss * norm}, {got.BaseLoss, ref.BaseLoss * norm}} {
		if math.Abs(c.got-c.want) > 1e-9*c.want {
			t.Errorf("loss %g, want %g", c.got, c.want)
		}
	}
	if !(got.Alpha > 0 && got.Loss < got.BaseLoss) {
		t.Errorf("salient channels but no scaling chosen: α %g, loss %g, base %g", got.Alpha, got.Loss, got.BaseLoss)
	}
	// Without H, the diagonal gives the loss of independent channels.
	d := make([]float64, cols)
	h := gram(x, n, cols)
	for j := range d {
		d[j] = h[j*cols+j]
	}
	if _, err := AWQHessian(w, rows, cols, AWQStats{Diag: d, Mag: mag}, spec, AWQOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := AWQHessian(w, rows, cols, AWQStats{Diag: d, Mag: mag[:3]}, spec, AWQOptions{}); err == nil {
		t.Error("short magnitudes accepted")
	}
}

// TestQuantizeGroupsHessian: with a diagonal H the search is QuantizeGroups' importance
// search (same bytes); with a full H each group's range does at least as well on δ·H_gg·δᵀ as
// the unshrunk min-max range, measured here in float64.
func TestQuantizeGroupsHessian(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	rows, cols, n := 16, 64, 300
	w, x := randLayer(rng, rows, cols, n)
	h := gram(x, n, cols)
	for _, spec := range []GroupSpec{{Bits: 4, Group: 32}, {Bits: 4, Group: 16, Symmetric: true}, {Bits: 8, Symmetric: true}} {
		diagH := make([]float64, cols*cols)
		imp := make([]float32, cols)
		for j := 0; j < cols; j++ {
			imp[j] = float32(h[j*cols+j])
			diagH[j*cols+j] = float64(imp[j])
		}
		a, err := QuantizeGroupsHessian(spec, w, rows, cols, diagH)
		if err != nil {
			t.Fatal(err)
		}
		b, err := QuantizeGroups(spec, w, rows, cols, imp)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Q, b.Q) || !slices.Equal(a.Scales, b.Scales) || !bytes.Equal(a.Zeros, b.Zeros) {
			t.Errorf("%v: diagonal H differs from the importance search", spec)
		}
		full, err := QuantizeGroupsHessian(spec, w, rows, cols, h)
		if err != nil {
			t.Fatal(err)
		}
		rtn, _ := QuantizeGroups(spec, w, rows, cols, nil)
		gl := cols
		if spec.Group > 0 {
			gl = spec.Group
		}
		fq, rq := full.Dequantize(), rtn.Dequantize()
		var better int
		for r := 0; r < rows; r++ {
			for k := 0; k < cols; k += gl {
				e := func(deq []float32) float64 {
					var s float64
					for i := k; i < k+gl; i++ {
						for j := k; j < k+gl; j++ {
							s += (float64(deq[r*cols+i]) - float64(w[r*cols+i])) * h[i*cols+j] * (float64(deq[r*cols+j]) - float64(w[r*cols+j]))
						}
					}
					return s
				}
				ef, er := e(fq), e(rq)
				if ef > er*(1+1e-9) {
					t.Fatalf("%v: row %d group %d: error %g above min-max's %g", spec, r, k/gl, ef, er)
				}
				if ef < er {
					better++
				}
			}
		}
		if spec.Bits == 4 && better == 0 {
			t.Errorf("%v: the search never improved on min-max", spec)
		}
	}
}

// TestScaleHessian checks D⁻¹·H·D⁻¹ on a small case by hand.
func TestScaleHessian(t *testing.T) {
	got := ScaleHessian([]float64{4, 2, 2, 9}, []float32{2, 3})
	want := []float64{1, 1.0 / 3, 1.0 / 3, 1}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
