package calibrate

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gquant/gquant/formats/stats"
)

// BenchmarkExactFold measures what exact accumulation adds to a chunk's Hessian: clearing the
// float64 partial and folding its upper triangle into the exact sum (stats.FoldUpper), timed
// by the loop, against addOuter for a chunk of 512 tokens (the best of a few runs, timed
// before), on 2 threads. Metric x_addOuter: the fold's time over addOuter's.
func BenchmarkExactFold(b *testing.B) {
	const n, threads = 512, 2
	for _, c := range []int{256, 1024} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(c)))
			x := make([]float32, n*c)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			h := make([]float64, c*c)
			acc := make([]stats.Fixed, stats.TriangleLen(c))
			var xd []float64
			outer := time.Duration(1 << 62)
			for range 5 {
				start := time.Now()
				addOuter(h, x, n, c, threads, &xd)
				outer = min(outer, time.Since(start))
			}
			part := make([]float64, c*c) // a chunk's partial, as the fold sees it
			addOuter(part, x, n, c, threads, &xd)
			b.ResetTimer()
			for b.Loop() {
				clear(h)
				if _, _, ok := stats.FoldUpper(acc, part, c, threads); !ok {
					b.Fatal("fold refused")
				}
			}
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(per/outer.Seconds(), "x_addOuter")
		})
	}
}

// The Hessian budget counts what exact collection takes: 16 bytes per element of each upper
// triangle, and the shared c × c float64 partial of the widest once.
func TestHessianBudget(t *testing.T) {
	c := &collector{exactHessians: true}
	model := stats.Model{Weights: []stats.Weight{{Name: "a", Cols: 10}, {Name: "b", Cols: 20}, {Name: "b2", Cols: 20, Leader: "b"}}}
	if err := c.init(model, true, 1); err != nil {
		t.Fatal(err)
	}
	need := int64(20*20*8 + 16*55 + 16*210)
	if c.scratchBytes() != 20*20*8 || c.hessianBytes(10) != 16*55 {
		t.Fatalf("scratch %d, Hessian of 10 columns %d bytes", c.scratchBytes(), c.hessianBytes(10))
	}
	if b := c.hessianBatches(need); len(b) != 1 || len(b[0]) != 2 {
		t.Errorf("budget %d: %d batches, want 1 of both leaders", need, len(b))
	}
	if b := c.hessianBatches(need - 1); len(b) != 2 {
		t.Errorf("budget %d: %d batches, want 2", need-1, len(b))
	}
	float := &collector{}
	if err := float.init(model, true, 1); err != nil {
		t.Fatal(err)
	}
	if float.scratchBytes() != 0 || float.hessianBytes(10) != 800 {
		t.Errorf("float64 collection: scratch %d, Hessian %d bytes", float.scratchBytes(), float.hessianBytes(10))
	}
}
