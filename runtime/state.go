package runtime

import "github.com/gquant/gquant/runtime/kernels"

// State is one sequence's KV cache and working buffers. It grows as tokens are added, up to
// the capacity given to NewState.
type State struct {
	m   *Model
	max int
	pos int
	// k and v hold, per layer, the keys (after RoPE) and values of every position so far,
	// position-major: [pos][kv_heads·head_dim].
	k, v [][]float32

	// working buffers, grown on demand
	x, xn, q, kk, vv, ctx, proj []float32
	gate, up, act               []float32
	cos, sin                    []float32
	scores                      [][]float32 // one per worker
	acts                        kernels.Acts

	lin    linJob              // the current product of linear
	linRun func(w, lo, hi int) // lin.run, made once
	att    attnJob             // the current attention
	attRun func(w, lo, hi int) // att.run, made once
	tok    tokJob              // the current per-token step
	tokRun func(w, lo, hi int) // tok.run, made once
}

// NewState returns an empty state for sequences of at most maxTokens tokens (0 or less: the
// model's context length).
func (m *Model) NewState(maxTokens int) *State {
	if maxTokens <= 0 {
		maxTokens = m.spec.Context
	}
	st := &State{m: m, max: maxTokens}
	st.k = make([][]float32, m.spec.Layers)
	st.v = make([][]float32, m.spec.Layers)
	st.scores = make([][]float32, m.pool.Workers())
	st.linRun = st.lin.run
	st.attRun = st.att.run
	st.tokRun = st.tok.run
	return st
}

// Pos returns the number of tokens evaluated so far (the position of the next one).
func (st *State) Pos() int { return st.pos }

// Cap returns the most tokens the state holds.
func (st *State) Cap() int { return st.max }

// Reset empties the state, keeping its memory.
func (st *State) Reset() { st.pos = 0 }

// Truncate drops every position from n on (n ≤ Pos), so that evaluation resumes at n.
func (st *State) Truncate(n int) {
	if n >= 0 && n < st.pos {
		st.pos = n
	}
}

// grow returns s with length n, reusing its memory when it is large enough.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// growCache makes the layer caches hold positions up to end (exclusive), keeping their contents
// and at least doubling their capacity when they must move.
func (st *State) growCache(end int) {
	kvDim := st.m.spec.KVHeads * st.m.spec.HeadDim
	need := end * kvDim
	for l := range st.k {
		for _, c := range []*[]float32{&st.k[l], &st.v[l]} {
			if cap(*c) >= need {
				*c = (*c)[:need]
				continue
			}
			n := min(max(need, 2*cap(*c)), st.max*kvDim)
			nc := make([]float32, need, n)
			copy(nc, (*c)[:st.pos*kvDim])
			*c = nc
		}
	}
}
