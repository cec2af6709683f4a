package arch

import (
	"fmt"
	"math"
)

// The model graph, defined once per family. A Graph is the decoder as a list of nodes over
// named values, each value being one row per token (the new tokens of an evaluation):
//
//   - the runtime executes it on its kernels, with a KV cache, fusing the row-wise nodes;
//   - Lower turns it into the primitive graph a gqf file records (QNN's op vocabulary), which
//     the ONNX export translates;
//   - calibration observes, and verify's simulation of a gqf file's encodings quantizes, every
//     Point of every node: the tensors the primitive graph computes, named as it names them.
//
// Semantics per node (x: the first input, rows of the input's width):
//
//	embed      rows of Weight for the token ids
//	rms_norm   x / sqrt(mean(x²) + eps) · Weight over rows of Dim, or over each of Heads heads
//	linear     x·Weightᵀ (+ Bias)
//	rope       rotary embedding of each of Heads heads, at the token's position
//	attention  per query head h: softmax(q_h·Kᵀ·scale + mask)·V over the positions of the KV
//	           cache (past positions, then the new ones), K and V of KV head h/(Heads/KVHeads);
//	           In = q (after RoPE), k (after RoPE: what the cache stores), v
//	add        x + y
//	swiglu     silu(gate)·up = gate·sigmoid(gate)·up
//
// mask is 0 for a position at or before the token's own and Graph.Mask after it. The masked
// positions contribute about e^Mask of a visible one to the softmax: the runtime's fast path
// leaves them out (exactly 0); when the points of an attention node are observed or quantized
// it computes them, over the new tokens of the evaluation, as the primitive graph does. A
// finite mask masks only when it is far below the spread of the scores: MaskFor chooses one
// from their calibrated range.

// Op is the operation of a node.
type Op string

// Node operations.
const (
	OpEmbed     Op = "embed"
	OpRMSNorm   Op = "rms_norm"
	OpLinear    Op = "linear"
	OpRope      Op = "rope"
	OpAttention Op = "attention"
	OpAdd       Op = "add"
	OpSwiGLU    Op = "swiglu"
)

// MaskValue is the default mask, added to the attention scores of positions after a token's
// own. A finite value keeps the masked scores inside a 16-bit activation range (Qualcomm's
// LLM exports use −50 too).
const MaskValue = -50

// maskMargin is how far below every visible score a masked one must fall: e^−20 ≈ 2·10⁻⁹ of
// the largest visible term.
const maskMargin = 20

// MaskFor returns the mask that keeps a masked score maskMargin below every visible one when
// the scaled scores range over [lo, hi]: MaskValue when that suffices, else −(hi − lo) −
// maskMargin, rounded down to a whole number. Scores spread over more than 30 (stories260k's
// span 450) leak through −50: a masked position would take a visible share of the softmax.
func MaskFor(lo, hi float64) float32 {
	m := -(hi - lo) - maskMargin
	if !(m < MaskValue) {
		return MaskValue
	}
	return float32(math.Floor(m))
}

// TokensValue names the graph input: the token ids.
const TokensValue = "tokens"

// Node is one operation of the graph.
type Node struct {
	Op Op
	// Name is the value the node produces (a GGUF-style name: "blk.0.q", "logits").
	Name string
	// Inputs are the values it reads (TokensValue for the embedding).
	Inputs []string
	// Weight and Bias name the tensors it reads (GGUF names; Bias is optional).
	Weight, Bias string
	// Layer is the block (-1 outside the blocks).
	Layer int
	// Dim is the output's width per token.
	Dim int
	// Heads splits rms_norm and rope rows into heads (0: the whole row); attention's query
	// heads, with KVHeads key and value heads.
	Heads, KVHeads int
	// Tail marks the nodes computed only for the positions whose logits are wanted (the final
	// norm and the output layer).
	Tail bool
}

// Graph is a model's decoder.
type Graph struct {
	Spec  *Spec
	Nodes []Node
	// Output is the value holding the logits.
	Output string
	// Mask is added to the attention scores of the positions after a token's own (see the
	// semantics above); ModelGraph sets MaskValue.
	Mask float32
}

// prefix is the naming stem of a node's internal points: "blk.0.q" for the rope
// "blk.0.q_rope" (whatever its input, q or q_norm), the layer prefix for attention and swiglu.
func (n *Node) prefix() string {
	switch n.Op {
	case OpRope:
		return trimSuffix(n.Name, "_rope")
	case OpAttention, OpSwiGLU:
		return fmt.Sprintf("blk.%d.", n.Layer)
	}
	return n.Name
}

