package kernels

import "fmt"

// Attention products over a KV cache, for tiles of queries (the runtime's attention): the
// scores q·kᵀ of several queries against blocks of keys, and the sums of value rows weighted
// by each query's probabilities. Each is a small GEMM whose operands stay in cache while a
// tile's queries pass over them; the assembly ones are FMA-bound where the row-at-a-time
// DotRows and AxpyRows are bound by the loads of the keys and values.
//
// Every result is computed by the same operations, in the same order, whatever the other
// queries, keys or rows of the call (and whichever implementation path runs it): a query's
// scores and weighted sums do not depend on the tile it is in, so that the runtime gives a
// token the same bits in a prompt as alone (decode).

// KeyBlock is the number of positions in one tile of a blocked key cache: the keys of
// KeyBlock consecutive positions of one head, stored dimension-major (element (i, l), dimension
// i of the block's position l, at i·KeyBlock + l), so that a vector holds one dimension of
// KeyBlock keys.
const KeyBlock = 16

// scoreBlocks is how many key blocks the score products take at once: their keys (32 KB at
// head size 128) stay in L1 while every query of the call passes over them.
const scoreBlocks = 4

// valueRows is how many value rows the weighted sums take at once, for the same reason.
const valueRows = 64

// AttnScores sets S[q·ldS + b·KeyBlock + l] = scale·Σ_i Q[q·hd + i]·K[b·blkStride + i·KeyBlock + l]
// for queries q < nq, key blocks b < nblk and l < KeyBlock: the scores of nq queries of hd
// values against nblk blocks of KeyBlock keys (see KeyBlock), spaced blkStride values apart.
// Each score is one sum in the order of i, then multiplied by scale.
func AttnScores(S []float32, ldS int, Q []float32, nq, hd int, K []float32, blkStride, nblk int, scale float32) {
	if nq <= 0 || nblk <= 0 || hd <= 0 {
		return
	}
	if ldS < nblk*KeyBlock || blkStride < hd*KeyBlock || len(S) < (nq-1)*ldS+nblk*KeyBlock ||
		len(Q) < nq*hd || len(K) < (nblk-1)*blkStride+hd*KeyBlock {
		panic(fmt.Sprintf("kernels: AttnScores: %d queries of %d, %d key blocks (stride %d), ldS %d: slices of %d, %d, %d values are too short",
			nq, hd, nblk, blkStride, ldS, len(S), len(Q), len(K)))
	}
	f := current.attnScores
	if f == nil {
		attnScoresGeneric(S, ldS, Q, nq, hd, K, blkStride, nblk, scale)
		return
	}
	for b := 0; b < nblk; b += scoreBlocks {
		nb := min(scoreBlocks, nblk-b)
		for q := 0; q < nq; q += 4 {
			// Fewer than 4 queries left: the last one is computed again in the spare slots
			// (the same values written to the same row).
			var sp, qp [4]*float32
			for r := range 4 {
				qq := min(q+r, nq-1)
				sp[r], qp[r] = &S[qq*ldS+b*KeyBlock], &Q[qq*hd]
			}
			f(sp, qp, &K[b*blkStride], blkStride, nb, hd, scale)
		}
	}
}

func attnScoresGeneric(S []float32, ldS int, Q []float32, nq, hd int, K []float32, blkStride, nblk int, scale float32) {
	for q := 0; q < nq; q++ {
		qv := Q[q*hd : (q+1)*hd]
		for b := 0; b < nblk; b++ {
			kb := K[b*blkStride : b*blkStride+hd*KeyBlock]
			s := S[q*ldS+b*KeyBlock : q*ldS+(b+1)*KeyBlock]
			for l := range s {
				var acc float32
				for i, x := range qv {
					acc += x * kb[i*KeyBlock+l]
				}
				s[l] = acc * scale
			}
		}
	}
}

// AttnValues sets O[q·ldO + c] = Σ_{lo[q] ≤ j < hi[q]} P[q·ldP + j]·V[j·ldV + c] for queries
// q < len(lo) and c < hd: each query's sum of the value rows in its range, weighted by its
// probabilities. Each element is one sum in the order of j, starting from zero (empty
// ranges give zeros).
func AttnValues(O []float32, ldO int, P []float32, ldP int, V []float32, ldV, hd int, lo, hi []int) {
	nq := len(lo)
	if nq == 0 || hd <= 0 {
		return
	}
	minLo, maxHi := lo[0], hi[0]
	for q := range nq {
		if lo[q] < 0 || ldP < hi[q] || ldO < hd || ldV < hd || len(O) < q*ldO+hd ||
			(lo[q] < hi[q] && (len(P) < q*ldP+hi[q] || len(V) < (hi[q]-1)*ldV+hd)) {
			panic(fmt.Sprintf("kernels: AttnValues: query %d of %d, rows [%d,%d) of %d values (ld %d), ldP %d, ldO %d: slices of %d, %d, %d values are too short",
				q, nq, lo[q], hi[q], hd, ldV, ldP, ldO, len(O), len(P), len(V)))
		}
		clear(O[q*ldO : q*ldO+hd])
		minLo, maxHi = min(minLo, lo[q]), max(maxHi, hi[q])
	}
	f := current.attnValues
	if f == nil || hd%16 != 0 {
		attnValuesGeneric(O, ldO, P, ldP, V, ldV, hd, lo, hi)
		return
	}
	// one adds rows [a,b) to query q.
	one := func(q, a, b int) {
		if a < b {
			o, p := [4]*float32{&O[q*ldO]}, [4]*float32{&P[q*ldP+a]}
			f(o, p, 1, &V[a*ldV], ldV, b-a, hd)
		}
	}
	for jb := minLo; jb < maxHi; jb += valueRows {
		je := min(jb+valueRows, maxHi)
		q := 0
		for ; q+4 <= nq; q += 4 {
			// The rows all four take together, [a,b); each query's own rows of the block
			// before and after them, in order.
			a, b := jb, je
			var cl, ch [4]int
			for r := range 4 {
				cl[r], ch[r] = max(lo[q+r], jb), min(hi[q+r], je)
				a, b = max(a, cl[r]), min(b, ch[r])
			}
			if a >= b {
				for r := range 4 {
					one(q+r, cl[r], ch[r])
				}
				continue
			}
			var o, p [4]*float32
			for r := range 4 {
				one(q+r, cl[r], a)
				o[r], p[r] = &O[(q+r)*ldO], &P[(q+r)*ldP+a]
			}
			f(o, p, 4, &V[a*ldV], ldV, b-a, hd)
			for r := range 4 {
				one(q+r, b, ch[r])
			}
		}
		for ; q < nq; q++ {
			one(q, max(lo[q], jb), min(hi[q], je))
		}
	}
}

func attnValuesGeneric(O []float32, ldO int, P []float32, ldP int, V []float32, ldV, hd int, lo, hi []int) {
	for q := range lo {
		o := O[q*ldO : q*ldO+hd]
		for j := lo[q]; j < hi[q]; j++ {
			p, v := P[q*ldP+j], V[j*ldV:j*ldV+hd]
			for c := range o {
				o[c] += p * v[c]
			}
		}
	}
}
