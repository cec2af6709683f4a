package calibrate

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gquant/gquant/runtime/kernels"
)

// BenchmarkGram measures kernels.AddGram, the Hessian as a GEMM, against addOuter (the
// scalar float64 loop) in the same run, on the linear inputs of Qwen3-0.6B (c = 1024: q/k/v
// and gate/up; 2048: o_proj; 3072: down_proj) for a chunk of 512 tokens on 2 threads.
// Metrics: GFLOP/s of AddGram and of addOuter (2 flops per multiply-add of the upper
// triangle, n·c·(c+1)/2 of them) and x_addOuter, AddGram's time over addOuter's (the best of
// a few runs of it, timed before the loop).
func BenchmarkGram(b *testing.B) {
	const n, threads = 512, 2
	for _, c := range []int{1024, 2048, 3072} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(c)))
			x := make([]float32, n*c)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			h := make([]float64, c*c)
			flops := float64(n) * float64(c) * float64(c+1)

			var xd []float64
			outer := time.Duration(1 << 62)
			for range 3 {
				start := time.Now()
				addOuter(h, x, n, c, threads, &xd)
				outer = min(outer, time.Since(start))
			}

			pool := kernels.NewPool(threads)
			defer pool.Close()
			var s kernels.GramScratch
			kernels.AddGram(h, x, n, c, pool, &s)
			b.ResetTimer()
			for b.Loop() {
				kernels.AddGram(h, x, n, c, pool, &s)
			}
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(flops/per/1e9, "GFLOP/s")
			b.ReportMetric(flops/outer.Seconds()/1e9, "addOuter_GFLOP/s")
			b.ReportMetric(per/outer.Seconds(), "x_addOuter")
		})
	}
}

// addOuter is the scalar float64 Hessian accumulation calibrate used before kernels.AddGram,
// kept as the benchmarks' baseline.

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
