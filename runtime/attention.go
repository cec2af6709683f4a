package runtime

import (
	"math"

	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// minAttnWork is the multiply-adds of the smallest chunk of attention work (a pool round trip
// costs about a microsecond, a few thousand multiply-adds of attention).
const minAttnWork = 1 << 14

// attnTileQueries is about how many queries one tile of attention holds: the new tokens of a
// tile times the query heads of one KV head. The tile's keys and values are read once for all
// of them (kernels.AttnScores, AttnValues), its scores (queries × positions) stay in L2.
const attnTileQueries = 32

// storeKV copies the new keys and values of an attention node into its layer's cache: the
// values position-major, the keys in blocks of kernels.KeyBlock positions (State.k); in a
// batch (State.batch), row t into the cache of its sequence.
func (st *State) storeKV(en *execNode, n int) {
	s := st.m.spec
	kvDim := s.KVHeads * s.HeadDim
	l := en.n.Layer
	k, v := st.rows(en.in[1], 0, n), st.rows(en.in[2], 0, n)
	for t := 0; t < n; t++ {
		seq, p := st, st.pos+t
		if st.batch != nil {
			seq, p = st.batch[t], st.batch[t].pos
		}
		copy(seq.v[l][p*kvDim:(p+1)*kvDim], v[t*kvDim:])
		const kb = kernels.KeyBlock
		blk := seq.k[l][p/kb*kb*kvDim+p%kb:]
		for i, x := range k[t*kvDim : (t+1)*kvDim] {
			blk[i*kb] = x
		}
	}
}

// attention computes, for each new token and query head, softmax(cap(q·Kᵀ·scale))·V over the
// positions it sees (up to its own; within the node's window when it has one), into the
// node's value. The work is split into tiles: up to attnTileQueries/group consecutive new
// tokens with the query heads of one KV head, whose scores are one small GEMM against the
// blocks of keys they see and whose outputs are another over the value rows (attnJob.tile).
// Every query's arithmetic is the same in any tile, so a token gets the same bits in a prompt
// as alone. The tiles go to the pool's workers dynamically, the costliest (latest tokens)
// first.
func (m *Model) attention(st *State, en *execNode, n int) {
	st.storeKV(en, n)
	m.attend(st, en, n)
}

// attend is attention after the keys and values are stored.
func (m *Model) attend(st *State, en *execNode, n int) {
	s := m.spec
	group := s.Heads / s.KVHeads
	tq, end := max(1, min(n, attnTileQueries/group)), st.pos+n
	if st.batch != nil { // a tile per sequence
		tq, end = 1, 0
		for _, seq := range st.batch {
			end = max(end, seq.pos+1)
		}
	}
	tiles := (n + tq - 1) / tq
	st.att = attnJob{st: st, en: en, n: n, scale: en.n.Scale, tq: tq, tiles: tiles}
	// Chunks of about minAttnWork multiply-adds: at decode a few KV heads each.
	work := tq * group * end * s.HeadDim * 2
	m.pool.RunDynamic(s.KVHeads*tiles, max(1, minAttnWork/max(1, work)), st.attRun)
}

// attnJob is the pool job of attention (in the State, its function value made once): item i
// is the tile tiles−1−i/KVHeads of KV head i%KVHeads.
type attnJob struct {
	st        *State
	en        *execNode
	n         int
	scale     float32
	tq, tiles int // new tokens per tile, tiles per KV head
}

// attnScratch is a worker's buffers for the tiles of attention.
type attnScratch struct {
	q, s, o []float32 // the tile's queries, scores (then probabilities) and outputs
	lo, hi  []int     // each query's visible positions, relative to the tile's first score
}

func (j *attnJob) run(w, lo, hi int) {
	kvh := j.st.m.spec.KVHeads
	for item := lo; item < hi; item++ {
		tile := j.tiles - 1 - item/kvh
		j.tile(w, item%kvh, tile*j.tq, min(j.n, (tile+1)*j.tq))
	}
}

// tile computes the outputs of new tokens [t0,t1) for the query heads of KV head g: the scores
// of those queries against the key blocks from the first position the first token sees to the
// last token's own (each query then keeps the positions it sees), softcap and softmax row by
// row, and the values weighted by the probabilities.
func (j *attnJob) tile(w, g, t0, t1 int) {
	st := j.st
	// seq holds the tile's keys and values, token t at position pos+t: st's own, or in a
	// batch the one sequence of the tile's token.
	seq, pos := st, st.pos
	if st.batch != nil {
		seq = st.batch[t0]
		pos = seq.pos - t0
	}
	s := st.m.spec
	hd := s.HeadDim
	group := s.Heads / s.KVHeads
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	node := j.en.n
	l := node.Layer
	q, ctx := st.rows(j.en.in[0], 0, j.n), st.rows(j.en.out, 0, j.n)
	const kb = kernels.KeyBlock
	b0 := visibleFrom(node, pos+t0) / kb
	nb := (pos+t1-1)/kb - b0 + 1
	base, ldS := b0*kb, nb*kb // the position of each row's first score; the row length
	nq, gw := (t1-t0)*group, group*hd
	sc := &st.attw[w]
	sc.q, sc.o = growCap(sc.q, nq*hd), growCap(sc.o, nq*hd)
	sc.s = growCap(sc.s, nq*ldS)
	if cap(sc.lo) < nq {
		sc.lo, sc.hi = make([]int, nq), make([]int, nq)
	}
	sc.lo, sc.hi = sc.lo[:nq], sc.hi[:nq]
	for t := t0; t < t1; t++ {
		copy(sc.q[(t-t0)*gw:(t-t0+1)*gw], q[t*qDim+g*gw:])
	}
	kernels.AttnScores(sc.s, ldS, sc.q, nq, hd, seq.k[l][base*kvDim+g*hd*kb:], kvDim*kb, nb, j.scale)
	for i := range nq {
		own := pos + t0 + i/group
		lo, hi := visibleFrom(node, own)-base, own+1-base
		p := sc.s[i*ldS+lo : i*ldS+hi]
		if c := node.Cap; c != 0 {
			softcap(p, p, c)
		}
		kernels.Softmax(p)
		sc.lo[i], sc.hi[i] = lo, hi
	}
	kernels.AttnValues(sc.o, hd, sc.s, ldS, seq.v[l][base*kvDim+g*hd:], kvDim, hd, sc.lo, sc.hi)
	for t := t0; t < t1; t++ {
		copy(ctx[t*qDim+g*gw:t*qDim+(g+1)*gw], sc.o[(t-t0)*gw:])
	}
}

// growCap returns s with length n, reusing its memory when it is large enough and otherwise
// at least doubling it (attention's scratch grows with the positions, one at a time in decode).
func growCap(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n, max(n, 2*cap(s)))
	}
	return s[:n]
}

// visibleFrom is the first position the token at position own sees through attention node n:
// 0, or the start of its sliding window.
func visibleFrom(n *arch.Node, own int) int {
	if n.Window > 0 {
		return max(0, own-n.Window+1)
	}
	return 0
}

// softcap sets dst[i] = c·tanh(x[i]/c) in float32 steps, as llama.cpp does (scale by 1/c, tanh,
// scale by c).
func softcap(dst, x []float32, c float32) {
	inv := 1 / c
	for i, v := range x {
		dst[i] = float32(math.Tanh(float64(v*inv))) * c
	}
}

// geluTanh is the tanh approximation of GELU (transformers' gelu_pytorch_tanh), computed in
// float64 and rounded once.
func geluTanh(x float32) float64 {
	g := float64(x)
	return 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g)))
}

// gegluRow sets dst[i] = gelu_tanh(gate[i])·up[i].
func gegluRow(dst, gate, up []float32) {
	for i := range dst {
		dst[i] = float32(geluTanh(gate[i])) * up[i]
	}
}
