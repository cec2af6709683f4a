package runtime

import (
	"math"

	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// Node steps: one node whose points are observed (Hooks.Activation) or quantized (a gqf
// file's encodings). Each point is quantized-dequantized with its encoding, if any, then
// handed to the hook, in the order of Node.Points.
//
// Where a point before the node's value carries an encoding (en.internal), the node runs in
// its primitive form, the arithmetic of the lowered graph (arch.Lower), so that each encoded
// tensor exists and its rounding flows on: rope as x·cos + rotate_half(x)·sin±, attention
// with the scores over every position of the KV cache, the new tokens' later positions
// included under the graph's mask, and swiglu as gate·sigmoid(gate)·up. Otherwise those
// points are computed on the side, for the hook only, and the value as on the fast path:
// observing hooks change no result. A linear's NAME_fc and rope's terms are the exceptions:
// the value is computed from them in any case (the bias added to NAME_fc; rope's primitive
// form gives the fast path's bits), so that a hook's changes to them flow on. rope takes its
// primitive form only when a term is observed or encoded, and runs rope.apply otherwise.
//
// embed, rms_norm, add, rope without its terms and a linear's bias run the node's own row op
// (execNode.self, rowops.go), its value's encoding left to point.

// point quantizes point k of en (x: nTok rows) with its encoding and hands it to the hook.
func (m *Model) point(en *execNode, k int, x []float32, nTok int) {
	if q := en.quant[k]; q != nil {
		q.apply(x)
	}
	if en.observed[k] && nTok > 0 {
		m.hooks.Activation(en.points[k], x, nTok, len(x)/nTok)
	}
}

// uses reports whether point k of en is encoded or observed.
func (en *execNode) uses(k int) bool { return en.quant[k] != nil || en.observed[k] }

// runNode runs one node over tokens [t0, t1).
func (m *Model) runNode(st *State, en *execNode, tokens []int, t0, t1 int) {
	n := en.n
	nt := t1 - t0
	y := st.rows(en.out, t0, t1)
	last := len(en.points) - 1
	switch n.Op {
	case arch.OpEmbed:
		if n.Scale == 0 {
			m.runRows(st, &en.self, tokens, t0, t1)
			break
		}
		for t := t0; t < t1; t++ {
			m.embd.row(st.row(en.out, t), tokens[t])
		}
		m.point(en, 0, y, nt)
		for i := range y {
			y[i] *= n.Scale
		}
	case arch.OpRMSNorm, arch.OpAdd:
		m.runRows(st, &en.self, tokens, t0, t1)
	case arch.OpLinear:
		m.linear(st, st.rows(en.in[0], t0, t1), nt, out{y, en.w, en.inputName(), en.dynX})
		if en.bias != nil {
			m.point(en, 0, y, nt)
			m.runRows(st, &en.self, tokens, t0, t1)
		}
	case arch.OpRope:
		if en.uses(0) || en.uses(1) {
			m.ropeNode(st, en, y, t0, t1)
		} else {
			m.runRows(st, &en.self, tokens, t0, t1)
		}
	case arch.OpAttention:
		m.attentionNode(st, en, t1)
	case arch.OpSwiGLU:
		m.swigluNode(st, en, y, t0, t1)
	case arch.OpGeGLU:
		m.gegluNode(st, en, y, t0, t1)
	case arch.OpSoftcap:
		m.softcapNode(st, en, y, t0, t1)
	case arch.OpMoE:
		m.moe(st, en, y, t0, t1)
	}
	m.point(en, last, y, nt)
}

// ropeNode is rope in its primitive form: c = x·cos and s = rotate_half(x)·sin± (points 0
// and 1, rope.terms), then x = c + s (rope.apply's bits).
func (m *Model) ropeNode(st *State, en *execNode, y []float32, t0, t1 int) {
	x := st.rows(en.in[0], t0, t1)
	dim, heads := en.n.Dim, en.n.Heads
	nt := t1 - t0
	st.side = grow(st.side, nt*dim)
	st.side2 = grow(st.side2, nt*dim)
	c, s := st.side, st.side2
	for t := 0; t < nt; t++ {
		o := t * dim
		k := en.n.Rope
		st.ropes[k].terms(c[o:o+dim], s[o:o+dim], x[o:o+dim], heads, st.ropeCos(k, t0+t), st.ropeSin(k, t0+t))
	}
	m.point(en, 0, c, nt)
	m.point(en, 1, s, nt)
	for i := range y {
		y[i] = c[i] + s[i]
	}
}

// swigluNode computes sigmoid(gate) and gate·sigmoid(gate) (points 0 and 1) and the value:
// from them in the primitive form, with kernels.SiLUMul otherwise.
func (m *Model) swigluNode(st *State, en *execNode, y []float32, t0, t1 int) {
	g, u := m.gateUp(st, en, t0, t1)
	nt := t1 - t0
	if !en.internal && !en.observed[0] && !en.observed[1] {
		kernels.SiLUMul(y, g, u)
		return
	}
	st.side = grow(st.side, len(g))
	sig := st.side
	for i, v := range g {
		sig[i] = float32(1 / (1 + math.Exp(-float64(v))))
	}
	m.point(en, 0, sig, nt)
	for i, v := range g {
		sig[i] = float32(v * sig[i]) // silu, in place
	}
	m.point(en, 1, sig, nt)
	if en.internal {
		for i := range y {
			y[i] = float32(sig[i] * u[i])
		}
		return
	}
	kernels.SiLUMul(y, g, u)
}

// gateUp returns the gate and up rows of a gated node: its two inputs, or the two halves of
// each row of its one input (a fused gate_up), copied apart.
func (m *Model) gateUp(st *State, en *execNode, t0, t1 int) (g, u []float32) {
	if len(en.in) == 2 {
		return st.rows(en.in[0], t0, t1), st.rows(en.in[1], t0, t1)
	}
	d := en.n.Dim
	st.gate = grow(st.gate, (t1-t0)*d)
	st.up = grow(st.up, (t1-t0)*d)
	for t := t0; t < t1; t++ {
		in := st.row(en.in[0], t)
		copy(st.gate[(t-t0)*d:], in[:d])
		copy(st.up[(t-t0)*d:], in[d:])
	}
	return st.gate, st.up
}

// gegluNode computes GeGLU's points in the primitive graph's order (g², ·k1, +k0, g·, sigmoid,
// g·: arch.GELUK0, GELUK1) and the value: from them in the primitive form, with the tanh
// form of gelu_tanh otherwise.
func (m *Model) gegluNode(st *State, en *execNode, y []float32, t0, t1 int) {
	g, u := m.gateUp(st, en, t0, t1)
	nt := t1 - t0
	observed := false
	for _, o := range en.observed[:len(en.observed)-1] {
		observed = observed || o
	}
	if !en.internal && !observed {
		gegluRow(y, g, u)
		return
	}
	st.side = grow(st.side, len(g))
	a := st.side
	for i, v := range g {
		a[i] = v * v
	}
	m.point(en, 0, a, nt)
	for i := range a {
		a[i] *= arch.GELUK1
	}
	m.point(en, 1, a, nt)
	for i := range a {
		a[i] += arch.GELUK0
	}
	m.point(en, 2, a, nt)
	for i, v := range g {
		a[i] *= v
	}
	m.point(en, 3, a, nt)
	for i, v := range a {
		a[i] = float32(1 / (1 + math.Exp(-float64(v))))
	}
	m.point(en, 4, a, nt)
	for i, v := range g {
		a[i] *= v
	}
	m.point(en, 5, a, nt)
	if en.internal {
		for i := range y {
			y[i] = a[i] * u[i]
		}
		return
	}
	gegluRow(y, g, u)
}

// softcapNode computes x/cap and its tanh (points 0 and 1) and the value: cap·tanh from them
// in the primitive form, softcap otherwise.
func (m *Model) softcapNode(st *State, en *execNode, y []float32, t0, t1 int) {
	x := st.rows(en.in[0], t0, t1)
	nt := t1 - t0
	c := en.n.Cap
	if !en.internal && !en.observed[0] && !en.observed[1] {
		softcap(y, x, c)
		return
	}
	st.side = grow(st.side, len(x))
	a := st.side
	inv := 1 / c
	for i, v := range x {
		a[i] = v * inv
	}
	m.point(en, 0, a, nt)
	for i, v := range a {
		a[i] = float32(math.Tanh(float64(v)))
	}
	m.point(en, 1, a, nt)
	if en.internal {
		for i := range y {
			y[i] = a[i] * c
		}
		return
	}
	softcap(y, x, c)
}

// maxScoreValues bounds the attention scores materialised at once for the points (the new
// tokens are taken in chunks).
const maxScoreValues = 1 << 22

// attentionNode stores the keys and values, computes the scores' points over every position of
// the cache (chunks of new tokens: each point may reach the hook in several calls of
// consecutive tokens, one row per token holding every query head's scores) and the value:
// from the scores in the primitive form, by the fast attention otherwise.
func (m *Model) attentionNode(st *State, en *execNode, n int) {
	s := m.spec
	hd, H, kvh := s.HeadDim, s.Heads, s.KVHeads
	qDim, kvDim := H*hd, kvh*hd
	group := H / kvh
	st.storeKV(en, n)
	P := st.pos + n
	l := en.n.Layer
	K, V := st.k[l], st.v[l]
	q := st.rows(en.in[0], 0, n)
	y := st.rows(en.out, 0, n)
	scale := en.n.Scale
	chunk := max(1, min(n, maxScoreValues/(H*P)))
	scores := en.internal
	for _, o := range en.observed[:len(en.observed)-1] {
		scores = scores || o
	}
	c := en.n.Cap
	const kb = kernels.KeyBlock
	nb := (P + kb - 1) / kb
	for c0 := 0; c0 < n && scores; c0 += chunk {
		c1 := min(n, c0+chunk)
		nt := c1 - c0
		st.side = grow(st.side, nt*H*P)
		sc := st.side
		// items runs f for each new token t of the chunk and KV head g, on worker w.
		items := func(f func(w, t, g int)) {
			m.pool.Run(nt*kvh, 1, func(w, lo, hi int) {
				for it := lo; it < hi; it++ {
					f(w, it/kvh, it%kvh)
				}
			})
		}
		// The scores of a KV head's query heads against every position (a row of P each,
		// consecutive), through a worker's scratch of whole key blocks.
		items(func(w, t, g int) {
			a := &st.attw[w]
			a.s = growCap(a.s, group*nb*kb)
			qg := q[(c0+t)*qDim+g*group*hd : (c0+t)*qDim+(g+1)*group*hd]
			kernels.AttnScores(a.s, nb*kb, qg, group, hd, K[g*hd*kb:], kvDim*kb, nb, 1)
			for i := 0; i < group; i++ {
				copy(sc[(t*H+g*group+i)*P:(t*H+g*group+i+1)*P], a.s[i*nb*kb:])
			}
		})
		m.point(en, 0, sc, nt)
		for i, v := range sc {
			sc[i] = float32(v * scale)
		}
		m.point(en, 1, sc, nt)
		k := 2
		if c != 0 { // soft-cap: /cap, tanh, ·cap (points kq_div, kq_tanh, kq_capped)
			inv := 1 / c
			for i, v := range sc {
				sc[i] = v * inv
			}
			m.point(en, 2, sc, nt)
			for i, v := range sc {
				sc[i] = float32(math.Tanh(float64(v)))
			}
			m.point(en, 3, sc, nt)
			for i := range sc {
				sc[i] *= c
			}
			m.point(en, 4, sc, nt)
			k = 5
		}
		for t := 0; t < nt; t++ {
			own := st.pos + c0 + t
			first := visibleFrom(en.n, own)
			for h := 0; h < H; h++ {
				r := sc[(t*H+h)*P : (t*H+h+1)*P]
				for j := range r {
					if j < first || j > own {
						r[j] += m.graph.Mask
					}
				}
			}
		}
		m.point(en, k, sc, nt)
		m.pool.Run(nt*H, 1, func(_, lo, hi int) {
			for it := lo; it < hi; it++ {
				kernels.Softmax(sc[it*P : (it+1)*P])
			}
		})
		m.point(en, k+1, sc, nt)
		if en.internal { // every position, the masked ones with their tiny weights
			items(func(w, t, g int) {
				a := &st.attw[w]
				if cap(a.lo) < group {
					a.lo, a.hi = make([]int, group), make([]int, group)
				}
				lo, hi := a.lo[:group], a.hi[:group]
				for i := range lo {
					lo[i], hi[i] = 0, P
				}
				kernels.AttnValues(y[(c0+t)*qDim+g*group*hd:], hd, sc[(t*H+g*group)*P:], P, V[g*hd:], kvDim, hd, lo, hi)
			})
		}
	}
	if !en.internal {
		m.attend(st, en, n)
	}
}
