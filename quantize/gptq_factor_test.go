package quantize

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// realisticHessian is the damped Hessian GPTQ factors, XᵀX + λI (λ = 1 % of the mean
// diagonal), of n activations of cols correlated channels (correlatedInputs) in which a few
// channels are outliers, 30 to 100 times larger, as in a transformer's residual stream; with
// dead, the channels ≡ 3 mod 41 are never active (H_ii = 0, then 1, as NewGPTQPlan does).
func realisticHessian(rng *rand.Rand, n, cols int, dead bool) []float64 {
	X := correlatedInputs(rng, n, cols, min(32, cols))
	for j := 0; j < cols; j++ {
		f := 1.0
		if j%97 == 13 {
			f = 30 + 70*rng.Float64()
		}
		if dead && j%41 == 3 {
			f = 0
		}
		for t := 0; t < n; t++ {
			X[t*cols+j] *= f
		}
	}
	H := gramFast(X, n, cols)
	var mean float64
	for i := 0; i < cols; i++ {
		if H[i*cols+i] == 0 {
			H[i*cols+i] = 1
		}
		mean += H[i*cols+i]
	}
	for i := 0; i < cols; i++ {
		H[i*cols+i] += 0.01 * mean / float64(cols)
	}
	return H
}

// gramFast is XᵀX (cols × cols) for X n × cols, with gemmSub (test and benchmark setup):
// H = 0 − Xᵀ·(−X).
func gramFast(X []float64, n, cols int) []float64 {
	xt := make([]float64, cols*n)
	neg := make([]float64, cols*n)
	for t := 0; t < n; t++ {
		for j := 0; j < cols; j++ {
			xt[j*n+t] = X[t*cols+j]
			neg[j*n+t] = -X[t*cols+j]
		}
	}
	H := make([]float64, cols*cols)
	var w gemmWork
	gemmSub(&w, cols, cols, n, xt, n, neg, n, true, H, cols, true)
	for i := 0; i < cols; i++ {
		for j := 0; j < i; j++ {
			H[j*cols+i] = H[i*cols+j]
		}
	}
	return H
}

// scalarInvCholUpper is the factor of gptq_chol.go by its defining formulas, one element at a
// time: the bits the blocked code must give for any block size.
func scalarInvCholUpper(h []float64, n int) []float64 {
	a := append([]float64(nil), h...)
	reverseF64(a)
	L := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			s := a[i*n+j]
			for t := 0; t < j; t++ {
				s -= float64(L[i*n+t] * L[j*n+t])
			}
			if i == j {
				L[i*n+i] = math.Sqrt(s)
			} else {
				L[i*n+j] = s / L[j*n+j]
			}
		}
	}
	X := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < i; j++ {
			var s float64
			for t := j; t < i; t++ {
				s -= float64(L[i*n+t] * X[t*n+j])
			}
			X[i*n+j] = s / L[i*n+i]
		}
		X[i*n+i] = 1 / L[i*n+i]
	}
	reverseF64(X)
	return X
}

// TestGPTQFactorMatchesScalar: the blocked factor gives the scalar formulas' bits for every
// block size and kernel.
func TestGPTQFactorMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, n := range []int{1, 2, 7, 33, 130, 300} {
		H := realisticHessian(rng, 2*n+8, n, n > 40)
		want := scalarInvCholUpper(H, n)
		eachGemmImpl(t, func(impl string) {
			for _, nb := range []int{1, 3, 16, 32, 128} {
				U, err := invCholUpperNB(append([]float64(nil), H...), n, nb)
				if err != nil {
					t.Fatal(err)
				}
				for i := range U {
					if math.Float64bits(U[i]) != math.Float64bits(want[i]) {
						t.Fatalf("%s n=%d nb=%d: U[%d][%d] = %v, scalar %v", impl, n, nb, i/n, i%n, U[i], want[i])
					}
				}
			}
		})
	}
}

