package kernels

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestExpSumValues checks each exponential of ExpSum (one-value calls) against math.Exp
// within 4.5e-16 relative (2 units in the last place; the bound of the assembly's table and
// polynomial), over arguments from 0 down past underflow, and the special values: e^0 = 1,
// e^−∞ = 0, NaN stays NaN.
func TestExpSumValues(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(31, 32))
		check := func(v float32, m float64) {
			got := ExpSum([]float32{v}, m)
			want := math.Exp(float64(v) - m)
			if math.IsNaN(want) != math.IsNaN(got) || math.Abs(got-want) > 4.5e-16*want+0x1p-1074 {
				t.Fatalf("e^(%v − %v) = %v, want %v (%.3g relative)", v, m, got, want, (got-want)/want)
			}
		}
		for i := 0; i < 200000; i++ {
			var v float32
			switch i % 4 {
			case 0:
				v = -float32(rng.Float64() * 30)
			case 1:
				v = -float32(rng.Float64() * 760) // past the underflow, through the denormals
			case 2:
				v = -float32(rng.Float64() * 1e-3)
			default:
				v = float32(rng.NormFloat64() * 10)
			}
			check(v, float64(max(v, 0))+rng.Float64()*float64(i%2))
		}
		for _, v := range []float32{0, -0x1p-30, -744, -745.1, -745.2, -746, -1e6, float32(math.Inf(-1)), float32(math.NaN())} {
			check(v, 0)
		}
		if got := ExpSum([]float32{3}, 3); got != 1 {
			t.Errorf("e^0 = %v, want 1", got)
		}
	})
}

// TestExpSums checks ExpSums and ExpSum on vocabulary-sized rows and lengths around the
// 8-lane blocks against sums done exactly (big.Float) of math.Exp's values: within 1e-14 of
// the sum of magnitudes.
func TestExpSums(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(33, 34))
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 100, 1023, 151936} {
			x, y := make([]float32, n), make([]float32, n)
			mx, my := math.Inf(-1), math.Inf(-1)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 4)
				y[i] = x[i] + float32(rng.NormFloat64()*0.3)
				if i%97 == 5 {
					x[i] -= 800 // an exponential of 0: left out of w
					y[i] = float32(math.Inf(-1))
				}
				mx, my = max(mx, float64(x[i])), max(my, float64(y[i]))
			}
			sx, sy, w := ExpSums(x, y, mx, my)
			var ex, ey, ew, mag big.Float
			var magW float64
			for i := range x {
				a, b := float64(x[i]), float64(y[i])
				e := math.Exp(a - mx)
				ex.Add(&ex, big.NewFloat(e))
				ey.Add(&ey, big.NewFloat(math.Exp(b-my)))
				if e != 0 {
					ew.Add(&ew, big.NewFloat(e*(a-b)))
					magW += math.Abs(e * (a - b))
				}
			}
			_ = mag
			name := fmt.Sprintf("%d values", n)
			for _, c := range []struct {
				what     string
				got      float64
				want     *big.Float
				mag, tol float64
			}{{"sx", sx, &ex, 0, 1e-14}, {"sy", sy, &ey, 0, 1e-14}, {"w", w, &ew, magW, 1e-14}} {
				want, _ := c.want.Float64()
				mag := c.mag
				if mag == 0 {
					mag = want
				}
				if math.Abs(c.got-want) > c.tol*mag {
					t.Errorf("%s: %s = %v, want %v", name, c.what, c.got, want)
				}
			}
			if s := ExpSum(x, mx); s != sx {
				t.Errorf("%s: ExpSum %v, ExpSums' sx %v", name, s, sx)
			}
		}
	})
}
