package calibrate

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/runtime/kernels"
)

// BenchmarkExactFold measures what exact accumulation adds to the Hessians against their
// GEMM, kernels.AddGram, in the same run, on the linear input widths of Qwen3-0.6B (c = 1024:
// q/k/v and gate/up; 2048: o_proj; 3072: down_proj) on 2 threads. The loop times one fold of a
// group partial into the exact triangle, then zeroed for the next group: in memory
// (stats.FoldUpperZero) or through a file (stats.TriangleFile.FoldZero, where a pass keeps its
// triangles when they do not fit in memory); AddGram's time for a chunk of 512 tokens is the
// best of a few runs, timed before. Metrics: x_AddGram, the fold over one chunk's AddGram
// (what folding every chunk cost, as version 3 of the statistics did), and pct_group, the fold
// as a percentage of AddGram over the DefaultFoldTokens tokens of a fold group at ctx 512.
func BenchmarkExactFold(b *testing.B) {
	const n, threads = 512, 2
	for _, c := range []int{1024, 2048, 3072} {
		rng := rand.New(rand.NewPCG(1, uint64(c)))
		x := make([]float32, n*c)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		pool := kernels.NewPool(threads)
		var s kernels.GramScratch
		part := make([]float64, c*c)
		gram := time.Duration(1 << 62)
		for range 3 {
			clear(part)
			start := time.Now()
			kernels.AddGram(part, x, n, c, pool, &s)
			gram = min(gram, time.Since(start))
		}
		pool.Close()
		for _, where := range []string{"memory", "file"} {
			b.Run(fmt.Sprintf("c=%d/%s", c, where), func(b *testing.B) {
				acc := make([]stats.Fixed, stats.TriangleLen(c))
				fold := func(h []float64) bool {
					_, _, ok := stats.FoldUpperZero(acc, h, c, threads)
					return ok
				}
				if where == "file" {
					acc = nil
					f, err := os.CreateTemp(b.TempDir(), "tri")
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					tf, err := stats.NewTriangleFile(f, []string{"w"}, []int{c})
					if err != nil {
						b.Fatal(err)
					}
					fold = func(h []float64) bool {
						_, _, ok, err := tf.FoldZero("w", h, threads)
						return ok && err == nil
					}
				}
				h := make([]float64, c*c)
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					copy(h, part) // a group's partial, as the fold sees it
					b.StartTimer()
					if !fold(h) {
						b.Fatal("fold refused")
					}
				}
				per := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(per/gram.Seconds(), "x_AddGram")
				b.ReportMetric(100*per/(gram.Seconds()*DefaultFoldTokens/n), "pct_group")
			})
		}
	}
}

// The Hessian budget counts what exact collection takes: the c × c float64 group partial of
// each Hessian, and beyond one fold group the exact triangle too, 16 bytes per element; a
// batch whose triangles do not fit beside its partials keeps them in a file instead, and
// batches are cut by the partials.
func TestHessianBudget(t *testing.T) {
	c := &collector{exactHessians: true, foldGroups: 2}
	model := stats.Model{Weights: []stats.Weight{{Name: "a", Cols: 10}, {Name: "b", Cols: 20}, {Name: "b2", Cols: 20, Leader: "b"}}}
	if err := c.init(model, true, 1); err != nil {
		t.Fatal(err)
	}
	partials := int64(10*10*8 + 20*20*8)
	need := partials + 16*55 + 16*210
	if c.hessianBytes(10, false) != 10*10*8+16*55 || c.hessianBytes(10, true) != 800 {
		t.Fatalf("Hessian of 10 columns over 2 fold groups: %d bytes, spilled %d", c.hessianBytes(10, false), c.hessianBytes(10, true))
	}
	for _, tc := range []struct {
		budget  int64
		batches int
		spill   []bool
	}{
		{-1, 1, []bool{false}},
		{need, 1, []bool{false}},
		{need - 1, 1, []bool{true}},
		{partials, 1, []bool{true}},
		{partials - 1, 2, []bool{false, true}}, // a's triangle fits beside its partial, b's not
	} {
		b, spill := c.hessianBatches(tc.budget)
		if len(b) != tc.batches || !slices.Equal(spill, tc.spill) || len(b[0]) != 3-tc.batches {
			t.Errorf("budget %d: %d batches, spill %v; want %d, %v", tc.budget, len(b), spill, tc.batches, tc.spill)
		}
	}
	c.foldGroups = 1
	if c.hessianBytes(10, false) != 800 {
		t.Errorf("Hessian of 10 columns in one fold group: %d bytes, want its partial only", c.hessianBytes(10, false))
	}
	if _, spill := c.hessianBatches(1); !slices.Equal(spill, []bool{false, false}) {
		t.Errorf("one fold group: spill %v", spill)
	}
	float := &collector{}
	if err := float.init(model, true, 1); err != nil {
		t.Fatal(err)
	}
	if float.hessianBytes(10, false) != 800 {
		t.Errorf("float64 collection: Hessian %d bytes", float.hessianBytes(10, false))
	}
}
