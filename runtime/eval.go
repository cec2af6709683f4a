package runtime

import (
	"fmt"
	"slices"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// Eval appends tokens to the sequence of st at position st.Pos() and returns logits: those of
// every new position (len(tokens)×Vocab(), row-major) when allLogits is true, otherwise those
// of the last one (Vocab()). The slice is the caller's. Evaluations of one model are
// serialised. Tokens beyond the model's context length (CheckContext) or the state's
// capacity are refused before anything is allocated for them.
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
	if err := m.CheckContext(st.pos, n); err != nil {
		return nil, err
	}
	if n > st.max-st.pos {
		return nil, fmt.Errorf("%s: Eval: %d tokens at position %d exceed the state's capacity of %d", m.path, n, st.pos, st.max)
	}
	for _, id := range tokens {
		if id < 0 || id >= m.embd.rows {
			return nil, fmt.Errorf("%s: Eval: token id %d is out of range [0,%d)", m.path, id, m.embd.rows)
		}
	}
	return m.forward(st, tokens, allLogits), nil
}

// forward runs the plan over n checked tokens.
func (m *Model) forward(st *State, tokens []int, allLogits bool) []float32 {
	n := len(tokens)
	first := 0
	if !allLogits {
		first = n - 1
	}
	m.begin(st, n, first, true)
	st.read += m.denseBytes
	for i := range m.plan.steps {
		m.runStep(st, &m.plan.steps[i], tokens, n)
	}
	if st.batch != nil {
		for _, s := range st.batch {
			s.pos++
		}
	} else {
		st.pos += n
	}
	return st.logits
}

// EvalBatch appends one token to each of several sequences at once, tokens[i] to sts[i], and
// returns the logits of the new positions, len(sts)×Vocab() (row i is sts[i]'s; the slice is
// the caller's). The new tokens go through every weight matrix together, so that a decode step
// of B sequences reads the weights once instead of B times (BytesRead counts them once, in
// sts[0]); each token attends to its own sequence's cache. A sequence gets the logits Eval
// would give it alone, bit for bit where the kernels give a token the same bits in any batch
// (as they do for quantized weights, and for bf16 ones but under AMX tiles, whose float32 sums
// take another order than the decode's: TestEvalBatch). The states must be distinct
// states of m (of one rotary scaling: made with capacities on the same side of the original
// context of a long-context model), each with room for one more token. Where attention runs
// in its primitive form (hooks observing its scores, an encoding inside it: Batches is false),
// the sequences are evaluated one after the other, with the same results.
func (m *Model) EvalBatch(sts []*State, tokens []int) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("%s: %w", m.path, errClosed)
	}
	if len(sts) == 0 || len(sts) != len(tokens) {
		return nil, fmt.Errorf("%s: EvalBatch: %d states and %d tokens", m.path, len(sts), len(tokens))
	}
	for i, st := range sts {
		switch {
		case st == nil || st.m != m:
			return nil, fmt.Errorf("%s: EvalBatch: state %d belongs to another model", m.path, i)
		case slices.Contains(sts[:i], st):
			return nil, fmt.Errorf("%s: EvalBatch: state %d is given twice", m.path, i)
		case !slices.Equal(st.ropes, sts[0].ropes):
			return nil, fmt.Errorf("%s: EvalBatch: states 0 and %d have different rotary tables (capacities on either side of the original context %d)", m.path, i, m.spec.RopeScaling.OriginalContext)
		case tokens[i] < 0 || tokens[i] >= m.embd.rows:
			return nil, fmt.Errorf("%s: EvalBatch: token id %d is out of range [0,%d)", m.path, tokens[i], m.embd.rows)
		}
		if err := m.CheckContext(st.pos, 1); err != nil {
			return nil, err
		}
		if st.pos >= st.max {
			return nil, fmt.Errorf("%s: EvalBatch: state %d is full (%d tokens)", m.path, i, st.max)
		}
	}
	if !m.plan.batches {
		V := m.Vocab()
		logits := make([]float32, len(sts)*V)
		for i, st := range sts {
			copy(logits[i*V:], m.forward(st, tokens[i:i+1], false))
		}
		return logits, nil
	}
	d := sts[0] // drives the evaluation: its buffers hold every row
	if len(sts) > 1 {
		d.batch = sts
		defer func() { d.batch = nil }()
	}
	return m.forward(d, tokens, true), nil
}

