package stats

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkFoldFloats measures the exact fold of float64 partial sums of a typical magnitude
// (what calibrate does per chunk for Σx², Σx and each Hessian element).
func BenchmarkFoldFloats(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]float64, 1<<14)
	for i := range v {
		v[i] = r.NormFloat64() * 30
	}
	acc := make([]Fixed, len(v))
	b.SetBytes(int64(8 * len(v)))
	for b.Loop() {
		FoldFloats(acc, v)
	}
}
