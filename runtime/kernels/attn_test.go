package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// attnEps bounds the error of an FMA chain (or of float32 multiply-then-add) of n products
// against the exact sum: (n+1)·2^-24 of Σ|products|, the standard bound of recursive summation.
func attnEps(n int) float64 { return float64(n+1) * 0x1p-24 }

// blockedKeys returns nblk key blocks of hd dimensions (KeyBlock positions each, see
// KeyBlock), spaced stride values apart, with the keys of position p in the rows of
// keys[p·hd:]: keys lay out as the runtime's cache does.
func blockedKeys(keys []float32, hd, nblk, stride int) []float32 {
	K := make([]float32, (nblk-1)*stride+hd*KeyBlock)
	for i := range K {
		K[i] = float32(math.NaN()) // the gaps between blocks must not be read
	}
	for p := 0; p < nblk*KeyBlock; p++ {
		b, l := p/KeyBlock, p%KeyBlock
		for i := 0; i < hd; i++ {
			K[b*stride+i*KeyBlock+l] = keys[p*hd+i]
		}
	}
	return K
}

// TestAttnScores checks AttnScores against float64 sums for query counts around the 4-query
// tiles, block counts around the 4-block groups and head sizes with and without a multiple of
// 16, and that a query's scores are the same bits whatever the call it is in: alone, with
// other queries, from a later first block.
func TestAttnScores(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(21, 22))
		for _, hd := range []int{8, 16, 40, 64, 128, 144} {
			for _, nq := range []int{1, 2, 3, 4, 5, 9} {
				for _, nblk := range []int{1, 3, 4, 5, 9} {
					name := fmt.Sprintf("hd %d, %d queries, %d blocks", hd, nq, nblk)
					keys := make([]float32, nblk*KeyBlock*hd)
					for i := range keys {
						keys[i] = float32(rng.NormFloat64())
					}
					stride := hd*KeyBlock + 16*(nblk%2)
					K := blockedKeys(keys, hd, nblk, stride)
					Q := make([]float32, nq*hd)
					for i := range Q {
						Q[i] = float32(rng.NormFloat64() * 3)
					}
					ldS := nblk*KeyBlock + 5
					S := make([]float32, nq*ldS)
					for i := range S {
						S[i] = 12345 // the gaps between rows stay untouched
					}
					const scale = 0.088
					AttnScores(S, ldS, Q, nq, hd, K, stride, nblk, scale)
					for q := 0; q < nq; q++ {
						for p := 0; p < nblk*KeyBlock; p++ {
							var want, mag float64
							for i := 0; i < hd; i++ {
								x := float64(Q[q*hd+i]) * float64(keys[p*hd+i])
								want += x
								mag += math.Abs(x)
							}
							want *= scale
							if got := S[q*ldS+p]; !(math.Abs(float64(got)-want) <= (attnEps(hd)*mag+0x1p-24)*scale) {
								t.Fatalf("%s: score %d of query %d = %v, want %v", name, p, q, got, want)
							}
						}
						for _, v := range S[q*ldS+nblk*KeyBlock : q*ldS+ldS] {
							if v != 12345 {
								t.Fatalf("%s: query %d: the row's gap was written", name, q)
							}
						}
					}
					// Query q alone, from block b0: the same bits.
					for q := 0; q < nq; q++ {
						b0 := q % nblk
						one := make([]float32, (nblk-b0)*KeyBlock)
						AttnScores(one, len(one), Q[q*hd:(q+1)*hd], 1, hd, K[b0*stride:], stride, nblk-b0, scale)
						for i, v := range one {
							if w := S[q*ldS+b0*KeyBlock+i]; math.Float32bits(v) != math.Float32bits(w) {
								t.Fatalf("%s: query %d alone from block %d: score %d = %v, in the call %v", name, q, b0, b0*KeyBlock+i, v, w)
							}
						}
					}
				}
			}
		}
	})
}

// TestAttnValues checks AttnValues against float64 sums for query counts around the 4-query
// tiles, ranges that are empty, shared, staggered (each query one row more, as a prompt's
// tokens see one position more than the last; or starting later, as sliding windows do) and
// longer than one block of rows, and head sizes with and without a multiple of 16; and that
// a query's sums are the same bits alone as in the call.
func TestAttnValues(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(23, 24))
		ranges := map[string]func(q int) (int, int){
			"shared":    func(q int) (int, int) { return 3, 150 },
			"causal":    func(q int) (int, int) { return 0, 60 + q/2 },
			"window":    func(q int) (int, int) { return q, 70 + q },
			"one row":   func(q int) (int, int) { return q, q + 1 },
			"some none": func(q int) (int, int) { return 5, 5 + 40*(q%3) },
			"disjoint":  func(q int) (int, int) { return 30 * q, 30*q + 20 },
		}
		for _, hd := range []int{8, 16, 48, 64, 80, 128, 144} {
			for _, nq := range []int{1, 3, 4, 5, 8, 10} {
				for what, rg := range ranges {
					name := fmt.Sprintf("hd %d, %d queries, %s", hd, nq, what)
					lo, hi := make([]int, nq), make([]int, nq)
					rows := 0
					for q := range lo {
						lo[q], hi[q] = rg(q)
						rows = max(rows, hi[q])
					}
					ldV := hd + 16
					V := make([]float32, max(rows, 1)*ldV)
					for i := range V {
						V[i] = float32(rng.NormFloat64())
					}
					ldP := rows + 3
					P := make([]float32, nq*ldP)
					for i := range P {
						P[i] = float32(rng.Float64())
					}
					ldO := hd + 7
					O := make([]float32, nq*ldO)
					for i := range O {
						O[i] = float32(math.NaN()) // overwritten in [0, hd), left alone after
					}
					AttnValues(O, ldO, P, ldP, V, ldV, hd, lo, hi)
					for q := 0; q < nq; q++ {
						for c := 0; c < hd; c++ {
							var want, mag float64
							for j := lo[q]; j < hi[q]; j++ {
								x := float64(P[q*ldP+j]) * float64(V[j*ldV+c])
								want += x
								mag += math.Abs(x)
							}
							if got := O[q*ldO+c]; !(math.Abs(float64(got)-want) <= attnEps(hi[q]-lo[q])*mag) {
								t.Fatalf("%s: query %d column %d = %v, want %v", name, q, c, got, want)
							}
						}
						if !math.IsNaN(float64(O[q*ldO+hd])) {
							t.Fatalf("%s: query %d: the row's gap was written", name, q)
						}
						one := make([]float32, hd)
						AttnValues(one, hd, P[q*ldP:(q+1)*ldP], ldP, V, ldV, hd, lo[q:q+1], hi[q:q+1])
						for c, v := range one {
							if w := O[q*ldO+c]; math.Float32bits(v) != math.Float32bits(w) {
								t.Fatalf("%s: query %d alone: column %d = %v, in the call %v", name, q, c, v, w)
							}
						}
					}
				}
			}
		}
	})
}