// Batches reports whether EvalBatch evaluates its sequences together: every attention runs in
// the fast form (no hook observes its scores, no encoding sits inside it).
func (m *Model) Batches() bool { return m.plan.batches }

// begin prepares st for an evaluation of n new positions: the KV cache, the working buffers,
// the rotation tables and, with logits, the logits of positions [first, n).
func (m *Model) begin(st *State, n, first int, logits bool) {
	if st.batch == nil {
		st.growCache(st.pos + n)
	}
	for _, s := range st.batch {
		s.growCache(s.pos + 1)
	}
	st.size(n)
	for k, r := range st.ropes {
		st.cos[k] = grow(st.cos[k], n*r.half)
		st.sin[k] = grow(st.sin[k], n*r.half)
		if st.batch == nil {
			arch.RopeTables(r.invFreq, st.pos, n, st.cos[k], st.sin[k])
		}
		for t, s := range st.batch { // row t at its sequence's position
			h := r.half
			arch.RopeTables(r.invFreq, s.pos, 1, st.cos[k][t*h:(t+1)*h], st.sin[k][t*h:(t+1)*h])
		}
		if r.attn != 1 {
			for i := range st.cos[k] {
				st.cos[k][i] *= r.attn
				st.sin[k][i] *= r.attn
			}
		}
	}
	st.n, st.first = n, first
	st.logits = nil
	if logits && !st.skips() {
		st.logits = make([]float32, (n-first)*m.Vocab())
	}
}

// runStep runs one step of the plan over the n tokens of the evaluation (a tail step over the
// wanted positions [st.first, n)).
func (m *Model) runStep(st *State, s *step, tokens []int, n int) {
	t0 := 0
	if s.tail {
		t0 = st.first
	}
	switch s.kind {
	case stepRows:
		m.runRows(st, &s.rows, tokens, t0, n)
	case stepLinear:
		if s.tail && st.skips() {
			if h := m.hooks; h != nil && h.LinearInput != nil {
				o := s.lin[0]
				h.LinearInput(o.weight, st.rows(s.in, t0, n), n-t0, o.w.Cols)
			}
			return
		}
		outs := st.lin.buf2[:0]
		for _, o := range s.lin {
			outs = append(outs, out{st.rows(o.out, t0, n), o.w, o.weight, o.dynX})
		}
		st.lin.buf2 = outs
		m.linear(st, st.rows(s.in, t0, n), n-t0, outs...)
	case stepAttention:
		m.attention(st, s.node, n)
	case stepNode:
		m.runNode(st, s.node, tokens, t0, n)
	}
}

// minWork is the multiply-adds below which a product is not split across workers.
const minWork = 1 << 18

// out is one product of linear: y = W·x, W named name (GGUF) for the hooks; dynX: x is
// quantized per token for W first (linOut.dynX).
type out struct {
	y    []float32
	w    *kernels.Matrix
	name string
	dynX bool
}

// linear computes y = W·x for each product, over the same n input rows x (n×Cols, y: n×Rows).
// Consecutive matrices whose products take the same activation form (q, k and v; gate and
// up) share one conversion of x and one pool job over the rows of them all, so that a decode
// step pays one fork-join per group instead of one per matrix. With a run-time encoding of
// linear inputs (a w4a8 gqf file), matrices whose kernels do not quantize their input per
// token themselves get a copy of x quantized that way.
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
		xi := x
		if outs[i].dynX {
			st.dynX = grow(st.dynX, n*w.Cols)
			copy(st.dynX, x[:n*w.Cols])
			gqf.QDQRows(m.dyn, st.dynX, w.Cols)
			xi = st.dynX
		}
		w.PrepareOn(m.pool, j.acts, xi, n)
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
	buf2 []out
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