// Point names of the nodes' internal tensors.
const (
	suffixFC      = "_fc"  // linear: the product before the bias
	suffixCos     = "_cos" // rope: x·cos
	suffixSin     = "_sin" // rope: rotate_half(x)·sin (first half of sin negated)
	pointKQ       = "kq"
	pointKQScaled = "kq_scaled"
	pointKQMasked = "kq_masked"
	pointSoftmax  = "kq_softmax"
	pointGateSig  = "ffn_gate_sig"
	pointSiLU     = "ffn_silu"
)

// Points lists, in the order they are computed, the tensors of the node that the primitive
// graph computes (its data-movement tensors aside, see Lower): the node's value last. These
// are what calibration observes and what a gqf file's activation encodings quantize.
//
//	linear with a bias   NAME_fc, NAME
//	rope                 X_cos, X_sin, NAME          (X: NAME without _rope)
//	attention            blk.L.kq, blk.L.kq_scaled, blk.L.kq_masked, blk.L.kq_softmax, NAME
//	swiglu               blk.L.ffn_gate_sig, blk.L.ffn_silu, NAME
//	anything else        NAME
//
// The attention scores kq have, per token, one row per query head over the KV positions.
func (n *Node) Points() []string {
	p := n.prefix()
	switch n.Op {
	case OpLinear:
		if n.Bias != "" {
			return []string{n.Name + suffixFC, n.Name}
		}
	case OpRope:
		return []string{p + suffixCos, p + suffixSin, n.Name}
	case OpAttention:
		return []string{p + pointKQ, p + pointKQScaled, p + pointKQMasked, p + pointSoftmax, n.Name}
	case OpSwiGLU:
		return []string{p + pointGateSig, p + pointSiLU, n.Name}
	}
	return []string{n.Name}
}

// Points lists every point of the graph, in graph order.
func (g *Graph) Points() []string {
	var out []string
	for i := range g.Nodes {
		out = append(out, g.Nodes[i].Points()...)
	}
	return out
}

// SharedInputs maps the weight of each linear node that reads the input of an earlier linear
// node to the first such node's weight (k and v to q, up to gate); weights whose node is the
// first to read its input are not in the map.
func (g *Graph) SharedInputs() map[string]string {
	out := map[string]string{}
	first := map[string]string{} // input value -> weight of its first linear node
	for _, n := range g.Nodes {
		if n.Op != OpLinear {
			continue
		}
		if w, ok := first[n.Inputs[0]]; ok {
			out[n.Weight] = w
			continue
		}
		first[n.Inputs[0]] = n.Weight
	}
	return out
}

