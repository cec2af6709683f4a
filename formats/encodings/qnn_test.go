package encodings

import (
	"math"
	"testing"
)

// QNN's convention, float = (q + offset)·scale, worked by hand: [−1, 3] on 16 bits gives scale
// 4/65535 and offset round(−1/scale) = round(−16383.75) = −16384; zero (q = 16384) is exact.
func TestAsymmetric(t *testing.T) {
	sc, off := Asymmetric(-1, 3, 16)
	if sc != float32(4.0/65535) || off != -16384 {
		t.Errorf("[-1, 3]: scale %g offset %d, want %g -16384", sc, off, float32(4.0/65535))
	}
	cases := []struct {
		lo, hi   float64
		bits     int
		wantLo   float64 // the encoded range must reach these (within a step)
		wantHi   float64
		wantZero int32 // expected offset when fixed by the range (1 = do not check)
	}{
		{0.5, 2, 16, 0, 2, 0},       // all positive: widened to include 0, offset 0
		{-3, -1, 16, -3, 0, -65535}, // all negative: 0 is the top of the grid
		{0, 0, 16, 0, 1e-4, 0},      // empty range: at least 1e-4 wide
		{-7.25, 0.125, 8, -7.25, 0.125, 1},
		{-1e-9, 1e-9, 16, -1e-9, 1e-9, 1},
	}
	for _, c := range cases {
		sc, off := Asymmetric(c.lo, c.hi, c.bits)
		steps := math.Ldexp(1, c.bits) - 1
		s := float64(sc)
		gridLo, gridHi := float64(off)*s, (float64(off)+steps)*s
		switch {
		case off > 0 || float64(off) < -steps:
			t.Errorf("[%g, %g]: offset %d outside [−%g, 0]", c.lo, c.hi, off, steps)
		case gridLo > c.wantLo+s/2+1e-12 || gridHi < c.wantHi-s/2-1e-12:
			t.Errorf("[%g, %g]: grid [%g, %g] does not cover [%g, %g]", c.lo, c.hi, gridLo, gridHi, c.wantLo, c.wantHi)
		case gridHi-gridLo < MinRange*(1-1e-6):
			t.Errorf("[%g, %g]: grid narrower than 1e-4", c.lo, c.hi)
		case c.wantZero != 1 && off != c.wantZero:
			t.Errorf("[%g, %g]: offset %d, want %d", c.lo, c.hi, off, c.wantZero)
		}
		// Zero is exactly representable: q = −offset is on the grid and decodes to 0.
		if q := -off; q < 0 || float64(q) > steps || float32(float64(q+off)*s) != 0 {
			t.Errorf("[%g, %g]: zero is not on the grid (offset %d)", c.lo, c.hi, off)
		}
	}
	if sc, off := Symmetric(1.27, 8); sc != float32(0.01) || off != -128 {
		t.Errorf("symmetric 8-bit of 1.27: %g %d, want 0.01 −128", sc, off)
	}
}
