package quantize

import (
	"math"
	"math/rand"
	"testing"
)

// TestLPBQ checks the LPBQ encoder against its definition, in float64.
func TestLPBQ(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	rows, cols, bs := 5, 128, 32
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * math.Pow(10, float64(i/bs%4-2)))
	}
	for i := 0; i < cols; i++ {
		w[3*cols+i] = 0 // an all-zero row
	}
	lt := EncodeLPBQ(w, rows, cols, bs, 4, 8)
	for r := 0; r < rows; r++ {
		c := float64(lt.Scales[r])
		if !(c > 0) {
			t.Fatalf("row %d: channel scale %g", r, c)
		}
		for b := 0; b < cols/bs; b++ {
			k := int(lt.Blocks[r*(cols/bs)+b])
			if k < 1 || k > 16 {
				t.Fatalf("row %d block %d: int scale %d outside [1, 16]", r, b, k)
			}
			s := float64(float32(float32(c) * float32(k)))
			for i := b * bs; i < (b+1)*bs; i++ {
				q := int(lt.Codes[r*cols+i])
				if q < -8 || q > 7 {
					t.Fatalf("code %d", q)
				}
				if d := math.Abs(float64(w[r*cols+i]) - float64(q)*s); d > s/2*(1+1e-6) {
					t.Fatalf("row %d col %d: |w − q·s| = %g > s/2 = %g (w %g, q %d)", r, i, d, s/2, w[r*cols+i], q)
				}
			}
		}
	}
}