// ModelGraph returns the graph of a model of this spec: the Llama layout, with Qwen2's q, k
// and v biases and Qwen3's per-head q and k norms where the spec has them.
func ModelGraph(s *Spec) *Graph {
	g := &Graph{Spec: s, Output: "logits", Mask: MaskValue}
	add := func(n Node) string {
		g.Nodes = append(g.Nodes, n)
		return n.Name
	}
	x := add(Node{Op: OpEmbed, Name: "token_embd", Inputs: []string{TokensValue}, Weight: string(TokenEmbd), Layer: -1, Dim: s.Hidden})
	qDim, kvDim := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		w := func(r Role) string { return TensorRef{Role: r, Layer: l}.GGUFName() }
		xn := add(Node{Op: OpRMSNorm, Name: p + "attn_norm", Inputs: []string{x}, Weight: w(AttnNorm), Layer: l, Dim: s.Hidden})
		lin := func(name string, weight, bias Role, dim int) string {
			n := Node{Op: OpLinear, Name: p + name, Inputs: []string{xn}, Weight: w(weight), Layer: l, Dim: dim}
			if s.QKVBias {
				n.Bias = w(bias)
			}
			return add(n)
		}
		q := lin("q", AttnQ, AttnQBias, qDim)
		k := lin("k", AttnK, AttnKBias, kvDim)
		v := lin("v", AttnV, AttnVBias, kvDim)
		if s.QKNorm {
			q = add(Node{Op: OpRMSNorm, Name: p + "q_norm", Inputs: []string{q}, Weight: w(AttnQNorm), Layer: l, Dim: qDim, Heads: s.Heads})
			k = add(Node{Op: OpRMSNorm, Name: p + "k_norm", Inputs: []string{k}, Weight: w(AttnKNorm), Layer: l, Dim: kvDim, Heads: s.KVHeads})
		}
		q = add(Node{Op: OpRope, Name: p + "q_rope", Inputs: []string{q}, Layer: l, Dim: qDim, Heads: s.Heads})
		k = add(Node{Op: OpRope, Name: p + "k_rope", Inputs: []string{k}, Layer: l, Dim: kvDim, Heads: s.KVHeads})
		att := add(Node{Op: OpAttention, Name: p + "kqv_out", Inputs: []string{q, k, v}, Layer: l, Dim: qDim, Heads: s.Heads, KVHeads: s.KVHeads})
		o := add(Node{Op: OpLinear, Name: p + "attn_out", Inputs: []string{att}, Weight: w(AttnOut), Layer: l, Dim: s.Hidden})
		x = add(Node{Op: OpAdd, Name: p + "ffn_inp", Inputs: []string{x, o}, Layer: l, Dim: s.Hidden})
		fn := add(Node{Op: OpRMSNorm, Name: p + "ffn_norm", Inputs: []string{x}, Weight: w(FFNNorm), Layer: l, Dim: s.Hidden})
		gate := add(Node{Op: OpLinear, Name: p + "ffn_gate", Inputs: []string{fn}, Weight: w(FFNGate), Layer: l, Dim: s.Intermediate})
		up := add(Node{Op: OpLinear, Name: p + "ffn_up", Inputs: []string{fn}, Weight: w(FFNUp), Layer: l, Dim: s.Intermediate})
		act := add(Node{Op: OpSwiGLU, Name: p + "ffn_act", Inputs: []string{gate, up}, Layer: l, Dim: s.Intermediate})
		fo := add(Node{Op: OpLinear, Name: p + "ffn_out", Inputs: []string{act}, Weight: w(FFNDown), Layer: l, Dim: s.Hidden})
		x = add(Node{Op: OpAdd, Name: p + "out", Inputs: []string{x, fo}, Layer: l, Dim: s.Hidden})
	}
	xn := add(Node{Op: OpRMSNorm, Name: "output_norm", Inputs: []string{x}, Weight: string(OutputNorm), Layer: -1, Dim: s.Hidden, Tail: true})
	out := string(Output)
	if s.Tied {
		out = string(TokenEmbd)
	}
	add(Node{Op: OpLinear, Name: g.Output, Inputs: []string{xn}, Weight: out, Layer: -1, Dim: s.Vocab, Tail: true})
	return g
}

// RopeInvFreq computes the rotary frequencies of each pair as transformers does, in float32:
// inv_freq[i] = 1 / theta^(2i/head_dim), divided by the pair's llama3 frequency factor
// (factors, nil for none) and by a linear scaling factor. It is the one definition the
// runtime and the primitive graph's tables share.
func RopeInvFreq(s *Spec, factors []float32) []float32 {
	inv := make([]float32, s.HeadDim/2)
	d := float32(s.HeadDim)
	for i := range inv {
		exp := float32(2*i) / d
		f := float32(1 / math.Pow(s.RopeTheta, float64(exp)))
		if factors != nil {
			f /= factors[i]
		}
		if sc := s.RopeScaling; sc != nil && sc.Type == "linear" && sc.Factor > 0 {
			f = float32(float64(f) / sc.Factor)
		}
		inv[i] = f
	}
	return inv
}

// RopeAngle is the angle of pair i at position pos, rounded to float32 as transformers
// computes it (position·inv_freq in float32).
func RopeAngle(pos int, invFreq float32) float64 { return float64(float32(pos) * invFreq) }

// RopeTables fills cos and sin, n rows of len(inv) values each, with the float32 cosine and
// sine of every pair's angle (RopeAngle, inv from RopeInvFreq) at positions pos0 … pos0+n−1:
// the one computation of the runtime's rotation tables and the primitive graph's.
func RopeTables(inv []float32, pos0, n int, cos, sin []float32) {
	h := len(inv)
	for t := 0; t < n; t++ {
		c, s := cos[t*h:(t+1)*h], sin[t*h:(t+1)*h]
		for i, f := range inv {
			a := RopeAngle(pos0+t, f)
			c[i] = float32(math.Cos(a))
			s[i] = float32(math.Sin(a))
		}
	}
}

// AttentionScale is the factor of the attention scores, 1/√head_dim, in float32.
func AttentionScale(s *Spec) float32 { return float32(1 / math.Sqrt(float64(s.HeadDim))) }
