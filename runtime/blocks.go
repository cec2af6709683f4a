package runtime

import (
	"fmt"
	"unsafe"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/internal/mapped"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// Block-wise evaluation, for the layer-sequential methods (GPTQ over calibration text that
// has run through the already rounded blocks): the model is loaded with Options.Blocks, so
// that every step of the plan belongs to one block (or to the embedding before them, or to
// the tail after them), and EvalBlocks runs blocks [l0, l1) of it over a residual stream the
// caller keeps. ReplaceLinear swaps a weight for its rounded values, ReleaseBlock frees the
// blocks that will not run again.

// residual is the name of the graph value that leaves block l (l = −1: the embedding).
func residual(l int) string {
	if l < 0 {
		return "token_embd"
	}
	return fmt.Sprintf("blk.%d.out", l)
}

// EvalBlocks appends len(tokens) positions to the sequence of st, like Eval, but runs only
// blocks [l0, l1) of the model: with l0 = 0 from the tokens' embeddings, otherwise from x, the
// residual stream entering block l0 (len(tokens) × hidden), and returns the residual stream
// leaving block l1−1 (a new slice). l0 = l1 = Layers runs the tail alone (the output norm and
// the logits) on the residual stream x, and returns the logits of every position. The model
// must have been loaded with Options.Blocks. Tokens are read by the embedding only, but their
// count is the sequence's length either way.
func (m *Model) EvalBlocks(st *State, tokens []int, x []float32, l0, l1 int) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	L := m.spec.Layers
	n := len(tokens)
	switch {
	case m.closed:
		return nil, fmt.Errorf("%s: %w", m.path, errClosed)
	case !m.blocks:
		return nil, fmt.Errorf("%s: EvalBlocks: the model was not loaded for block-wise evaluation", m.path)
	case st == nil || st.m != m:
		return nil, fmt.Errorf("%s: EvalBlocks: the state belongs to another model", m.path)
	case l0 < 0 || l1 > L || l0 > l1 || (l0 == l1 && l1 < L):
		return nil, fmt.Errorf("%s: EvalBlocks: blocks [%d, %d) of %d", m.path, l0, l1, L)
	case n == 0:
		return nil, fmt.Errorf("%s: EvalBlocks: no tokens", m.path)
	case l0 > 0 && len(x) != n*m.spec.Hidden:
		return nil, fmt.Errorf("%s: EvalBlocks: %d residual values for %d tokens of %d", m.path, len(x), n, m.spec.Hidden)
	case n > st.max-st.pos:
		return nil, fmt.Errorf("%s: EvalBlocks: %d tokens at position %d exceed the state's capacity of %d", m.path, n, st.pos, st.max)
	}
	for l := l0; l < l1; l++ {
		if m.released[l] {
			return nil, fmt.Errorf("%s: EvalBlocks: block %d was released", m.path, l)
		}
	}
	if err := m.CheckContext(st.pos, n); err != nil {
		return nil, err
	}
	if l0 == 0 {
		for _, id := range tokens {
			if id < 0 || id >= m.embd.rows {
				return nil, fmt.Errorf("%s: EvalBlocks: token id %d is out of range [0,%d)", m.path, id, m.embd.rows)
			}
		}
	}
	tail := l0 == L
	m.begin(st, n, 0, tail)
	if l0 > 0 {
		copy(st.rows(m.plan.vals[residual(l0-1)], 0, n), x)
	}
	for i := range m.plan.steps {
		s := &m.plan.steps[i]
		switch {
		case s.layer >= 0 && (s.layer < l0 || s.layer >= l1):
			continue
		case s.layer < 0 && s.tail != tail:
			continue
		case s.layer < 0 && !s.tail && l0 > 0:
			continue
		}
		m.runStep(st, s, tokens, n)
	}
	st.pos += n
	if tail {
		return st.logits, nil
	}
	return append([]float32(nil), st.rows(m.plan.vals[residual(l1-1)], 0, n)...), nil
}

