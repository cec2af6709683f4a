package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Benchmarks report GB/s of weight bytes read (one thread). To measure weights streamed from
// memory rather than cache, each benchmark cycles over enough copies of its matrix to exceed
// benchColdBytes. Run, for example:
//
//	go test -run - -bench 'MatVec/Q4_0' ./runtime/kernels/

const benchColdBytes = 96 << 20

var benchShapes = []struct{ rows, cols int }{{4096, 4096}, {1024, 3072}}

func benchMatrices(b *testing.B, wt WType, rows, cols int) []*Matrix {
	rng := rand.New(rand.NewPCG(11, uint64(wt)))
	rb, _ := wt.RowBytes(cols)
	one := make([]byte, rows*rb)
	for r := 0; r < rows; r++ {
		copy(one[r*rb:], genRow(wt, cols, rng, 0))
	}
	n := max(1, benchColdBytes/len(one))
	ms := make([]*Matrix, n)
	for i := range ms {
		data := make([]byte, len(one))
		copy(data, one)
		m, err := NewMatrix(wt, rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		ms[i] = m
	}
	return ms
}

func BenchmarkMatVec(b *testing.B) {
	for _, wt := range Types {
		for _, sh := range benchShapes {
			var ms []*Matrix
			for _, mode := range []ActMode{ActFloat, ActQuant} {
				if !wt.quantized() && mode == ActQuant && wt == F32 {
					continue
				}
				for _, impl := range Impls() {
					name := fmt.Sprintf("%v/%v/%dx%d/%s", wt, mode, sh.rows, sh.cols, impl)
					b.Run(name, func(b *testing.B) {
						if ms == nil {
							ms = benchMatrices(b, wt, sh.rows, sh.cols)
						}
						restore, _ := SetImpl(impl)
						defer restore()
						x := make([]float32, sh.cols)
						for i := range x {
							x[i] = float32(i%7) - 3
						}
						y := make([]float32, sh.rows)
						var s Scratch
						for _, m := range ms {
							m.Mode = mode
							m.Pack()
						}
						bytes := int64(len(ms[0].Data))
						b.SetBytes(bytes)
						b.ResetTimer()
						for i := 0; b.Loop(); i++ {
							m := ms[i%len(ms)]
							m.MatVec(y, x, 0, sh.rows, &s)
						}
						b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
					})
				}
			}
		}
	}
}

// BenchmarkMatMul measures prefill: 64 tokens against one matrix (weights reused from cache
// across tokens), reported as weight GB/s and tokens·rows per second, on a square-ish shape and
// on Qwen3-0.6B's FFN shape.
func BenchmarkMatMul(b *testing.B) {
	const nTok = 64
	for _, wt := range []WType{BF16, Q8_0, Q4_0, Q4_K, Q6_K} {
		for _, sh := range []struct{ rows, cols int }{{1024, 4096}, {3072, 1024}} {
			rows, cols := sh.rows, sh.cols
			var ms []*Matrix
			for _, impl := range Impls() {
				b.Run(fmt.Sprintf("%v/%dtok/%dx%d/%s", wt, nTok, rows, cols, impl), func(b *testing.B) {
					if ms == nil {
						ms = benchMatrices(b, wt, rows, cols)[:1]
					}
					restore, _ := SetImpl(impl)
					defer restore()
					m := ms[0]
					m.Pack()
					X := make([]float32, nTok*cols)
					for i := range X {
						X[i] = float32(i%11) - 5
					}
					Y := make([]float32, nTok*rows)
					var s Scratch
					b.SetBytes(int64(len(m.Data)))
					for b.Loop() {
						m.MatMul(Y, X, nTok, 0, rows, &s)
					}
					b.ReportMetric(float64(nTok)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
				})
			}
		}
	}
}

// BenchmarkPoolRun measures a fork-join round trip with empty work.
func BenchmarkPoolRun(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprint(n, "workers"), func(b *testing.B) {
			p := NewPool(n)
			defer p.Close()
			var sink [2]int
			f := func(w, lo, hi int) { sink[w] += hi - lo }
			for b.Loop() {
				p.Run(64, 1, f)
			}
		})
	}
}

