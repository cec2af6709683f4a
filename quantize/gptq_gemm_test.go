package quantize

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// eachGemmImpl runs f with every kernel implementation this CPU has selected in turn, and
// restores the one in use.
func eachGemmImpl(t testing.TB, f func(name string)) {
	k, ax, ger, name := gemmKernel, axpySub, gerSub, gemmImpl
	defer func() { gemmKernel, axpySub, gerSub, gemmImpl = k, ax, ger, name }()
	impls := gemmImpls()
	names := make([]string, 0, len(impls))
	for n := range impls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		impls[n]()
		f(n)
	}
}

func gptqRandSlice(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = rng.NormFloat64() * math.Exp(2*rng.NormFloat64())
	}
	return s
}

// naiveGemmSub is C −= A·B element by element, t in order, each product rounded before the
// subtraction: the order every kernel must reproduce bit for bit.
func naiveGemmSub(m, n, k int, a []float64, lda int, b []float64, ldb int, transB bool, c []float64, ldc int, lower bool) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			if lower && j > i {
				continue
			}
			s := c[i*ldc+j]
			for t := 0; t < k; t++ {
				var bv float64
				if transB {
					bv = b[j*ldb+t]
				} else {
					bv = b[t*ldb+j]
				}
				s -= float64(a[i*lda+t] * bv)
			}
			c[i*ldc+j] = s
		}
	}
}

// TestGemmSubMatchesNaive: every implementation gives the naive order's bits, on shapes with
// edge tiles, several cache blocks in each dimension, strided operands, transB and lower.
func TestGemmSubMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 32, 1}, {4, 32, 128}, {5, 33, 129}, {17, 70, 3},
		{130, 40, 260}, {9, 1100, 20}, {260, 260, 64}, {64, 2100, 130}}
	eachGemmImpl(t, func(impl string) {
		var w gemmWork
		for _, sh := range shapes {
			m, n, k := sh[0], sh[1], sh[2]
			for _, transB := range []bool{false, true} {
				for _, lower := range []bool{false, true} {
					if lower && m != n {
						continue
					}
					lda, ldb, ldc := k+3, n+1, n+5
					if transB {
						ldb = k + 2
					}
					a := gptqRandSlice(rng, m*lda)
					var b []float64
					if transB {
						b = gptqRandSlice(rng, n*ldb)
					} else {
						b = gptqRandSlice(rng, k*ldb)
					}
					c := gptqRandSlice(rng, m*ldc)
					want := append([]float64(nil), c...)
					naiveGemmSub(m, n, k, a, lda, b, ldb, transB, want, ldc, lower)
					gemmSub(&w, m, n, k, a, lda, b, ldb, transB, c, ldc, lower)
					for i := 0; i < m; i++ {
						for j := 0; j < ldc; j++ {
							if lower && j > i && j < n {
								continue
							}
							if g, x := c[i*ldc+j], want[i*ldc+j]; math.Float64bits(g) != math.Float64bits(x) {
								t.Fatalf("%s %d×%d×%d transB %v lower %v: C[%d][%d] = %v, want %v", impl, m, n, k, transB, lower, i, j, g, x)
							}
						}
					}
				}
			}
		}
	})
}

// TestGPTQGemmMatchesGonum: the lazy update gives the bits of gonum's Dgemm (C += (−1)·A·B),
// which GPTQ called before.
func TestGPTQGemmMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	const m, n, k = 70, 300, 128
	a, b, c := gptqRandSlice(rng, m*k), gptqRandSlice(rng, k*n), gptqRandSlice(rng, m*n)
	want := append([]float64(nil), c...)
	gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, -1, a, k, b, n, 1, want, n)
	eachGemmImpl(t, func(impl string) {
		got := append([]float64(nil), c...)
		var w gemmWork
		gemmSub(&w, m, n, k, a, k, b, n, false, got, n, false)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%s: element %d = %v, gonum %v", impl, i, got[i], want[i])
			}
		}
	})
}

func TestAxpySub(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	eachGemmImpl(t, func(impl string) {
		for n := 0; n < 80; n++ {
			u, w := gptqRandSlice(rng, n+3), gptqRandSlice(rng, n)
			e := rng.NormFloat64()
			want := append([]float64(nil), w...)
			for j := range want {
				want[j] -= float64(e * u[j])
			}
			axpySub(e, u, w)
			for j := range w {
				if math.Float64bits(w[j]) != math.Float64bits(want[j]) {
					t.Fatalf("%s n=%d: w[%d] = %v, want %v", impl, n, j, w[j], want[j])
				}
			}
		}
	})
}

func TestGerSub(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	eachGemmImpl(t, func(impl string) {
		for m := 0; m <= 9; m++ {
			for n := 0; n < 40; n++ {
				ldw := n + 3
				e, u := gptqRandSlice(rng, m), gptqRandSlice(rng, n+2)
				w := gptqRandSlice(rng, m*ldw)
				want := append([]float64(nil), w...)
				for r := 0; r < m; r++ {
					for j := 0; j < n; j++ {
						want[r*ldw+j] -= float64(e[r] * u[j])
					}
				}
				gerSub(e, u, w, ldw, n)
				for i := range w {
					if math.Float64bits(w[i]) != math.Float64bits(want[i]) {
						t.Fatalf("%s m=%d n=%d: w[%d] = %v, want %v", impl, m, n, i, w[i], want[i])
					}
				}
			}
		}
	})
}

func BenchmarkGemmSub(b *testing.B) {
	rng := rand.New(rand.NewPCG(37, 38))
	const m, n, k = 1024, 2944, 128
	a, bb, c := gptqRandSlice(rng, m*k), gptqRandSlice(rng, k*n), gptqRandSlice(rng, m*n)
	eachGemmImpl(b, func(impl string) {
		b.Run(impl, func(b *testing.B) {
			var w gemmWork
			for i := 0; i < b.N; i++ {
				gemmSub(&w, m, n, k, a, k, bb, n, false, c, n, false)
			}
			b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gmuladd/s")
		})
	})
	b.Run("gonum", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, -1, a, k, bb, n, 1, c, n)
		}
		b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gmuladd/s")
	})
}
