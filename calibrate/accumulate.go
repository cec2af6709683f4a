package calibrate

import (
	"math"
	"sync"

	"github.com/gquant/gquant/formats/stats"
)

// addSums accumulates into ls Σx², Σx and max|x| over n rows of x (n × Cols, row-major).
func addSums(ls *stats.LinearStats, x []float32, n int) {
	c := ls.Cols
	s2, s1, am := ls.Sum2, ls.Sum, ls.AbsMax
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

// parallelOuterWork is the multiply-adds below which addOuter stays on one goroutine.
var parallelOuterWork = 1 << 22

// addOuter adds xᵀx to h (c × c) over the n rows of x: the upper triangle (j ≥ i) and, for
// rows inside a block of four, a few elements just left of the diagonal that finishHessian
// overwrites. Rows of h are split between up to threads goroutines by equal triangle area;
// every element is summed over t in order, so the result does not depend on the split.
// Four rows of h are updated together, so that they stay in cache while x streams by.
// scratch holds x widened to float64 (grown as needed, reused across calls).
func addOuter(h []float64, x []float32, n, c, threads int, scratch *[]float64) {
	if cap(*scratch) < n*c {
		*scratch = make([]float64, n*c)
	}
	xd := (*scratch)[:n*c]
	for i, v := range x[:n*c] {
		xd[i] = float64(v)
	}
	work := func(i0, i1 int) {
		for i := i0; i < i1; {
			if i+4 <= i1 {
				outer4(h, xd, n, c, i)
				i += 4
				continue
			}
			outer1(h, xd, n, c, i)
			i++
		}
	}
	if threads <= 1 || c*c*n < parallelOuterWork {
		work(0, c)
		return
	}
	// Split rows (in multiples of four) so that each part has about the same number of
	// upper-triangle elements.
	parts := min(threads, c/4)
	bounds := []int{0}
	total := float64(c) * float64(c+1) / 2
	acc := 0.0
	for i := 0; i < c && len(bounds) < parts; i++ {
		acc += float64(c - i)
		if acc >= total*float64(len(bounds))/float64(parts) && (i+1)%4 == 0 {
			bounds = append(bounds, i+1)
		}
	}
	bounds = append(bounds, c)
	var wg sync.WaitGroup
	for p := 0; p+1 < len(bounds); p++ {
		wg.Add(1)
		go func(i0, i1 int) {
			defer wg.Done()
			work(i0, i1)
		}(bounds[p], bounds[p+1])
	}
	wg.Wait()
}

// outer4 adds Σ_t x[t,i+k]·x[t,j] to h[i+k, j] for k < 4 and j ≥ i. The explicit conversions
// keep the products from fusing with the additions (same bits under every GOAMD64).
func outer4(h, xd []float64, n, c, i int) {
	m := c - i
	h0 := h[i*c+i : i*c+c]
	h1 := h[(i+1)*c+i : (i+1)*c+c][:m]
	h2 := h[(i+2)*c+i : (i+2)*c+c][:m]
	h3 := h[(i+3)*c+i : (i+3)*c+c][:m]
	for t := 0; t < n; t++ {
		r := xd[t*c+i : t*c+c][:m]
		a0, a1, a2, a3 := r[0], r[1], r[2], r[3]
		for j, v := range r {
			h0[j] += float64(a0 * v)
			h1[j] += float64(a1 * v)
			h2[j] += float64(a2 * v)
			h3[j] += float64(a3 * v)
		}
	}
}

// outer1 adds Σ_t x[t,i]·x[t,j] to h[i, j] for j ≥ i.
func outer1(h, xd []float64, n, c, i int) {
	m := c - i
	h0 := h[i*c+i : i*c+c]
	for t := 0; t < n; t++ {
		r := xd[t*c+i : t*c+c][:m]
		a0 := r[0]
		for j, v := range r {
			h0[j] += float64(a0 * v)
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
