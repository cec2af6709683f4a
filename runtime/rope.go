package runtime

import (
	"math"

	"github.com/gquant/gquant/runtime/arch"
)

// rope applies rotary position embeddings to heads of headDim values.
type rope struct {
	layout  arch.RopeLayout
	half    int       // headDim / 2: the number of rotated pairs
	invFreq []float32 // per pair, frequency factors and linear scaling folded in
}

// newRope takes the pair frequencies from arch.RopeInvFreq (transformers' float32 inv_freq
// with llama3 factors and linear scaling folded in).
func newRope(s *arch.Spec, layout arch.RopeLayout, factors []float32) *rope {
	return &rope{layout: layout, half: s.HeadDim / 2, invFreq: arch.RopeInvFreq(s, factors)}
}

// tables fills cos and sin (n×half each) for positions pos0 … pos0+n−1.
func (r *rope) tables(cos, sin []float32, pos0, n int) {
	for t := 0; t < n; t++ {
		c, s := cos[t*r.half:(t+1)*r.half], sin[t*r.half:(t+1)*r.half]
		for i, f := range r.invFreq {
			a := arch.RopeAngle(pos0+t, f)
			c[i] = float32(math.Cos(a))
			s[i] = float32(math.Sin(a))
		}
	}
}

// apply rotates the heads of one token's vector x (nHeads·headDim values) by the angles of
// its position (cos, sin: half values each).
func (r *rope) apply(x []float32, nHeads int, cos, sin []float32) {
	h2 := r.half
	hd := 2 * h2
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
