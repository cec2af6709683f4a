package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// vecLens covers empty-ish, sub-vector, whole-vector and ragged lengths.
var vecLens = []int{1, 5, 16, 17, 31, 64, 128, 129, 200, 1000}

// TestSoftmax checks Softmax against a float64 computation, including inputs far below the
// maximum (whose exponentials underflow to zero) and large values.
func TestSoftmax(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, n := range vecLens {
			for _, spread := range []float64{0.1, 3, 40, 200} {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64()*spread + 1000*float64(i%3-1)*float64(i%2))
				}
				want := make([]float64, n)
				mx := math.Inf(-1)
				for _, v := range x {
					mx = math.Max(mx, float64(v))
				}
				var sum float64
				for i, v := range x {
					want[i] = math.Exp(float64(v) - mx)
					sum += want[i]
				}
				got := append([]float32(nil), x...)
				Softmax(got)
				var total float64
				for i := range got {
					w := want[i] / sum
					total += float64(got[i])
					if d := math.Abs(float64(got[i]) - w); d > 2e-6*w+1e-30 && d > 1e-37 {
						t.Fatalf("n %d spread %v: p[%d] = %v, want %v", n, spread, i, got[i], w)
					}
				}
				if math.Abs(total-1) > 1e-5 {
					t.Errorf("n %d spread %v: probabilities sum to %v", n, spread, total)
				}
			}
		}
	})
}

// TestSiLUMul checks silu(g)·u against float64, over the range where e^−g over- and
// underflows.
func TestSiLUMul(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, n := range vecLens {
			g, u := make([]float32, n), make([]float32, n)
			for i := range g {
				g[i] = float32(rng.NormFloat64() * 4)
				u[i] = float32(rng.NormFloat64())
			}
			g[0] = -120 // e^120 overflows float32
			if n > 2 {
				g[1], g[2] = 95, 0
			}
			dst := make([]float32, n)
			SiLUMul(dst, g, u)
			for i := range dst {
				gv := float64(g[i])
				want := gv / (1 + math.Exp(-gv)) * float64(u[i])
				if d := math.Abs(float64(dst[i]) - want); d > 1e-6*math.Abs(want)+1e-37 {
					t.Fatalf("n %d: silu(%v)·%v = %v, want %v", n, g[i], u[i], dst[i], want)
				}
			}
		}
	})
}

// TestDotRowsAxpyRows checks both against float64 sums for several row counts (the 4-row
// blocks and the remainder) and head sizes (vector multiples and ragged ones).
func TestDotRowsAxpyRows(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(8, 9))
		for _, n := range []int{8, 16, 48, 64, 128, 144, 256} {
			for _, rows := range []int{0, 1, 3, 4, 7, 9} {
				stride := n + 16*(rows%2) // rows packed or spaced
				K := make([]float32, max(rows, 1)*stride)
				for i := range K {
					K[i] = float32(rng.NormFloat64())
				}
				q := make([]float32, n)
				for i := range q {
					q[i] = float32(rng.NormFloat64())
				}
				y := make([]float32, rows)
				DotRows(y, q, K, stride, 0.125)
				for j := range y {
					var want, mag float64
					for i := 0; i < n; i++ {
						p := float64(q[i]) * float64(K[j*stride+i])
						want += p
						mag += math.Abs(p)
					}
					want *= 0.125
					if d := math.Abs(float64(y[j]) - want); d > 1e-6*0.125*mag {
						t.Fatalf("DotRows n %d rows %d: y[%d] = %v, want %v", n, rows, j, y[j], want)
					}
				}
				p := make([]float32, rows)
				for j := range p {
					p[j] = float32(rng.Float64())
				}
				out := make([]float32, n)
				for i := range out {
					out[i] = float32(math.NaN()) // must be overwritten
				}
				AxpyRows(out, p, K, stride)
				for i := range out {
					var want, mag float64
					for j := 0; j < rows; j++ {
						v := float64(p[j]) * float64(K[j*stride+i])
						want += v
						mag += math.Abs(v)
					}
					if d := math.Abs(float64(out[i]) - want); !(d <= 1e-6*mag) {
						t.Fatalf("AxpyRows n %d rows %d: out[%d] = %v, want %v", n, rows, i, out[i], want)
					}
				}
			}
		}
	})
}

// TestRMSNormAdd checks RMSNorm against float64 (the sum of squares of float32 values is exact
// to within float64 rounding, so the result is within a few float32 ulps) and Add exactly.
func TestRMSNormAdd(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(10, 11))
		for _, n := range vecLens {
			x, w := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 3)
				w[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, n)
			RMSNorm(dst, x, w, 1e-6)
			var ss float64
			for _, v := range x {
				ss += float64(v) * float64(v)
			}
			scale := 1 / math.Sqrt(ss/float64(n)+1e-6)
			for i := range dst {
				want := float64(x[i]) * scale * float64(w[i])
				if d := math.Abs(float64(dst[i]) - want); d > 4e-7*math.Abs(want) {
					t.Fatalf("n %d: RMSNorm[%d] = %v, want %v", n, i, dst[i], want)
				}
			}
			y := append([]float32(nil), w...)
			Add(y, x)
			for i := range y {
				if want := w[i] + x[i]; y[i] != want {
					t.Fatalf("n %d: Add[%d] = %v, want %v", n, i, y[i], want)
				}
			}
		}
	})
}
