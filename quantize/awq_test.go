package quantize

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// salientLayer builds a layer whose inputs have a few salient channels (activations 30× the
// others, as in LLM activations after RMSNorm), and two independent activation samples from
// the same distribution: one to search on, one to measure.
func salientLayer(seed uint64, rows, cols, n int) (w, xfit, xtest []float32, salient []int) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	w = randWeights(rng, rows, cols, false)
	salient = []int{3, 50, 77, 130, 200}
	mag := make([]float64, cols)
	for j := range mag {
		mag[j] = math.Exp(0.3 * rng.NormFloat64())
	}
	for _, j := range salient {
		mag[j] *= 30
	}
	draw := func() []float32 {
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(mag[i%cols] * rng.NormFloat64())
		}
		return x
	}
	return w, draw(), draw(), salient
}

// layerErr is the mean squared output error mean((x·(Ŵ − W)ᵀ)²) in float64, where Ŵ is the
// AWQ reconstruction Q(W·diag(s))·diag(s)⁻¹.
func layerErr(w []float32, deq, s []float32, rows, cols int, x []float32) float64 {
	n := len(x) / cols
	var e float64
	for t := 0; t < n; t++ {
		for r := 0; r < rows; r++ {
			var y float64
			for j := 0; j < cols; j++ {
				d := float64(deq[r*cols+j])/float64(s[j]) - float64(w[r*cols+j])
				y += float64(x[t*cols+j]) * d
			}
			e += y * y
		}
	}
	return e / float64(n*rows)
}

// TestAWQBeatsRTN: on held-out activations, AWQ's layer error is clearly below RTN's, the
// salient channels get the largest scales, and the reported losses match a float64
// recomputation.
func TestAWQBeatsRTN(t *testing.T) {
	const rows, cols, n = 32, 256, 128
	w, xfit, xtest, salient := salientLayer(21, rows, cols, n)
	ones := make([]float32, cols)
	for j := range ones {
		ones[j] = 1
	}
	for _, c := range []struct {
		spec GroupSpec
		opts AWQOptions
	}{
		{GroupSpec{Bits: 4, Group: 128, Symmetric: true}, AWQOptions{}},
		{GroupSpec{Bits: 4, Group: 64}, AWQOptions{}},
		{GroupSpec{Bits: 4, Group: 128, Symmetric: true}, AWQOptions{DuoScaling: true}},
		{GroupSpec{Bits: 4, Group: 32}, AWQOptions{ClipSearch: true, Grid: 10}},
	} {
		res, err := AWQ(w, rows, cols, xfit, n, c.spec, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		rtn, err := QuantizeGroups(c.spec, w, rows, cols, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := layerErr(w, res.Tensor.Dequantize(), res.Scales, rows, cols, xfit); math.Abs(got-res.Loss) > 1e-9*got {
			t.Errorf("%v: reported loss %g, recomputed %g", c.spec, res.Loss, got)
		}
		if got := layerErr(w, rtn.Dequantize(), ones, rows, cols, xfit); !c.opts.ClipSearch && math.Abs(got-res.BaseLoss) > 1e-9*got {
			t.Errorf("%v: reported RTN loss %g, recomputed %g", c.spec, res.BaseLoss, got)
		}
		ea := layerErr(w, res.Tensor.Dequantize(), res.Scales, rows, cols, xtest)
		er := layerErr(w, rtn.Dequantize(), ones, rows, cols, xtest)
		t.Logf("%v %+v: α %.2f, held-out error RTN %.4g, AWQ %.4g (ratio %.3f)", c.spec, c.opts, res.Alpha, er, ea, ea/er)
		if !(ea < 0.8*er) {
			t.Errorf("%v %+v: AWQ held-out error %g is not below 0.8 × RTN %g", c.spec, c.opts, ea, er)
		}
		if res.Alpha <= 0 {
			t.Errorf("%v: α = %g, want a positive exponent", c.spec, res.Alpha)
		}
		var maxOther float32
		for j, s := range res.Scales {
			if !contains(salient, j) {
				maxOther = max(maxOther, s)
			}
		}
		for _, j := range salient {
			if res.Scales[j] <= maxOther {
				t.Errorf("%v: salient channel %d has scale %g ≤ %g of a plain channel", c.spec, j, res.Scales[j], maxOther)
			}
		}
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestAWQUniformInputsKeepsRTN: when every channel has the same activation statistics the
// scales are flat, so AWQ cannot do better than RTN; it must not do worse on its sample.
func TestAWQUniformInputsKeepsRTN(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const rows, cols, n = 8, 128, 64
	w := randWeights(rng, rows, cols, false)
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	res, err := AWQ(w, rows, cols, x, n, GroupSpec{Bits: 4, Group: 32, Symmetric: true}, AWQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loss > res.BaseLoss {
		t.Fatalf("AWQ loss %g above RTN %g", res.Loss, res.BaseLoss)
	}
}

func TestAWQErrors(t *testing.T) {
	w := make([]float32, 64)
	spec := GroupSpec{Bits: 4, Group: 32}
	if _, err := AWQ(w, 1, 64, make([]float32, 10), 1, spec, AWQOptions{}); err == nil || !strings.Contains(err.Error(), "10 activations for 1 rows of 64") {
		t.Errorf("short x: %v", err)
	}
	x := make([]float32, 64)
	x[7] = float32(math.Inf(-1))
	if _, err := AWQ(w, 1, 64, x, 1, spec, AWQOptions{}); err == nil || !strings.Contains(err.Error(), "activation weight [0, 7] is -Inf") {
		t.Errorf("Inf x: %v", err)
	}
}
