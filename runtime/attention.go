package runtime

import (
	"math"

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

// attention computes, for each new token and query head, softmax(cap(q·Kᵀ·scale))·V over the
// positions it sees (up to its own; within the node's window when it has one), into the
// node's value. Work items are spread over the
// pool head by head (item = head·n + token), so that each worker gets a similar share of the
// causal work and reads the keys of few heads.
func (m *Model) attention(st *State, en *execNode, n int) {
	s := m.spec
	st.storeKV(en, n)
	total := st.pos + n
	for w := range st.scores {
		st.scores[w] = grow(st.scores[w], total)
	}
	st.att = attnJob{st: st, en: en, n: n, scale: en.n.Scale}
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
		first := visibleFrom(j.en.n, st.pos+t)
		off := first*kvDim + (h/group)*hd
		p := sc[:st.pos+t+1-first]
		kernels.DotRows(p, qh, K[off:], kvDim, j.scale)
		if c := j.en.n.Cap; c != 0 {
			softcap(p, p, c)
		}
		kernels.Softmax(p)
		kernels.AxpyRows(ctx[t*qDim+h*hd:t*qDim+(h+1)*hd], p, V[off:], kvDim)
	}
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
