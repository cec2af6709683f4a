package runtime

import "github.com/gquant/gquant/runtime/kernels"

// rmsNorm writes, for each of n rows of dim values, x·w / sqrt(mean(x²) + eps) into dst (see
// kernels.RMSNorm).
func rmsNorm(dst, x, w []float32, n, dim int, eps float64) {
	for t := 0; t < n; t++ {
		kernels.RMSNorm(dst[t*dim:(t+1)*dim], x[t*dim:(t+1)*dim], w, eps)
	}
}

// addBias adds b to each of the n rows of x.
func addBias(x, b []float32, n int) {
	d := len(b)
	for t := 0; t < n; t++ {
		row := x[t*d : (t+1)*d]
		for i, v := range b {
			row[i] += v
		}
	}
}
