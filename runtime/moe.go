package runtime

import (
	"math"

	"github.com/gquant/gquant/runtime/kernels"
)

// The moe node (arch/graph.go): each token's experts are chosen from the router's logits, then
// every expert that some token was routed to runs on the rows of those tokens only, gathered
// into a batch of their own: gate and up in one job (their products share the converted
// activations), SwiGLU, down, and each output row is added, times its token's weight for the
// expert, into the token's value. A token thus reads the matrices of its experts and no
// other's: at decode, Used of the Experts experts of every layer.

// moeScratch holds a moe node's routing and per-expert batches (in the State).
type moeScratch struct {
	// sel and w are each token's experts and their weights, Used per token.
	sel []int32
	w   []float32
	// probs is one token's softmax over the experts, exps its exponentials.
	probs []float32
	exps  []float64
	// start and order list the routed slots (t·Used + k) of each expert: expert e's are
	// order[start[e]:start[e+1]], by token.
	start, order, fill []int32
	x, g, u, o         []float32
}

// moe runs a moe node over tokens [t0, t1) into y.
func (m *Model) moe(st *State, en *execNode, y []float32, t0, t1 int) {
	n := en.n
	nt := t1 - t0
	K, E, H, F := n.Used, n.Experts, en.in[0].dim, n.Inner
	x := st.rows(en.in[0], t0, t1)
	r := st.rows(en.in[1], t0, t1)
	s := &st.moe
	s.route(r, nt, E, K, n.Norm)
	clear(y)
	for e := 0; e < E; e++ {
		slots := s.order[s.start[e]:s.start[e+1]]
		ne := len(slots)
		if ne == 0 {
			continue
		}
		s.x = grow(s.x, ne*H)
		for i, sl := range slots {
			t := int(sl) / K
			copy(s.x[i*H:(i+1)*H], x[t*H:(t+1)*H])
		}
		s.g, s.u = grow(s.g, ne*F), grow(s.u, ne*F)
		gate, up, down := en.exps[0][e], en.exps[1][e], en.exps[2][e]
		m.linear(st, s.x, ne, out{s.g, gate, en.expNames[0][e], false}, out{s.u, up, en.expNames[1][e], false})
		kernels.SiLUMul(s.g, s.g, s.u)
		s.o = grow(s.o, ne*n.Dim)
		m.linear(st, s.g, ne, out{s.o, down, en.expNames[2][e], false})
		for i, sl := range slots {
			t, w := int(sl)/K, s.w[sl]
			yt, ot := y[t*n.Dim:(t+1)*n.Dim], s.o[i*n.Dim:(i+1)*n.Dim]
			for j, v := range ot {
				yt[j] += w * v
			}
		}
		st.read += int64(len(gate.Data) + len(up.Data) + len(down.Data))
	}
}

// route chooses the experts of nt tokens from their router logits r (nt × E): the K largest
// softmax probabilities (computed in float64, rounded to float32), the lower index first
// among equal ones, their weights renormalized to sum to 1 when norm is set (the sum clamped
// below at 2⁻¹⁴, as llama.cpp's build_moe_ffn does); then each expert's slots, by token.
func (s *moeScratch) route(r []float32, nt, E, K int, norm bool) {
	s.sel = growInt32(s.sel, nt*K)
	s.w = grow(s.w, nt*K)
	s.probs = grow(s.probs, E)
	if cap(s.exps) < E {
		s.exps = make([]float64, E)
	}
	ex := s.exps[:E]
	for t := 0; t < nt; t++ {
		row, p := r[t*E:(t+1)*E], s.probs
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var sum float64
		for i, v := range row {
			ex[i] = math.Exp(float64(v) - mx)
			sum += ex[i]
		}
		for i := range p {
			p[i] = float32(ex[i] / sum)
		}
		sel, w := s.sel[t*K:(t+1)*K], s.w[t*K:(t+1)*K]
		for k := range sel {
			best := -1
			for i, v := range p {
				if (best < 0 || v > p[best]) && !chosen(sel[:k], i) {
					best = i
				}
			}
			sel[k], w[k] = int32(best), p[best]
		}
		if norm {
			var ws float32
			for _, v := range w {
				ws += v
			}
			ws = max(ws, 6.103515625e-5)
			for k := range w {
				w[k] /= ws
			}
		}
	}
	s.start = growInt32(s.start, E+1)
	clear(s.start)
	for _, e := range s.sel {
		s.start[e+1]++
	}
	for e := 0; e < E; e++ {
		s.start[e+1] += s.start[e]
	}
	s.order = growInt32(s.order, nt*K)
	s.fill = growInt32(s.fill, E)
	copy(s.fill, s.start[:E])
	for sl, e := range s.sel {
		s.order[s.fill[e]] = int32(sl)
		s.fill[e]++
	}
}

// chosen reports whether expert i is in sel.
func chosen(sel []int32, i int) bool {
	for _, e := range sel {
		if int(e) == i {
			return true
		}
	}
	return false
}

// growInt32 returns s with length n, reusing its memory when it is large enough.
func growInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