// BenchmarkGEMMSpeedup measures, in one run, a 64-token product done by the multi-token
// kernels (MatMul) and the same 64 tokens done one at a time (MatVec), on Qwen3-0.6B's FFN
// shape with the weights in cache, and reports how many times faster the batch is.
func BenchmarkGEMMSpeedup(b *testing.B) {
	const nTok, rows, cols = 64, 3072, 1024
	for _, wt := range []WType{Q8_0, Q4_0, Q4_K, Q6_K, Q2_K, Q3_K, IQ4_XS, IQ2_XXS, IQ3_S, IQ1_M, TQ2_0} {
		b.Run(wt.String(), func(b *testing.B) {
			m := benchMatrices(b, wt, rows, cols)[0]
			m.Pack()
			X := make([]float32, nTok*cols)
			for i := range X {
				X[i] = float32(i%11) - 5
			}
			Y := make([]float32, nTok*rows)
			var s Scratch
			var batch, single time.Duration
			for b.Loop() {
				t0 := time.Now()
				m.MatMul(Y, X, nTok, 0, rows, &s)
				t1 := time.Now()
				for t := 0; t < nTok; t++ {
					m.MatVec(Y[t*rows:(t+1)*rows], X[t*cols:(t+1)*cols], 0, rows, &s)
				}
				batch, single = batch+t1.Sub(t0), single+time.Since(t1)
			}
			b.ReportMetric(float64(single)/float64(batch), "speedup")
		})
	}
}

// BenchmarkIQMatVec measures decode (one token) with the i-quant and ternary types on
// Qwen3-0.6B's projection shapes (down 1024×3072, gate/up 3072×1024, q 2048×1024), the weights
// streamed from memory, beside the Q4_K product of the same shape and implementation in the
// same run: GB/s of the ggml bytes (the file's), tok/s, x_q4_k = Q4_K's time over the type's,
// and best_us, the fastest single product. Only the assembly implementations run where there are some (generic Go takes about
// 60 times as long). llama.cpp's speed is measured outside Go: llama-bench against gquant
// bench on a GGUF of each type (the commit that added these kernels gives the commands).
//
//	go test -run - -bench 'IQMatVec' -benchtime 300x ./runtime/kernels/
func BenchmarkIQMatVec(b *testing.B) {
	impls := Impls()
	if len(impls) > 1 {
		impls = impls[:len(impls)-1]
	}
	for _, sh := range []struct{ rows, cols int }{{1024, 3072}, {3072, 1024}, {2048, 1024}} {
		var q4 []*Matrix
		for _, wt := range []WType{IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0} {
			var ms []*Matrix
			for _, impl := range impls {
				b.Run(fmt.Sprintf("%v/%dx%d/%s", wt, sh.rows, sh.cols, impl), func(b *testing.B) {
					if ms == nil {
						ms = benchMatrices(b, wt, sh.rows, sh.cols)
					}
					if q4 == nil {
						q4 = benchMatrices(b, Q4_K, sh.rows, sh.cols)
					}
					restore, _ := SetImpl(impl)
					defer restore()
					x := make([]float32, sh.cols)
					for i := range x {
						x[i] = float32(i%7) - 3
					}
					y := make([]float32, sh.rows)
					var s Scratch
					for _, m := range append(ms, q4...) {
						m.Mode = ActQuant
						m.Pack()
					}
					var tg, tq time.Duration
					best := time.Hour
					for i := 0; b.Loop(); i++ {
						t0 := time.Now()
						ms[i%len(ms)].MatVec(y, x, 0, sh.rows, &s)
						t1 := time.Now()
						q4[i%len(q4)].MatVec(y, x, 0, sh.rows, &s)
						tg, tq = tg+t1.Sub(t0), tq+time.Since(t1)
						best = min(best, t1.Sub(t0))
					}
					n := float64(b.N)
					b.ReportMetric(float64(len(ms[0].Data))*n/tg.Seconds()/1e9, "GB/s")
					b.ReportMetric(n/tg.Seconds(), "tok/s")
					b.ReportMetric(float64(tq)/float64(tg), "x_q4_k")
					// The fastest product: the least disturbed by other processes on a shared machine.
					b.ReportMetric(float64(best.Nanoseconds())/1e3, "best_us")
				})
			}
		}
	}
}

// The gqf group formats of the benchmarks, with their activation modes.
var benchGroupFormats = []struct {
	f    GroupFormat
	mode ActMode
}{
	{GroupFormat{4, 128, false}, ActFloat}, {GroupFormat{4, 128, false}, ActQuant},
	{GroupFormat{4, 64, true}, ActFloat}, {GroupFormat{4, 64, true}, ActQuant},
	{GroupFormat{8, 0, true}, ActFloat}, {GroupFormat{8, 0, true}, ActQuant},
}

// benchGroupShapes are Qwen3-0.6B's projections: down (1024×3072 is 1024 rows of 3072), gate/up
// (3072×1024) and q (2048×1024), and the o projection's 1024×2048 is left out; 1024x4096 is the
// square-ish shape of BenchmarkMatMul.
var benchGroupShapes = []struct{ rows, cols int }{{1024, 4096}, {3072, 1024}, {2048, 1024}}

// benchGroupMatrices returns copies of one random group matrix, enough to exceed
// benchColdBytes when cold is set.
func benchGroupMatrices(b *testing.B, f GroupFormat, rows, cols int, cold bool) []*Matrix {
	rng := rand.New(rand.NewPCG(5, uint64(f.Type())))
	c := genGroupCase(rng, f, rows, cols, gkRandom)
	m := c.matrix(b)
	n := 1
	if cold {
		n = max(1, benchColdBytes/len(m.Data))
	}
	ms := []*Matrix{m}
	for len(ms) < n {
		ms = append(ms, c.matrix(b))
	}
	return ms
}