// BenchmarkAttention measures causal attention of Qwen3-0.6B's shape (16 query heads of 128,
// 8 KV heads) on one thread, over a 512-token prompt (every token against the positions up to
// its own) and a decode step at position 511, two ways in the same run: row at a time
// (DotRows, Softmax, AxpyRows per token and head over position-major keys: the runtime's
// attention before the tiles) and in tiles (AttnScores, Softmax, AttnValues over blocked keys,
// 16 tokens × the 2 query heads of a KV head per tile, as the runtime does), and reports
// the rows' time over the tiles' as speedup.
//
//	go test -run - -bench Attention ./runtime/kernels/
func BenchmarkAttention(b *testing.B) {
	const H, KVH, hd, P = 16, 8, 128, 512
	const G, qDim, kvDim = H / KVH, H * hd, KVH * hd
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int, sd float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * sd)
		}
		return x
	}
	K, V := fill(P*kvDim, 1), fill(P*kvDim, 1)
	Q := fill(P*qDim, 1)
	Kb := make([]float32, P*kvDim) // blocked: [pos/16][kvDim][pos%16]
	for p := 0; p < P; p++ {
		for i := 0; i < kvDim; i++ {
			Kb[p/KeyBlock*KeyBlock*kvDim+i*KeyBlock+p%KeyBlock] = K[p*kvDim+i]
		}
	}
	const scale = 0.088
	out := make([]float32, P*qDim)
	sc := make([]float32, P)
	rows := func(pos, n int) {
		for h := 0; h < H; h++ {
			for t := 0; t < n; t++ {
				p := sc[:pos+t+1]
				off := (h / G) * hd
				DotRows(p, Q[t*qDim+h*hd:t*qDim+(h+1)*hd], K[off:], kvDim, scale)
				Softmax(p)
				AxpyRows(out[t*qDim+h*hd:t*qDim+(h+1)*hd], p, V[off:], kvDim)
			}
		}
	}
	const tq = 16
	qs, os := make([]float32, tq*G*hd), make([]float32, tq*G*hd)
	ss := make([]float32, tq*G*(P+KeyBlock))
	lo, hi := make([]int, tq*G), make([]int, tq*G)
	tiles := func(pos, n int) {
		for g := 0; g < KVH; g++ {
			for t0 := 0; t0 < n; t0 += tq {
				t1 := min(n, t0+tq)
				nq, gw := (t1-t0)*G, G*hd
				nb := (pos+t1-1)/KeyBlock + 1
				ldS := nb * KeyBlock
				for t := t0; t < t1; t++ {
					copy(qs[(t-t0)*gw:(t-t0+1)*gw], Q[t*qDim+g*gw:])
				}
				AttnScores(ss, ldS, qs, nq, hd, Kb[g*hd*KeyBlock:], kvDim*KeyBlock, nb, scale)
				for i := 0; i < nq; i++ {
					lo[i], hi[i] = 0, pos+t0+i/G+1
					Softmax(ss[i*ldS : i*ldS+hi[i]])
				}
				AttnValues(os, hd, ss, ldS, V[g*hd:], kvDim, hd, lo[:nq], hi[:nq])
				for t := t0; t < t1; t++ {
					copy(out[t*qDim+g*gw:t*qDim+(g+1)*gw], os[(t-t0)*gw:])
				}
			}
		}
	}
	for _, impl := range Impls() {
		for _, c := range []struct {
			name   string
			pos, n int
		}{{"prompt512", 0, P}, {"decode@511", P - 1, 1}} {
			b.Run(c.name+"/"+impl, func(b *testing.B) {
				restore, _ := SetImpl(impl)
				defer restore()
				var tr, tt time.Duration
				for b.Loop() {
					t0 := time.Now()
					rows(c.pos, c.n)
					t1 := time.Now()
					tiles(c.pos, c.n)
					tr, tt = tr+t1.Sub(t0), tt+time.Since(t1)
				}
				b.ReportMetric(float64(tr)/float64(tt), "speedup")
				b.ReportMetric(float64(tt.Nanoseconds())/float64(b.N)/1e6, "tiles_ms")
				b.ReportMetric(float64(tr.Nanoseconds())/float64(b.N)/1e6, "rows_ms")
			})
		}
	}
}
