package quantize

import (
	"math"
	"strings"
	"testing"
)

func TestSmoothScales(t *testing.T) {
	// Two layers sharing an input: the column maxima combine element-wise.
	wq := []float32{0.5, -2, 0.1, 0, 1, 0.25, -0.3, 0} // 2 × 4
	wk := []float32{-0.7, 1, 0.05, 0}                  // 1 × 4
	wmax := ColumnAbsMax(wq, 2, 4)
	for j, v := range ColumnAbsMax(wk, 1, 4) {
		wmax[j] = max(wmax[j], v)
	}
	if !equalF32(wmax, []float32{1, 2, 0.3, 0}) {
		t.Fatalf("column maxima %v", wmax)
	}
	act := []float32{16, 0.5, 30, 4}
	s, err := SmoothScales(act, wmax, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	// By hand: √16/√1 = 4, √0.5/√2 = 0.5, √30/√0.3 = 10, √4/√1e-5 (clamped weight max).
	want := []float64{4, 0.5, 10, 2 / math.Sqrt(1e-5)}
	for j := range want {
		if math.Abs(float64(s[j])-want[j]) > 1e-6*want[j] {
			t.Errorf("s[%d] = %g, want %g", j, s[j], want[j])
		}
	}
	// With α = 0.5 the migrated maxima meet: max|X_j|/s_j = max|W_j|·s_j.
	for j := 0; j < 3; j++ {
		a, b := float64(act[j])/float64(s[j]), float64(wmax[j])*float64(s[j])
		if math.Abs(a-b) > 1e-6*a {
			t.Errorf("channel %d: activation max %g, weight max %g after smoothing", j, a, b)
		}
	}
	// α = 1 moves everything into the weights (s = max|X|), α = 0 only divides by max|W|.
	s1, _ := SmoothScales(act[:3], wmax[:3], 1)
	s0, _ := SmoothScales(act[:3], wmax[:3], 0)
	for j := 0; j < 3; j++ {
		if s1[j] != act[j] || math.Abs(float64(s0[j])-1/float64(wmax[j])) > 1e-6/float64(wmax[j]) {
			t.Errorf("channel %d: α=1 gives %g, α=0 gives %g", j, s1[j], s0[j])
		}
	}
	// A dead activation channel gets the lower clamp 1e-5.
	sd, _ := SmoothScales([]float32{0}, []float32{1}, 0.5)
	if sd[0] != float32(1e-5) {
		t.Errorf("dead channel scale %g", sd[0])
	}
	for _, c := range []struct {
		act, w []float32
		alpha  float64
		want   string
	}{
		{[]float32{1}, []float32{1, 2}, 0.5, "1 activation maxima for 2 weight columns"},
		{[]float32{1}, []float32{1}, 1.5, "alpha 1.5 outside [0, 1]"},
		{[]float32{float32(math.NaN())}, []float32{1}, 0.5, "channel 0: maxima NaN, 1"},
	} {
		if _, err := SmoothScales(c.act, c.w, c.alpha); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}
