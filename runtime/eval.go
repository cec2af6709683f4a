package runtime

import (
	"fmt"
	"math"

	"github.com/gquant/gquant/runtime/kernels"
)

// Eval appends tokens to the sequence of st at position st.Pos() and returns logits: those of
// every new position (len(tokens)×Vocab(), row-major) when allLogits is true, otherwise those
// of the last one (Vocab()). The slice is the caller's. Evaluations of one model are
// serialised.
func (m *Model) Eval(st *State, tokens []int, allLogits bool) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("%s: %w", m.path, errClosed)
	}
	if st == nil || st.m != m {
		return nil, fmt.Errorf("%s: Eval: the state belongs to another model", m.path)
	}
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("%s: Eval: no tokens", m.path)
	}
	if st.pos+n > st.max {
		return nil, fmt.Errorf("%s: Eval: %d tokens at position %d exceed the state's capacity of %d", m.path, n, st.pos, st.max)
	}
	for _, id := range tokens {
		if id < 0 || id >= m.embd.rows {
			return nil, fmt.Errorf("%s: Eval: token id %d is out of range [0,%d)", m.path, id, m.embd.rows)
		}
	}
	return m.forward(st, tokens, allLogits), nil
}

// forward runs the graph over n checked tokens.
func (m *Model) forward(st *State, tokens []int, allLogits bool) []float32 {
	s := m.spec
	n := len(tokens)
	hd, H := s.HeadDim, s.Hidden
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	pos0 := st.pos

	st.growCache(pos0 + n)
	st.x = grow(st.x, n*H)
	st.xn = grow(st.xn, n*H)
	st.q = grow(st.q, n*qDim)
	st.kk = grow(st.kk, n*kvDim)
	st.vv = grow(st.vv, n*kvDim)
	st.ctx = grow(st.ctx, n*qDim)
	st.proj = grow(st.proj, n*H)
	st.gate = grow(st.gate, n*s.Intermediate)
	st.up = grow(st.up, n*s.Intermediate)
	st.act = grow(st.act, n*s.Intermediate)
	st.cos = grow(st.cos, n*hd/2)
	st.sin = grow(st.sin, n*hd/2)
	x, xn := st.x, st.xn

	for t, id := range tokens {
		m.embd.row(x[t*H:(t+1)*H], id)
	}
	m.activation(-1, "token_embd", x, n, H)
	m.rope.tables(st.cos, st.sin, pos0, n)

	// Without an Activation hook, the elementwise steps between the products run as per-token
	// pool jobs, fused where the hook points in between are not needed (tokops.go).
	fused := m.hooks == nil || m.hooks.Activation == nil
	if fused {
		m.perToken(st, opAttnNorm, 0, n)
	}
	for l := range m.layers {
		L := &m.layers[l]
		if !fused {
			rmsNorm(xn, x, L.attnNorm, n, H, s.RMSEps)
			m.activation(l, "attn_norm", xn, n, H)
		}

		m.linear(st, xn, n, out{st.q, L.q, L.nq}, out{st.kk, L.k, L.nk}, out{st.vv, L.v, L.nv})
		if fused {
			m.perToken(st, opQKV, l, n)
		} else {
			m.qkvHooked(st, l, n)
		}

		m.attention(st, l, n)
		m.activation(l, "kqv_out", st.ctx, n, qDim)

		m.linear(st, st.ctx, n, out{st.proj, L.o, L.no})
		if fused {
			m.perToken(st, opFFNNorm, l, n)
		} else {
			m.activation(l, "attn_out", st.proj, n, H)
			kernels.Add(x, st.proj)
			m.activation(l, "ffn_inp", x, n, H)
			rmsNorm(xn, x, L.ffnNorm, n, H, s.RMSEps)
			m.activation(l, "ffn_norm", xn, n, H)
		}
		m.linear(st, xn, n, out{st.gate, L.gate, L.ngate}, out{st.up, L.up, L.nup})
		if fused {
			m.perToken(st, opSwiGLU, l, n)
		} else {
			m.activation(l, "ffn_gate", st.gate, n, s.Intermediate)
			m.activation(l, "ffn_up", st.up, n, s.Intermediate)
			kernels.SiLUMul(st.act, st.gate, st.up)
			m.activation(l, "ffn_act", st.act, n, s.Intermediate)
		}
		m.linear(st, st.act, n, out{st.proj, L.down, L.ndown})
		if fused {
			m.perToken(st, opOut, l, n)
		} else {
			m.activation(l, "ffn_out", st.proj, n, H)
			kernels.Add(x, st.proj)
			m.activation(l, "out", x, n, H)
		}
	}
	st.pos += n

	// Output: every position or the last.
	first, rows := 0, n
	if !allLogits {
		first, rows = n-1, 1
	}
	xo := x[first*H : n*H]
	rmsNorm(xn, xo, m.outputNorm, rows, H, s.RMSEps)
	xn = xn[:rows*H]
	m.activation(-1, "output_norm", xn, rows, H)
	V := m.output.Rows
	logits := make([]float32, rows*V)
	m.linear(st, xn, rows, out{logits, m.output, "output.weight"})
	m.activation(-1, "logits", logits, rows, V)
	return logits
}

