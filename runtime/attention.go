package runtime

import (
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// minAttnWork is the multiply-adds of the smallest chunk of attention work (a pool round trip
// costs about a microsecond, a few thousand multiply-adds of attention).
const minAttnWork = 1 << 14

// storeKV copies the new keys and values of an attention node into its layer's cache.
func (st *State) storeKV(en *execNode, n int) {
	s := st.m.spec
	kvDim := s.KVHeads * s.HeadDim
	l := en.n.Layer
	copy(st.k[l][st.pos*kvDim:(st.pos+n)*kvDim], st.rows(en.in[1], 0, n))
	copy(st.v[l][st.pos*kvDim:(st.pos+n)*kvDim], st.rows(en.in[2], 0, n))
}

// attention computes, for each new token and query head, softmax(q·Kᵀ/√d)·V over the
// positions up to its own (causal), into the node's value. Work items are spread over the
// pool head by head (item = head·n + token), so that each worker gets a similar share of the
// causal work and reads the keys of few heads.
func (m *Model) attention(st *State, en *execNode, n int) {
	s := m.spec
	st.storeKV(en, n)
	total := st.pos + n
	for w := range st.scores {
		st.scores[w] = grow(st.scores[w], total)
	}
	st.att = attnJob{st: st, en: en, n: n, scale: arch.AttentionScale(s)}
	// Chunks of about minAttnWork multiply-adds: at decode a few heads each.
	grain := max(1, minAttnWork/max(1, total*s.HeadDim*2))
	m.pool.Run(n*s.Heads, grain, st.attRun)
}

// attnJob is the pool job of attention (in the State, its function value made once).
type attnJob struct {
	st    *State
	en    *execNode
	n     int
	scale float32
}

func (j *attnJob) run(w, lo, hi int) {
	st, n := j.st, j.n
	s := st.m.spec
	hd := s.HeadDim
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	group := s.Heads / s.KVHeads
	l := j.en.n.Layer
	K, V := st.k[l], st.v[l]
	q, ctx := st.rows(j.en.in[0], 0, n), st.rows(j.en.out, 0, n)
	sc := st.scores[w]
	for item := lo; item < hi; item++ {
		h, t := item/n, item%n
		qh := q[t*qDim+h*hd : t*qDim+(h+1)*hd]
		off := (h / group) * hd
		p := sc[:st.pos+t+1]
		kernels.DotRows(p, qh, K[off:], kvDim, j.scale)
		kernels.Softmax(p)
		kernels.AxpyRows(ctx[t*qDim+h*hd:t*qDim+(h+1)*hd], p, V[off:], kvDim)
	}
}