// BenchmarkGroupMatVec measures decode (one token) with the gqf formats, the weights streamed
// from memory (copies cycled past benchColdBytes), beside the Q4_0 product of the same shape
// and implementation in the same run: GB/s of packed weights read, tok/s, and x_q4_0 = Q4_0's
// time over the format's (above 1: faster than Q4_0).
//
//	go test -run - -bench 'GroupMatVec' -benchtime 200x ./runtime/kernels/
func BenchmarkGroupMatVec(b *testing.B) {
	for _, sh := range benchGroupShapes {
		var q4 []*Matrix
		for _, gf := range benchGroupFormats {
			var ms []*Matrix
			for _, impl := range Impls() {
				name := fmt.Sprintf("%v/%s/%dx%d/%s", gf.f, benchModeName(gf.mode), sh.rows, sh.cols, impl)
				b.Run(name, func(b *testing.B) {
					if ms == nil {
						ms = benchGroupMatrices(b, gf.f, sh.rows, sh.cols, true)
					}
					if q4 == nil {
						q4 = benchMatrices(b, Q4_0, sh.rows, sh.cols)
					}
					restore, _ := SetImpl(impl)
					defer restore()
					x := make([]float32, sh.cols)
					for i := range x {
						x[i] = float32(i%7) - 3
					}
					y := make([]float32, sh.rows)
					var s Scratch
					for _, m := range ms {
						m.Mode = gf.mode
					}
					for _, m := range q4 {
						m.Pack()
					}
					var tg, tq time.Duration
					for i := 0; b.Loop(); i++ {
						t0 := time.Now()
						ms[i%len(ms)].MatVec(y, x, 0, sh.rows, &s)
						t1 := time.Now()
						q4[i%len(q4)].MatVec(y, x, 0, sh.rows, &s)
						tg, tq = tg+t1.Sub(t0), tq+time.Since(t1)
					}
					n := float64(b.N)
					b.ReportMetric(float64(ms[0].Bytes())*n/tg.Seconds()/1e9, "GB/s")
					b.ReportMetric(n/tg.Seconds(), "tok/s")
					b.ReportMetric(float64(tq)/float64(tg), "x_q4_0")
				})
			}
		}
	}
}

// BenchmarkGroupMatMul measures prefill (64 and 512 tokens, weights in cache across tokens)
// with the gqf formats, per implementation, beside the Q4_0 product of the same shape,
// implementation and token count in the same run: tok/s and x_q4_0 = Q4_0's time over the
// format's. The products include the activations' preparation, as MatMul does.
//
//	go test -run - -bench 'GroupMatMul' -benchtime 10x ./runtime/kernels/
func BenchmarkGroupMatMul(b *testing.B) {
	for _, nTok := range []int{64, 512} {
		for _, sh := range benchGroupShapes {
			var q4 *Matrix
			for _, gf := range benchGroupFormats {
				var m *Matrix
				for _, impl := range Impls() {
					if impl == "generic" && nTok > 64 {
						continue // seconds per product
					}
					name := fmt.Sprintf("%v/%s/%dtok/%dx%d/%s", gf.f, benchModeName(gf.mode), nTok, sh.rows, sh.cols, impl)
					b.Run(name, func(b *testing.B) {
						if m == nil {
							m = benchGroupMatrices(b, gf.f, sh.rows, sh.cols, false)[0]
						}
						if q4 == nil {
							q4 = benchMatrices(b, Q4_0, sh.rows, sh.cols)[0]
						}
						restore, _ := SetImpl(impl)
						defer restore()
						m.Mode = gf.mode
						q4.Pack()
						X := make([]float32, nTok*sh.cols)
						for i := range X {
							X[i] = float32(i%11) - 5
						}
						Y := make([]float32, nTok*sh.rows)
						var s Scratch
						var tg, tq time.Duration
						for b.Loop() {
							t0 := time.Now()
							m.MatMul(Y, X, nTok, 0, sh.rows, &s)
							t1 := time.Now()
							q4.MatMul(Y, X, nTok, 0, sh.rows, &s)
							tg, tq = tg+t1.Sub(t0), tq+time.Since(t1)
						}
						b.ReportMetric(float64(nTok)*float64(b.N)/tg.Seconds(), "tok/s")
						b.ReportMetric(float64(tq)/float64(tg), "x_q4_0")
					})
				}
			}
		}
	}
}

// benchModeName names a group matrix's activation mode.
func benchModeName(m ActMode) string {
	if m == ActQuant {
		return "a8"
	}
	return "a16"
}
