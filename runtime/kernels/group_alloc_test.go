package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestGroupAllocs checks that, once a Scratch has grown, MatVec and MatMul of a group matrix
// allocate nothing under every implementation (single tokens, and batches the AMX tiles take),
// as the ggml types' products do.
func TestGroupAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	const rows, cols = 40, 256
	for _, name := range Impls() {
		restore, err := SetImpl(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []GroupFormat{{4, 32, false}, {4, 64, true}, {8, 0, true}} {
			m := genGroupCase(rng, f, rows, cols, gkRandom).matrix(t)
			for _, mode := range []ActMode{ActFloat, ActQuant} {
				m.Mode = mode
				for _, nTok := range []int{1, 5, 33} {
					X := groupInputs(rng, nTok, cols)
					Y := make([]float32, nTok*rows)
					var s Scratch
					op, run := "MatMul", func() { m.MatMul(Y, X, nTok, 3, rows-5, &s) }
					if nTok == 1 {
						op, run = "MatVec", func() { m.MatVec(Y, X, 3, rows-5, &s) }
					}
					if n := testing.AllocsPerRun(20, run); n != 0 {
						t.Errorf("%s %v %v, %d tokens: %v allocations per %s, want 0", name, f, mode, nTok, n, op)
					}
				}
			}
		}
		restore()
	}
}
