package kernels

import (
	"fmt"
	"math"
)

// Sums of exponentials in float64, for log-softmax over a vocabulary (verify's metrics: the
// log-sum-exp of a row of logits, and with it KL(softmax(x) ‖ softmax(y))).
//
// The generic code calls math.Exp and adds in order. The assembly (AVX-512F) computes e^t as
// 2^(k/16)·e^r, k = round(16·t/ln 2), |r| ≤ ln 2/32, from a table of the 16 powers 2^(j/16)
// (each correctly rounded) and the degree-7 Taylor polynomial of e^r − 1 (truncation error
// below 2e-18), about 1 unit in the last place; e^t for t < −746 (also −∞) is 0 and NaN stays
// NaN. It adds in 8 lanes, summed at the end. The two agree to float64 rounding, not bit for
// bit; each gives the same bits on every call.

// ExpSums returns sx = Σ e^(x_i − mx), sy = Σ e^(y_i − my) and w = Σ e^(x_i − mx)·(x_i − y_i),
// the last over the terms whose exponential is not 0, for i < len(x), in float64 (x_i − y_i
// and the differences from mx and my are exact). With mx = max x and my = max y: softmax(x)_i
// = e^(x_i − mx)/sx, log-sum-exp(x) = mx + log sx, and KL(softmax(x) ‖ softmax(y)) =
// w/sx + log-sum-exp(y) − log-sum-exp(x).
func ExpSums(x, y []float32, mx, my float64) (sx, sy, w float64) {
	n := len(x)
	if len(y) < n {
		panic(fmt.Sprintf("kernels: ExpSums: %d values of y for %d of x", len(y), n))
	}
	if n == 0 {
		return 0, 0, 0
	}
	if f := current.expSums; f != nil {
		return f(&x[0], &y[0], n, mx, my)
	}
	for i, v := range x {
		a, b := float64(v), float64(y[i])
		e := math.Exp(a - mx)
		sx += e
		if e != 0 {
			w += e * (a - b)
		}
		sy += math.Exp(b - my)
	}
	return sx, sy, w
}

// ExpSum returns Σ e^(x_i − m) in float64.
func ExpSum(x []float32, m float64) float64 {
	if len(x) == 0 {
		return 0
	}
	if f := current.expSum; f != nil {
		return f(&x[0], len(x), m)
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return s
}