// factorErrors compares U with LAPACK's factor V of the same h: the largest difference of an
// element relative to the largest element of its row of V, and the residuals ‖UᵀU·h − I‖max
// of both.
func factorErrors(U, V, h []float64, n int) (rel, resU, resV float64) {
	for i := 0; i < n; i++ {
		var m float64
		for j := i; j < n; j++ {
			m = math.Max(m, math.Abs(V[i*n+j]))
		}
		for j := 0; j < n; j++ {
			rel = math.Max(rel, math.Abs(U[i*n+j]-V[i*n+j])/m)
		}
	}
	res := func(F []float64) float64 {
		// (FᵀF)·h, then minus I.
		FtF := make([]float64, n*n)
		for k := 0; k < n; k++ {
			for i := k; i < n; i++ {
				f := F[k*n+i]
				for j := k; j < n; j++ {
					FtF[i*n+j] += f * F[k*n+j]
				}
			}
		}
		var r float64
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for k := 0; k < n; k++ {
					s += FtF[i*n+k] * h[k*n+j]
				}
				if i == j {
					s--
				}
				r = math.Max(r, math.Abs(s))
			}
		}
		return r
	}
	return rel, res(U), res(V)
}

// TestGPTQFactorMatchesLAPACK: the factor agrees with the route it replaced (gonum's potrf,
// potri, potrf) to a few units of float64 rounding times the Hessian's condition, and leaves
// no larger residual ‖UᵀU·H − I‖.
func TestGPTQFactorMatchesLAPACK(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	sizes := []int{1, 5, 64, 127, 129, 256, 400}
	if !testing.Short() {
		sizes = append(sizes, 700)
	}
	for _, n := range sizes {
		for _, dead := range []bool{false, true} {
			H := realisticHessian(rng, 3*n/2+4, n, dead)
			U, err := invCholUpper(append([]float64(nil), H...), n)
			if err != nil {
				t.Fatal(err)
			}
			V, err := lapackInvCholUpper(append([]float64(nil), H...), n)
			if err != nil {
				t.Fatal(err)
			}
			rel, resU, resV := factorErrors(U, V, H, n)
			t.Logf("n=%d dead %v: max relative difference %.3g; residual ‖UᵀUH − I‖max %.3g (LAPACK %.3g)", n, dead, rel, resU, resV)
			if rel > 1e-11 {
				t.Errorf("n=%d: factor differs from LAPACK's by %.3g (relative)", n, rel)
			}
			if resU > 4*resV+1e-12 {
				t.Errorf("n=%d: residual %.3g, LAPACK's %.3g", n, resU, resV)
			}
			for i := 0; i < n; i++ {
				for j := 0; j < i; j++ {
					if U[i*n+j] != 0 {
						t.Fatalf("n=%d: U[%d][%d] = %v below the diagonal", n, i, j, U[i*n+j])
					}
				}
				if !(U[i*n+i] > 0) {
					t.Fatalf("n=%d: U[%d][%d] = %v", n, i, i, U[i*n+i])
				}
			}
		}
	}
}

// TestGPTQFactorErrors: a Hessian that is not positive definite is refused, whichever block
// the failure is in.
func TestGPTQFactorErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	const n = 300
	for _, bad := range []int{0, 5, 200, n - 1} {
		H := realisticHessian(rng, 400, n, false)
		H[bad*n+bad] = -H[bad*n+bad]
		_, err := invCholUpper(H, n)
		if err == nil || !strings.Contains(err.Error(), "not positive definite") {
			t.Errorf("H[%d][%d] < 0: %v", bad, bad, err)
		}
	}
	H := realisticHessian(rng, 400, n, false)
	H[7*n+7] = math.NaN()
	if _, err := invCholUpper(H, n); err == nil {
		t.Errorf("NaN: no error")
	}
}

// BenchmarkGPTQFactor times the inverse Hessian's factor alone, against LAPACK's route.
func BenchmarkGPTQFactor(b *testing.B) {
	for _, n := range []int{1024, 3072} {
		H := benchHessian(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := make([]float64, n*n)
			for i := 0; i < b.N; i++ {
				copy(h, H)
				if _, err := invCholUpper(h, n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*n*n)/3*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gmuladd/s")
		})
	}
}
