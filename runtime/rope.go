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

// newRope computes the pair frequencies as transformers does in float32:
// inv_freq[i] = 1 / theta^(2i/d), divided by the llama3 frequency factor of the pair (when
// factors is not nil) and by the linear scaling factor (positions / factor).
func newRope(s *arch.Spec, layout arch.RopeLayout, factors []float32) *rope {
	r := &rope{layout: layout, half: s.HeadDim / 2, invFreq: make([]float32, s.HeadDim/2)}
	d := float32(s.HeadDim)
	for i := range r.invFreq {
		exp := float32(2*i) / d
		f := float32(1 / math.Pow(s.RopeTheta, float64(exp)))
		if factors != nil {
			f /= factors[i]
		}
		if sc := s.RopeScaling; sc != nil && sc.Type == "linear" && sc.Factor > 0 {
			f = float32(float64(f) / sc.Factor)
		}
		r.invFreq[i] = f
	}
	return r
}

// tables fills cos and sin (n×half each) for positions pos0 … pos0+n−1.
func (r *rope) tables(cos, sin []float32, pos0, n int) {
	for t := 0; t < n; t++ {
		p := float32(pos0 + t)
		c, s := cos[t*r.half:(t+1)*r.half], sin[t*r.half:(t+1)*r.half]
		for i, f := range r.invFreq {
			a := float64(p * f) // the angle rounded to float32, as transformers computes it
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