// ReplaceLinear makes the weight matrix name (GGUF name, a linear layer's, or an expert's
// matrix, arch.ExpertWeight) float32 values w (rows × cols, the source's row order), for the
// evaluations that follow. The model must have been loaded with Options.Blocks.
func (m *Model) ReplaceLinear(name string, w []float32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.mats[name]
	stack, expert, isExpert := arch.SplitExpert(name) // an expert's matrix (arch.ExpertWeight)
	if ws := m.experts[stack]; isExpert && expert < len(ws) {
		old = ws[expert]
	}
	switch {
	case !m.blocks:
		return fmt.Errorf("%s: ReplaceLinear: the model was not loaded for block-wise evaluation", m.path)
	case old == nil:
		return fmt.Errorf("%s: ReplaceLinear: %s is not a weight matrix of the model", m.path, name)
	case len(w) != old.Rows*old.Cols || len(w) == 0:
		return fmt.Errorf("%s: ReplaceLinear: %s: %d values, want %d × %d", m.path, name, len(w), old.Rows, old.Cols)
	}
	data := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))
	nw, err := newLinear(rawTensor{name: name, typ: gguf.F32, shape: []int{old.Rows, old.Cols}, data: data}, old.Mode)
	if err != nil {
		return err
	}
	nw.Pack()
	if isExpert && m.experts[stack] != nil {
		m.experts[stack][expert] = nw
	} else {
		m.mats[name] = nw
	}
	m.rebind(old, nw)
	if m.fileBacked[old] && !m.uses(old) {
		mapped.Release(old.Data) // its pages leave the resident set (they stay in the page cache)
		delete(m.fileBacked, old)
	}
	return nil
}

// ReplaceVector makes the vector name (GGUF name: a norm's weight or a linear layer's bias)
// values v, for the evaluations that follow: layer-sequential AWQ folds its scalings into
// them. The values are copied into the model's own vector, which every node reading it shares.
// The model must have been loaded with Options.Blocks.
func (m *Model) ReplaceVector(name string, v []float32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.vecs[name]
	switch {
	case !m.blocks:
		return fmt.Errorf("%s: ReplaceVector: the model was not loaded for block-wise evaluation", m.path)
	case !ok:
		return fmt.Errorf("%s: ReplaceVector: %s is not a vector of the model", m.path, name)
	case len(v) != len(old):
		return fmt.Errorf("%s: ReplaceVector: %s: %d values, want %d", m.path, name, len(v), len(old))
	}
	copy(old, v)
	return nil
}

// ReleaseBlock drops the matrices that ReplaceLinear gave block l: the block cannot run again.
func (m *Model) ReleaseBlock(l int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released == nil {
		m.released = map[int]bool{}
	}
	m.released[l] = true
	for _, en := range m.plan.nodes {
		if en.n.Layer == l && en.w != nil {
			delete(m.mats, en.n.Weight)
			m.rebind(en.w, nil)
		}
		if en.n.Layer == l && en.n.Op == arch.OpMoE {
			for i, st := range []string{en.n.GateExps, en.n.UpExps, en.n.DownExps} {
				delete(m.experts, st)
				en.exps[i] = nil
			}
		}
	}
}

// uses reports whether a node still multiplies by w (a tied embedding's output does).
func (m *Model) uses(w *kernels.Matrix) bool {
	for _, en := range m.plan.nodes {
		if en.w == w {
			return true
		}
		for _, ws := range en.exps {
			for _, x := range ws {
				if x == w {
					return true
				}
			}
		}
	}
	return false
}

// rebind points every node and step that multiplies by old to nw.
func (m *Model) rebind(old, nw *kernels.Matrix) {
	for _, en := range m.plan.nodes {
		if en.w == old {
			en.w = nw
		}
		for _, ws := range en.exps {
			for i, x := range ws {
				if x == old {
					ws[i] = nw
				}
			}
		}
	}
	for i := range m.plan.steps {
		lin := m.plan.steps[i].lin
		for j := range lin {
			if lin[j].w == old {
				lin[j].w = nw
			}
		}
	}
}
