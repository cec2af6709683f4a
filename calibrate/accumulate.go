package calibrate

// finishHessian mirrors the upper triangle into the lower one.
func finishHessian(h []float64, c int) {
	for i := 0; i < c; i++ {
		for j := i + 1; j < c; j++ {
			h[j*c+i] = h[i*c+j]
		}
	}
}
