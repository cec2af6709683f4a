package verify

import (
	"math"
	"sort"
)

// MeanErr returns the mean of x and its standard error, sqrt(var/(n−1)) with var the population
// variance, as llama-perplexity reports "mean ± err". The error is 0 when len(x) < 2.
func MeanErr(x []float64) (mean, stderr float64) {
	n := len(x)
	if n == 0 {
		return 0, 0
	}
	var s float64
	for _, v := range x {
		s += v
	}
	mean = s / float64(n)
	if n < 2 {
		return mean, 0
	}
	var ss float64
	for _, v := range x {
		d := v - mean
		ss += d * d
	}
	return mean, math.Sqrt(ss / float64(n) / float64(n-1))
}

// RMS returns sqrt(mean(x²)); 0 for an empty slice.
func RMS(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s / float64(len(x)))
}

// sortedCopy returns x sorted ascending, leaving x untouched.
func sortedCopy(x []float64) []float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s
}

// Percentile returns the fraction-quantile of ascending values with llama-perplexity's rule: linear
// interpolation between values[⌊p⌋] and values[⌊p⌋+1] at p = fraction·(n−1); the minimum for
// fraction ≤ 0 and the maximum for fraction ≥ 1. It returns NaN for an empty slice.
func Percentile(sorted []float64, fraction float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case fraction <= 0:
		return sorted[0]
	case fraction >= 1:
		return sorted[n-1]
	}
	p := fraction * float64(n-1)
	i := int(p)
	p -= float64(i)
	j := min(i+1, n-1)
	return (1-p)*sorted[i] + p*sorted[j]
}

// Median returns the middle of ascending values, the mean of the two middle ones when n is even
// (llama-perplexity's rule); NaN for an empty slice.
func Median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 0 {
		return 0.5 * (sorted[n/2-1] + sorted[n/2])
	}
	return sorted[n/2]
}

// BinomialErr is the standard error of a fraction p measured over n trials, sqrt(p(1−p)/(n−1)), as
// llama-perplexity reports "Same top p"; 0 when n < 2.
func BinomialErr(p float64, n int) float64 {
	if n < 2 {
		return 0
	}
	return math.Sqrt(p * (1 - p) / float64(n-1))
}

// SNRdB returns 10·log10(signal/noise) for energies; +Inf when noise is 0 (identical signals),
// NaN when both are 0.
func SNRdB(signal, noise float64) float64 {
	if noise == 0 {
		if signal == 0 {
			return math.NaN()
		}
		return math.Inf(1)
	}
	return 10 * math.Log10(signal/noise)
}

// PSNRdB returns 20·log10(peak / sqrt(noise/n)): the peak absolute reference value over the RMS
// error of n elements; +Inf when the error is 0.
func PSNRdB(peak, noise float64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	if noise == 0 {
		return math.Inf(1)
	}
	return 20 * math.Log10(peak/math.Sqrt(noise/float64(n)))
}
