package kernels

import "math"

// Float32 vector operations of the forward pass (attention, SwiGLU). The generic versions
// below are the reference; the assembly ones (AVX-512) compute the exponential with a
// polynomial (relative error about 2e-7) and sum in float32, so they agree with these to
// float32 rounding, not bit for bit.

// Softmax replaces x by softmax(x): e^(x_i − max x) / Σ_j e^(x_j − max x).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	if f := current.softmax; f != nil {
		f(&x[0], len(x))
		return
	}
	softmaxGeneric(x)
}

func softmaxGeneric(x []float32) {
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

// SiLUMul writes silu(gate[i])·up[i] into dst[i] for i < len(dst), with silu(g) = g/(1+e^−g).
func SiLUMul(dst, gate, up []float32) {
	n := len(dst)
	if n == 0 {
		return
	}
	gate, up = gate[:n], up[:n]
	if f := current.siluMul; f != nil {
		f(&dst[0], &gate[0], &up[0], n)
		return
	}
	for i, g := range gate {
		s := float32(float64(g) / (1 + math.Exp(-float64(g))))
		dst[i] = s * up[i]
	}
}

// DotRows sets y[j] = scale·Σ_i q[i]·K[j·stride+i] for j < len(y) and i < len(q): the dot
// products of q with len(y) rows of K spaced stride floats apart.
func DotRows(y, q, K []float32, stride int, scale float32) {
	n := len(q)
	if len(y) == 0 {
		return
	}
	_ = K[(len(y)-1)*stride+n-1]
	if f := current.dotRows; f != nil && n%16 == 0 && n > 0 {
		f(&y[0], &q[0], &K[0], 4*stride, len(y), n, scale)
		return
	}
	for j := range y {
		y[j] = dotF32Rows(q, K[j*stride:j*stride+n]) * scale
	}
}

// dotF32Rows is the float32 dot product of a and b (same length), four partial sums.
func dotF32Rows(a, b []float32) float32 {
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

// AxpyRows sets out[i] = Σ_j p[j]·V[j·stride+i] for i < len(out) and j < len(p): the sum of
// len(p) rows of V spaced stride floats apart, weighted by p.
func AxpyRows(out, p, V []float32, stride int) {
	n := len(out)
	if n == 0 {
		return
	}
	if len(p) > 0 {
		_ = V[(len(p)-1)*stride+n-1]
	}
	if f := current.axpyRows; f != nil && n%16 == 0 {
		var pp *float32
		if len(p) > 0 {
			pp = &p[0]
		}
		f(&out[0], pp, &V[0], 4*stride, len(p), n)
		return
	}
	clear(out)
	for j, pj := range p {
		v := V[j*stride : j*stride+n]
		for i, x := range v {
			out[i] += pj * x
		}
	}
}

// RMSNorm writes x·w / sqrt(mean(x²) + eps) into dst (len(x) values): the sum of squares is
// taken in float64, as ggml does; each product is rounded to float32 (x·scale, then ·w).
func RMSNorm(dst, x, w []float32, eps float64) {
	n := len(x)
	if n == 0 {
		return
	}
	dst, w = dst[:n], w[:n]
	var ss float64
	if f := current.sumSquares; f != nil {
		ss = f(&x[0], n)
	} else {
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
	}
	scale := float32(1 / math.Sqrt(ss/float64(n)+eps))
	if f := current.scaleMul; f != nil {
		f(&dst[0], &x[0], &w[0], n, scale)
		return
	}
	for i, v := range x {
		dst[i] = float32(v*scale) * w[i]
	}
}

// Add adds x to dst elementwise (len(dst) values).
func Add(dst, x []float32) {
	n := len(dst)
	if n == 0 {
		return
	}
	x = x[:n]
	if f := current.add; f != nil {
		f(&dst[0], &x[0], n)
		return
	}
	for i, v := range x {
		dst[i] += v
	}
}

// AddColumnSums adds to the per-column statistics of n rows x (cols floats each, row-major):
// s2[j] += x[t,j]², s1[j] += x[t,j] in float64 (each square exact), in row order, and
// am[j] = max(am[j], |x[t,j]|) (a NaN leaves am[j] alone). The bits are the same in every
// implementation. (Calibration's Σx², Σx and max|x| of each linear layer's input.)
func AddColumnSums(s2, s1 []float64, am []float32, x []float32, n, cols int) {
	if n <= 0 || cols <= 0 {
		return
	}
	s2, s1, am, x = s2[:cols], s1[:cols], am[:cols], x[:n*cols]
	j0 := 0
	if f := current.colSums; f != nil && cols >= 32 {
		f(&s2[0], &s1[0], &am[0], &x[0], n, cols, cols/32)
		j0 = cols &^ 31
	}
	for t := 0; t < n; t++ {
		row := x[t*cols : (t+1)*cols]
		for j := j0; j < cols; j++ {
			d := float64(row[j])
			// The explicit conversion keeps d*d from fusing with the addition (the square is
			// exact anyway).
			s2[j] += float64(d * d)
			s1[j] += d
			if a := float32(math.Abs(d)); a > am[j] {
				am[j] = a
			}
		}
	}
}
