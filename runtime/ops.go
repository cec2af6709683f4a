package runtime

import "math"

// rmsNorm writes, for each of n rows of dim values, x·w / sqrt(mean(x²) + eps) into dst. The
// sum of squares is taken in float64 (as ggml does).
func rmsNorm(dst, x, w []float32, n, dim int, eps float64) {
	for t := 0; t < n; t++ {
		xr, dr := x[t*dim:(t+1)*dim], dst[t*dim:(t+1)*dim]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(ss/float64(dim)+eps))
		for i, v := range xr {
			dr[i] = float32(v*scale) * w[i]
		}
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

// addTo adds x to dst elementwise.
func addTo(dst, x []float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] += v
	}
}

// swiglu writes silu(gate)·up into dst: silu(g) = g / (1 + e^−g).
func swiglu(dst, gate, up []float32) {
	up = up[:len(dst)]
	gate = gate[:len(dst)]
	for i, g := range gate {
		s := float32(float64(g) / (1 + math.Exp(-float64(g))))
		dst[i] = s * up[i]
	}
}

// dot is the float32 dot product of a and b (len(a) ≤ len(b)), four partial sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds a·x to y.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] += a * v
	}
}

// softmaxInPlace turns x into probabilities (the maximum subtracted first) and returns them.
func softmaxInPlace(x []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - mx))
		x[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}
