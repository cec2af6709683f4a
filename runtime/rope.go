package runtime

import "github.com/gquant/gquant/runtime/arch"

// rope applies rotary position embeddings to heads of hd values: the first 2·half of each
// head rotated, the rest (partial rotary) passed through.
type rope struct {
	layout  arch.RopeLayout
	half    int       // the number of rotated pairs: the table's Dims / 2
	hd      int       // the head dimension
	invFreq []float32 // per pair, frequency factors and linear scaling folded in
	attn    float32   // the factor of cos and sin (longrope's attention factor; 1 for none)
}

// newRope takes the pair frequencies of table t from arch.RopeInvFreq (transformers' float32
// inv_freq with llama3 factors and linear scaling folded in).
func newRope(s *arch.Spec, t arch.RopeTable, layout arch.RopeLayout, factors []float32) *rope {
	return &rope{layout: layout, half: t.Dims / 2, hd: s.HeadDim, invFreq: arch.RopeInvFreq(t, factors)}
}

// apply rotates the heads of one token's vector x (nHeads·headDim values) by the angles of
// its position (cos, sin: half values each, arch.RopeTables).
func (r *rope) apply(x []float32, nHeads int, cos, sin []float32) {
	h2, hd := r.half, r.hd
	for h := 0; h < nHeads; h++ {
		v := x[h*hd : (h+1)*hd]
		if r.layout == arch.RopeInterleaved {
			for i := 0; i < h2; i++ {
				a, b := v[2*i], v[2*i+1]
				v[2*i] = float32(a*cos[i]) - float32(b*sin[i])
				v[2*i+1] = float32(a*sin[i]) + float32(b*cos[i])
			}
			continue
		}
		for i := 0; i < h2; i++ {
			a, b := v[i], v[i+h2]
			v[i] = float32(a*cos[i]) - float32(b*sin[i])
			v[i+h2] = float32(b*cos[i]) + float32(a*sin[i])
		}
	}
}

// terms computes apply's rotation term by term, as the primitive graph does, for one token's
// vector x: c = x·cos and s = rotate_half(x)·sin± (the first half of sin negated). c + s is
// apply's result bit for bit: a·cos − b·sin is a·cos + b·(−sin), the product rounding
// symmetrically.
func (r *rope) terms(c, s, x []float32, nHeads int, cos, sin []float32) {
	h2, hd := r.half, r.hd
	for h := 0; h < nHeads; h++ {
		o := h * hd
		v, cv, sv := x[o:o+hd], c[o:o+hd], s[o:o+hd]
		// Partial rotary: the passed-through dimensions are x·1 and x_rot·0 in the primitive
		// graph (cos 1, sin 0 there), exactly x and 0.
		copy(cv[2*h2:], v[2*h2:])
		clear(sv[2*h2:])
		if r.layout == arch.RopeInterleaved {
			for i := 0; i < h2; i++ {
				a, b := v[2*i], v[2*i+1]
				cv[2*i], cv[2*i+1] = float32(a*cos[i]), float32(b*cos[i])
				sv[2*i], sv[2*i+1] = float32(b*-sin[i]), float32(a*sin[i])
			}
			continue
		}
		for i := 0; i < h2; i++ {
			a, b := v[i], v[i+h2]
			cv[i], cv[i+h2] = float32(a*cos[i]), float32(b*cos[i])
			sv[i], sv[i+h2] = float32(b*-sin[i]), float32(a*sin[i])
		}
	}
}
