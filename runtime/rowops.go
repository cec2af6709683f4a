package runtime

import (
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// Row ops: the row-wise nodes of a row step, done token by token. Each worker of the step's
// pool job runs every op of the step, in order, for its own tokens: an op reads and writes
// row t of its buffers only, so the fusion changes no result. A node step runs its node's own
// row op the same way (execNode.self).

// rowKind is what a row op does.
type rowKind uint8

const (
	opEmbed     rowKind = iota // out = the embedding row of the token
	opNorm                     // out = RMSNorm(in)
	opNormHeads                // out = RMSNorm of each head of in
	opBias                     // out += bias (a linear node's), then its value's encoding
	opRope                     // out = RoPE(in), in place when out is in
	opAdd                      // out = in0 + in1
	opSwiGLU                   // out = silu(in0)·in1, or of in0's halves
	opGeGLU                    // out = gelu_tanh(in0)·in1
	opSoftcap                  // out = cap·tanh(in/cap)
	opQDQ                      // out = its encoding's quantize-dequantize (after an attention step)
)

// rowOp is one node inside a row step.
type rowOp struct {
	kind rowKind
	node *execNode
	out  value
	in   []value
	q    *qdq // the value's encoding (nil: float)
}

// newRowOp makes the row op of a fusable node.
func newRowOp(en *execNode) rowOp {
	op := rowOp{node: en, out: en.out, in: en.in, q: en.quant[len(en.quant)-1]}
	switch en.n.Op {
	case arch.OpEmbed:
		op.kind = opEmbed
	case arch.OpRMSNorm:
		op.kind = opNorm
		if en.n.Heads > 0 {
			op.kind = opNormHeads
		}
	case arch.OpRope:
		op.kind = opRope
	case arch.OpAdd:
		op.kind = opAdd
	case arch.OpSwiGLU:
		op.kind = opSwiGLU
	case arch.OpGeGLU:
		op.kind = opGeGLU
	case arch.OpSoftcap:
		op.kind = opSoftcap
	}
	return op
}

// rowOps is a row step's ops with its chunk of tokens: some 16k values of the widest row
// touched, so that a few tokens stay on one thread.
type rowOps struct {
	ops   []rowOp
	grain int
}

func newRowOps(ops []rowOp) rowOps {
	w := 1
	for _, op := range ops {
		w = max(w, op.out.dim)
	}
	return rowOps{ops: ops, grain: max(1, (1<<14)/w)}
}

// rowJob is the pool job of a row step (in the State, its function value made once).
type rowJob struct {
	st     *State
	ops    []rowOp
	tokens []int
}

// runRows runs row ops over tokens [t0, t1) of the evaluation.
func (m *Model) runRows(st *State, r *rowOps, tokens []int, t0, t1 int) {
	st.rj = rowJob{st: st, ops: r.ops, tokens: tokens}
	n := t1 - t0
	if n <= r.grain || m.pool.Workers() == 1 {
		st.rj.run(0, t0, t1)
		return
	}
	st.rowOff = t0
	m.pool.Run(n, r.grain, st.rjRun)
}

// runOffset is rowJob.run shifted by the step's first token (pool jobs count from 0).
func (st *State) runOffset(w, lo, hi int) { st.rj.run(w, lo+st.rowOff, hi+st.rowOff) }

func (j *rowJob) run(_, lo, hi int) {
	st := j.st
	m := st.m
	eps := m.spec.RMSEps
	for t := lo; t < hi; t++ {
		for i := range j.ops {
			op := &j.ops[i]
			out := st.row(op.out, t)
			switch op.kind {
			case opEmbed:
				m.embd.row(out, j.tokens[t])
				if s := op.node.n.Scale; s != 0 {
					for k := range out {
						out[k] *= s
					}
				}
			case opNorm:
				kernels.RMSNorm(out, st.row(op.in[0], t), op.node.vec, eps)
			case opNormHeads:
				in := st.row(op.in[0], t)
				hd := op.out.dim / op.node.n.Heads
				for h := 0; h < op.node.n.Heads; h++ {
					kernels.RMSNorm(out[h*hd:(h+1)*hd], in[h*hd:(h+1)*hd], op.node.vec, eps)
				}
			case opBias:
				if b := op.node.bias; b != nil {
					for k, v := range b {
						out[k] += v
					}
				}
			case opRope:
				if in := st.row(op.in[0], t); &in[0] != &out[0] {
					copy(out, in)
				}
				k := op.node.n.Rope
				st.ropes[k].apply(out, op.node.n.Heads, st.ropeCos(k, t), st.ropeSin(k, t))
			case opAdd:
				a, b := st.row(op.in[0], t), st.row(op.in[1], t)
				if &a[0] != &out[0] {
					copy(out, a)
				}
				kernels.Add(out, b)
			case opSwiGLU:
				if len(op.in) == 1 { // fused gate_up: gate, then up
					in := st.row(op.in[0], t)
					kernels.SiLUMul(out, in[:len(out)], in[len(out):])
				} else {
					kernels.SiLUMul(out, st.row(op.in[0], t), st.row(op.in[1], t))
				}
			case opGeGLU:
				gegluRow(out, st.row(op.in[0], t), st.row(op.in[1], t))
			case opSoftcap:
				softcap(out, st.row(op.in[0], t), op.node.n.Cap)
			case opQDQ:
			}
			if op.q != nil {
				op.q.apply(out)
			}
		}
	}
}

// qdq is a point's static encoding (a gqf activation encoding): the values are quantized and
// dequantized in place as they are produced.
type qdq struct {
	e *gqf.Encoding
	q gqf.Quantizer // e's constants, computed once
}

func newQDQ(e *gqf.Encoding) *qdq { return &qdq{e: e, q: gqf.NewQuantizer(e)} }

func (q *qdq) apply(x []float32) { q.q.QDQ(x) }
