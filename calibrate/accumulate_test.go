package calibrate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// addOuter split over goroutines gives the bits of one goroutine, and both the naive float64
// sums (upper triangle).
func TestAddOuterParallel(t *testing.T) {
	defer func(v int) { parallelOuterWork = v }(parallelOuterWork)
	parallelOuterWork = 0
	r := rand.New(rand.NewPCG(7, 8))
	const n, c = 37, 83 // odd sizes: blocks of four and single rows
	x := make([]float32, n*c)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	one, many := make([]float64, c*c), make([]float64, c*c)
	var s1, s3 []float64
	addOuter(one, x, n, c, 1, &s1)
	addOuter(many, x, n, c, 3, &s3)
	addOuter(one, x[:5*c], 5, c, 1, &s1) // a second call accumulates
	addOuter(many, x[:5*c], 5, c, 3, &s3)
	for i := 0; i < c; i++ {
		for j := i; j < c; j++ {
			var want float64
			for _, rows := range []int{n, 5} {
				for tt := 0; tt < rows; tt++ {
					want += float64(x[tt*c+i]) * float64(x[tt*c+j])
				}
			}
			if one[i*c+j] != many[i*c+j] || math.Abs(one[i*c+j]-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Fatalf("H[%d,%d]: %g (one goroutine) %g (three), want %g", i, j, one[i*c+j], many[i*c+j], want)
			}
		}
	}
}
