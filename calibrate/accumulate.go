package calibrate

import "math"

// addSums accumulates into s2, s1 and am Σx², Σx and max|x| per column over the n rows of x
// (n × c, row-major), the rows in order.
func addSums(s2, s1 []float64, am []float32, x []float32, n, c int) {
	for t := 0; t < n; t++ {
		row := x[t*c : (t+1)*c]
		for j, v := range row {
			d := float64(v)
			// The explicit conversion keeps d*d from fusing with the addition, so the bits
			// do not depend on GOAMD64.
			s2[j] += float64(d * d)
			s1[j] += d
			if a := float32(math.Abs(d)); a > am[j] {
				am[j] = a
			}
		}
	}
}

// finishHessian mirrors the upper triangle into the lower one.
func finishHessian(h []float64, c int) {
	for i := 0; i < c; i++ {
		for j := i + 1; j < c; j++ {
			h[j*c+i] = h[i*c+j]
		}
	}
}
