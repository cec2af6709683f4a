package runtime

import "github.com/gquant/gquant/runtime/kernels"

// tokOp is an elementwise step of the forward pass done token by token between the matrix
// products, when no Activation hook needs the intermediate tensors: each is one pool job over
// the new tokens, fusing what the hooked path does in several passes.
type tokOp uint8

const (
	// opAttnNorm: xn = RMSNorm(x) with layer l's attention norm.
	opAttnNorm tokOp = iota
	// opQKV: q, k, v biases; q and k norms; RoPE; keys and values into layer l's cache.
	opQKV
	// opFFNNorm: x += proj (attention output); xn = RMSNorm(x) with layer l's FFN norm.
	opFFNNorm
	// opSwiGLU: act = silu(gate)·up.
	opSwiGLU
	// opOut: x += proj (FFN output); then, unless l is the last layer, xn = RMSNorm(x) with
	// layer l+1's attention norm.
	opOut
)

// tokJob is the pool job of perToken (in the State, its function value made once).
type tokJob struct {
	st *State
	op tokOp
	l  int
}

// perToken runs op for layer l over the n new tokens, spread over the pool.
func (m *Model) perToken(st *State, op tokOp, l, n int) {
	st.tok = tokJob{st: st, op: op, l: l}
	// Chunks of tokens worth some 16k values of the widest row touched, so that a few tokens
	// stay on one thread.
	grain := max(1, (1<<14)/max(m.spec.Hidden, m.spec.Intermediate/2))
	m.pool.Run(n, grain, st.tokRun)
}

func (j *tokJob) run(_, lo, hi int) {
	st := j.st
	m := st.m
	s := m.spec
	H, I := s.Hidden, s.Intermediate
	for t := lo; t < hi; t++ {
		x, xn := st.x[t*H:(t+1)*H], st.xn[t*H:(t+1)*H]
		switch j.op {
		case opAttnNorm:
			kernels.RMSNorm(xn, x, m.layers[j.l].attnNorm, s.RMSEps)
		case opQKV:
			m.qkvToken(st, j.l, t)
		case opFFNNorm:
			kernels.Add(x, st.proj[t*H:(t+1)*H])
			kernels.RMSNorm(xn, x, m.layers[j.l].ffnNorm, s.RMSEps)
		case opSwiGLU:
			kernels.SiLUMul(st.act[t*I:(t+1)*I], st.gate[t*I:(t+1)*I], st.up[t*I:(t+1)*I])
		case opOut:
			kernels.Add(x, st.proj[t*H:(t+1)*H])
			if j.l+1 < len(m.layers) {
				kernels.RMSNorm(xn, x, m.layers[j.l+1].attnNorm, s.RMSEps)
			}
		}
	}
}

// qkvToken is opQKV for token t: what qkvHooked does, for one token.
func (m *Model) qkvToken(st *State, l, t int) {
	s := m.spec
	L := &m.layers[l]
	hd := s.HeadDim
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	q := st.q[t*qDim : (t+1)*qDim]
	k := st.kk[t*kvDim : (t+1)*kvDim]
	v := st.vv[t*kvDim : (t+1)*kvDim]
	if L.qBias != nil {
		addBias(q, L.qBias, 1)
		addBias(k, L.kBias, 1)
		addBias(v, L.vBias, 1)
	}
	if L.qNorm != nil {
		rmsNorm(q, q, L.qNorm, s.Heads, hd, s.RMSEps)
		rmsNorm(k, k, L.kNorm, s.KVHeads, hd, s.RMSEps)
	}
	m.ropeToken(st, t)
	pos := st.pos + t
	copy(st.k[l][pos*kvDim:(pos+1)*kvDim], k)
	copy(st.v[l][pos*kvDim:(pos+1)*kvDim], v)
}