// qkvHooked finishes the q, k and v projections of layer l with the Activation hook called at
// each step: biases, q/k norms, RoPE, then the keys and values into the cache.
func (m *Model) qkvHooked(st *State, l, n int) {
	s := m.spec
	L := &m.layers[l]
	hd := s.HeadDim
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	if L.qBias != nil {
		addBias(st.q, L.qBias, n)
		addBias(st.kk, L.kBias, n)
		addBias(st.vv, L.vBias, n)
	}
	m.activation(l, "q", st.q, n, qDim)
	m.activation(l, "k", st.kk, n, kvDim)
	m.activation(l, "v", st.vv, n, kvDim)
	if L.qNorm != nil {
		rmsNorm(st.q, st.q, L.qNorm, n*s.Heads, hd, s.RMSEps)
		rmsNorm(st.kk, st.kk, L.kNorm, n*s.KVHeads, hd, s.RMSEps)
		m.activation(l, "q_norm", st.q, n, qDim)
		m.activation(l, "k_norm", st.kk, n, kvDim)
	}
	for t := 0; t < n; t++ {
		m.ropeToken(st, t)
	}
	m.activation(l, "q_rope", st.q, n, qDim)
	m.activation(l, "k_rope", st.kk, n, kvDim)
	copy(st.k[l][st.pos*kvDim:], st.kk[:n*kvDim])
	copy(st.v[l][st.pos*kvDim:], st.vv[:n*kvDim])
}

// ropeToken rotates the queries and keys of new token t.
func (m *Model) ropeToken(st *State, t int) {
	s := m.spec
	h2 := s.HeadDim / 2
	qDim, kvDim := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	c, sn := st.cos[t*h2:(t+1)*h2], st.sin[t*h2:(t+1)*h2]
	m.rope.apply(st.q[t*qDim:(t+1)*qDim], s.Heads, c, sn)
	m.rope.apply(st.kk[t*kvDim:(t+1)*kvDim], s.KVHeads, c, sn)
}

// activation calls the Activation hook, naming the tensor "blk.L.name" (or name for L < 0).
func (m *Model) activation(l int, name string, x []float32, n, dim int) {
	h := m.hooks
	if h == nil || h.Activation == nil {
		return
	}
	if l >= 0 {
		name = fmt.Sprintf("blk.%d.%s", l, name)
	}
	h.Activation(name, x[:n*dim], n, dim)
}

// minWork is the multiply-adds below which a product is not split across workers.
const minWork = 1 << 18

// minAttnWork is the multiply-adds of the smallest chunk of attention work (a pool round trip
// costs about a microsecond, a few thousand multiply-adds of attention).
const minAttnWork = 1 << 14

