package runtime

import (
	"fmt"

	"github.com/gquant/gquant/runtime/kernels"
)

// State is one sequence's KV cache and working buffers. It grows as tokens are added, up to
// the capacity given to NewState.
type State struct {
	m   *Model
	max int
	pos int
	// k and v hold, per layer, the keys (after RoPE) and values of every position so far. v is
	// position-major, [pos][kv_heads·head_dim]; k is in blocks of kernels.KeyBlock positions,
	// [pos/KeyBlock][kv_heads·head_dim][pos%KeyBlock] (each head's tile of a block is the
	// dimension-major layout kernels.AttnScores reads), with whole blocks allocated.
	k, v [][]float32

	// bufs are the plan's slots (plan.go), grown on demand; logits is the output of the
	// current evaluation, rows [first, n) of it.
	bufs     [][]float32
	logits   []float32
	first, n int
	cos, sin [][]float32   // per rotary table of the model
	ropes    []*rope       // the model's tables for the state's capacity (Model.ropesLong)
	attw     []attnScratch // attention: one per worker
	side     []float32     // observe.go: points computed for the hooks, and primitive forms
	side2    []float32
	gate, up []float32 // observe.go: a fused gate_up's halves
	acts     kernels.Acts
	dynX     []float32 // linear: a copy of the input quantized per token (w4a8 simulation)

	lin    linJob              // the current product of linear
	linRun func(w, lo, hi int) // lin.run, made once
	att    attnJob             // the current attention
	attRun func(w, lo, hi int) // att.run, made once
	rj     rowJob              // the current row step
	rjRun  func(w, lo, hi int) // runOffset, made once
	rowOff int

	skipLogits bool // SkipLogits

	// batch, during an EvalBatch that this state drives (its buffers hold every sequence's
	// row), is the sequences: row t is batch[t]'s next position, stored in batch[t]'s cache.
	batch []*State

	moe  moeScratch // moe nodes (moe.go)
	read int64      // BytesRead
}

// BytesRead returns the weight bytes the evaluations on st have read so far: per evaluation,
// every matrix but the experts', the vectors and an embedding row (Model.WeightBytes'
// dense part), and the matrices of every expert some token of it was routed to, once each.
// Decoding, the difference over a token is what that token read.
func (st *State) BytesRead() int64 { return st.read }

// SkipLogits makes the evaluations on st that follow skip the output layer's product where
// nothing observes or quantizes the logits: Hooks.LinearInput still receives its input for
// every wanted position, and Eval and EvalBlocks return no logits (nil). For calibration,
// which needs the output layer's input, not its product. A model whose logits are observed
// (Hooks.Activation on them) computes them anyway.
func (st *State) SkipLogits(skip bool) { st.skipLogits = skip }

// skips reports whether the evaluation skips the output product.
func (st *State) skips() bool { return st.skipLogits && st.m.plan.bareOutput }

// NewState returns an empty state for sequences of at most maxTokens tokens, and never more
// than the model's context length (0 or less: the context length). Its KV cache grows with
// the positions evaluated, up to that capacity; Eval refuses tokens beyond it, naming the
// context length when that is the limit (CheckContext).
func (m *Model) NewState(maxTokens int) *State {
	if maxTokens <= 0 || maxTokens > m.spec.Context {
		maxTokens = m.spec.Context
	}
	st := &State{m: m, max: maxTokens}
	st.k = make([][]float32, m.spec.Layers)
	st.v = make([][]float32, m.spec.Layers)
	st.attw = make([]attnScratch, m.pool.Workers())
	st.cos, st.sin = make([][]float32, len(m.ropes)), make([][]float32, len(m.ropes))
	st.ropes = m.ropes
	if m.ropesLong != nil && maxTokens > m.spec.RopeScaling.OriginalContext {
		st.ropes = m.ropesLong
	}
	st.bufs = make([][]float32, len(m.plan.slots))
	st.linRun = st.lin.run
	st.attRun = st.att.run
	st.rjRun = st.runOffset
	return st
}

// Pos returns the number of tokens evaluated so far (the position of the next one).
func (st *State) Pos() int { return st.pos }

// Cap returns the most tokens the state holds (at most the model's context length).
func (st *State) Cap() int { return st.max }

// Context returns the model's context length: the most positions any sequence has.
func (m *Model) Context() int { return m.spec.Context }

// CheckContext returns an error, naming the model's context length, when n tokens at
// position pos would take a position at or beyond it: the one context check of the runtime
// (Eval, Generate), for callers to run on their requests before they allocate for them.
func (m *Model) CheckContext(pos, n int) error {
	ctx := m.spec.Context
	if pos >= 0 && n >= 0 && n <= ctx-pos {
		return nil
	}
	what, verb := fmt.Sprintf("%d tokens", n), "exceed"
	if n == 1 {
		what, verb = "1 token", "exceeds"
	}
	if pos != 0 {
		what += fmt.Sprintf(" at position %d", pos)
	}
	return fmt.Errorf("%s: %s %s the model's context length %d", m.path, what, verb, ctx)
}

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

// size makes every slot hold n rows.
func (st *State) size(n int) {
	for i, s := range st.m.plan.slots {
		st.bufs[i] = grow(st.bufs[i], n*s.width)
	}
}

// rows returns rows [t0, t1) of a value.
func (st *State) rows(v value, t0, t1 int) []float32 {
	if v.slot < 0 {
		return st.logits[(t0-st.first)*v.dim : (t1-st.first)*v.dim]
	}
	return st.bufs[v.slot][t0*v.dim : t1*v.dim]
}

// row returns row t of a value.
func (st *State) row(v value, t int) []float32 { return st.rows(v, t, t+1) }

// ropeCos and ropeSin return the rotation tables k of new token t.
func (st *State) ropeCos(k, t int) []float32 {
	h := st.ropes[k].half
	return st.cos[k][t*h : (t+1)*h]
}

func (st *State) ropeSin(k, t int) []float32 {
	h := st.ropes[k].half
	return st.sin[k][t*h : (t+1)*h]
}

// growCache makes the layer caches hold positions up to end (exclusive), keeping their contents
// and at least doubling their capacity when they must move.
func (st *State) growCache(end int) {
	kvDim := st.m.spec.KVHeads * st.m.spec.HeadDim
	whole := func(p int) int { return (p + kernels.KeyBlock - 1) / kernels.KeyBlock * kernels.KeyBlock } // whole key blocks
	for l := range st.k {
		growKV(&st.k[l], whole(end)*kvDim, whole(st.pos)*kvDim, whole(st.max)*kvDim)
		growKV(&st.v[l], end*kvDim, st.pos*kvDim, st.max*kvDim)
	}
}

// growKV makes *c hold need values, keeping the first keep, growing its capacity to at least
// twice (at most limit) when it must move.
func growKV(c *[]float32, need, keep, limit int) {
	if cap(*c) >= need {
		*c = (*c)[:need]
		return
	}
	nc := make([]float32, need, min(max(need, 2*cap(*c)), limit))
	copy(nc, (*c)[:keep])
	*c = nc
}
