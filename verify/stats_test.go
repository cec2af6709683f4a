package verify

import (
	"math"
	"testing"
)

func TestPercentileLlamaRule(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	cases := []struct{ f, want float64 }{
		{0, 1}, {1, 10}, {-1, 1}, {2, 10},
		{0.5, 5.5},   // p = 4.5: halfway between 5 and 6
		{0.9, 9.1},   // p = 8.1
		{0.99, 9.91}, // p = 8.91
	}
	for _, c := range cases {
		if got := Percentile(s, c.f); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Percentile(%g) = %g, want %g", c.f, got, c.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 0.5)) {
		t.Error("Percentile of nothing should be NaN")
	}
}

func TestMedian(t *testing.T) {
	if got := Median([]float64{1, 2, 3, 10}); got != 2.5 {
		t.Errorf("even median %g, want 2.5", got)
	}
	if got := Median([]float64{1, 2, 10}); got != 2 {
		t.Errorf("odd median %g, want 2", got)
	}
}

func TestMeanErr(t *testing.T) {
	// x = 1..5: mean 3, population variance 2, stderr sqrt(2/4).
	m, e := MeanErr([]float64{1, 2, 3, 4, 5})
	if m != 3 || math.Abs(e-math.Sqrt(0.5)) > 1e-15 {
		t.Errorf("MeanErr = %g ± %g, want 3 ± %g", m, e, math.Sqrt(0.5))
	}
	if _, e := MeanErr([]float64{7}); e != 0 {
		t.Errorf("one value: err %g, want 0", e)
	}
	if got, want := BinomialErr(0.9, 101), math.Sqrt(0.9*0.1/100); got != want {
		t.Errorf("BinomialErr = %g, want %g", got, want)
	}
	if got := RMS([]float64{3, -4}); math.Abs(got-math.Sqrt(12.5)) > 1e-15 {
		t.Errorf("RMS = %g", got)
	}
}

func TestSNR(t *testing.T) {
	if got := SNRdB(100, 1); got != 20 {
		t.Errorf("SNR 100/1 = %g dB, want 20", got)
	}
	if !math.IsInf(SNRdB(1, 0), 1) || !math.IsInf(PSNRdB(1, 0, 3), 1) {
		t.Error("zero noise should give +Inf")
	}
}