// out is one product of linear: y = W·x, W named name (GGUF) for the hooks.
type out struct {
	y    []float32
	w    *kernels.Matrix
	name string
}

// linear computes y = W·x for each product, over the same n input rows x (n×Cols, y: n×Rows).
// Consecutive matrices whose products take the same activation form (q, k and v; gate and
// up) share one conversion of x and one pool job over the rows of them all, so that a decode
// step pays one fork-join per group instead of one per matrix.
func (m *Model) linear(st *State, x []float32, n int, outs ...out) {
	if h := m.hooks; h != nil && h.LinearInput != nil {
		for _, o := range outs {
			h.LinearInput(o.name, x[:n*o.w.Cols], n, o.w.Cols)
		}
	}
	j := &st.lin
	j.acts = &st.acts
	for i := 0; i < len(outs); {
		k, rows := i+1, outs[i].w.Rows
		for k < len(outs) && outs[k].w.SharesActs(outs[i].w) {
			rows += outs[k].w.Rows
			k++
		}
		j.outs = j.buf[:copy(j.buf[:], outs[i:k])]
		w := outs[i].w
		w.PrepareOn(m.pool, j.acts, x, n)
		m.pool.RunDynamic(rows, m.chunkRows(w.Cols*n), st.linRun)
		i = k
	}
	j.outs = nil
}

// chunkRows returns the smallest chunk of a product whose rows each take work multiply-adds:
// whole 16-row tiles worth at least minWork multiply-adds (RunDynamic hands out larger chunks
// first).
func (m *Model) chunkRows(work int) int {
	return (max(16, minWork/max(work, 1)) + 15) &^ 15
}

// linJob is the pool job of linear: rows [lo,hi) of the concatenated rows of outs. It lives in
// the State, with its function value made once, so that a product allocates nothing.
type linJob struct {
	outs []out
	buf  [3]out
	acts *kernels.Acts
}

func (j *linJob) run(_, lo, hi int) {
	off := 0
	for _, o := range j.outs {
		if r0, r1 := max(lo-off, 0), min(hi-off, o.w.Rows); r0 < r1 {
			o.w.MulActs(o.y, j.acts, r0, r1)
		}
		off += o.w.Rows
	}
}

// attention computes, for each new token and query head, softmax(q·Kᵀ/√d)·V over the
// positions up to its own (causal), into st.ctx. Work items are spread over the pool head by
// head (item = head·n + token), so that each worker gets a similar share of the causal work
// and reads the keys of few heads.
func (m *Model) attention(st *State, l, n int) {
	s := m.spec
	total := st.pos + n
	for w := range st.scores {
		st.scores[w] = grow(st.scores[w], total)
	}
	st.att = attnJob{st: st, l: l, n: n, scale: float32(1 / math.Sqrt(float64(s.HeadDim)))}
	// Chunks of about minAttnWork multiply-adds: at decode a few heads each.
	grain := max(1, minAttnWork/max(1, total*s.HeadDim*2))
	m.pool.Run(n*s.Heads, grain, st.attRun)
}

// attnJob is the pool job of attention (in the State, its function value made once).
type attnJob struct {
	st    *State
	l, n  int
	scale float32
}

func (j *attnJob) run(w, lo, hi int) {
	st, n := j.st, j.n
	s := st.m.spec
	hd := s.HeadDim
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	group := s.Heads / s.KVHeads
	K, V := st.k[j.l], st.v[j.l]
	sc := st.scores[w]
	for item := lo; item < hi; item++ {
		h, t := item/n, item%n
		q := st.q[t*qDim+h*hd : t*qDim+(h+1)*hd]
		off := (h / group) * hd
		p := sc[:st.pos+t+1]
		kernels.DotRows(p, q, K[off:], kvDim, j.scale)
		kernels.Softmax(p)
		kernels.AxpyRows(st.ctx[t*qDim+h*hd:t*qDim+(h+1)*hd], p, V[off:], kvDim)
	}
}
