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

	for l := range m.layers {
		L := &m.layers[l]
		rmsNorm(xn, x, L.attnNorm, n, H, s.RMSEps)
		m.activation(l, "attn_norm", xn, n, H)

		m.linear(st, xn, n, out{st.q, L.q, L.nq}, out{st.kk, L.k, L.nk}, out{st.vv, L.v, L.nv})
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
		h2 := hd / 2
		for t := 0; t < n; t++ {
			c, sn := st.cos[t*h2:(t+1)*h2], st.sin[t*h2:(t+1)*h2]
			m.rope.apply(st.q[t*qDim:(t+1)*qDim], s.Heads, c, sn)
			m.rope.apply(st.kk[t*kvDim:(t+1)*kvDim], s.KVHeads, c, sn)
		}
		m.activation(l, "q_rope", st.q, n, qDim)
		m.activation(l, "k_rope", st.kk, n, kvDim)
		copy(st.k[l][pos0*kvDim:], st.kk)
		copy(st.v[l][pos0*kvDim:], st.vv)

		m.attention(st, l, n)
		m.activation(l, "kqv_out", st.ctx, n, qDim)

		m.linear(st, st.ctx, n, out{st.proj, L.o, L.no})
		m.activation(l, "attn_out", st.proj, n, H)
		addTo(x, st.proj)
		m.activation(l, "ffn_inp", x, n, H)

		rmsNorm(xn, x, L.ffnNorm, n, H, s.RMSEps)
		m.activation(l, "ffn_norm", xn, n, H)
		m.linear(st, xn, n, out{st.gate, L.gate, L.ngate}, out{st.up, L.up, L.nup})
		m.activation(l, "ffn_gate", st.gate, n, s.Intermediate)
		m.activation(l, "ffn_up", st.up, n, s.Intermediate)
		swiglu(st.act, st.gate, st.up)
		m.activation(l, "ffn_act", st.act, n, s.Intermediate)
		m.linear(st, st.act, n, out{st.proj, L.down, L.ndown})
		m.activation(l, "ffn_out", st.proj, n, H)
		addTo(x, st.proj)
		m.activation(l, "out", x, n, H)
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

// out is one product of linear: y = W·x, W named name (GGUF) for the hooks.
type out struct {
	y    []float32
	w    *kernels.Matrix
	name string
}

// linear computes y = W·x for each product, over the same n input rows x (n×Cols, y: n×Rows),
// with each matrix's rows spread over the pool. The activations are converted once for
// consecutive matrices of the same type and mode (q, k and v; gate and up).
func (m *Model) linear(st *State, x []float32, n int, outs ...out) {
	if h := m.hooks; h != nil && h.LinearInput != nil {
		for _, o := range outs {
			h.LinearInput(o.name, x[:n*o.w.Cols], n, o.w.Cols)
		}
	}
	acts := &st.acts
	for i, o := range outs {
		w := o.w
		if i == 0 || w.Type != outs[i-1].w.Type || w.Mode != outs[i-1].w.Mode {
			w.Prepare(acts, x, n)
		}
		// Chunks of whole 16-row tiles, each worth at least minWork multiply-adds.
		grain := 16
		if per := w.Cols * n * grain; per < minWork {
			grain = (minWork/(w.Cols*n) + 15) &^ 15
		}
		y := o.y
		m.pool.Run(w.Rows, grain, func(_, lo, hi int) { w.MulActs(y, acts, lo, hi) })
	}
}

// attention computes, for each new token and query head, softmax(q·Kᵀ/√d)·V over the
// positions up to its own (causal), into st.ctx. Work items (token, head) are spread over the
// pool.
func (m *Model) attention(st *State, l, n int) {
	s := m.spec
	hd := s.HeadDim
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	group := s.Heads / s.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	K, V := st.k[l], st.v[l]
	pos0 := st.pos
	total := pos0 + n
	for w := range st.scores {
		st.scores[w] = grow(st.scores[w], total)
	}
	grain := max(1, minWork/max(1, total*hd*2))
	m.pool.Run(n*s.Heads, grain, func(w, lo, hi int) {
		sc := st.scores[w]
		for item := lo; item < hi; item++ {
			t, h := item/s.Heads, item%s.Heads
			q := st.q[t*qDim+h*hd : t*qDim+(h+1)*hd]
			off := (h / group) * hd
			np := pos0 + t + 1
			p := sc[:np]
			for j := range p {
				p[j] = dot(q, K[j*kvDim+off:]) * scale
			}
			softmaxInPlace(p)
			out := st.ctx[t*qDim+h*hd : t*qDim+(h+1)*hd]
			clear(out)
			for j, pj := range p {
				axpy(out, pj, V[j*kvDim+off:j*kvDim+off+hd])
			}
		}
	})
}
