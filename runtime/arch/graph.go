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
//	embed      rows of Weight for the token ids, times Scale when set (Gemma: √hidden)
//	rms_norm   x / sqrt(mean(x²) + eps) · Weight over rows of Dim, or over each of Heads heads
//	linear     x·Weightᵀ (+ Bias)
//	rope       rotary embedding of each of Heads heads, at the token's position, with the
//	           frequencies of table Graph.Ropes[Rope]: the first Dims of each head rotated
//	           (rotate-half pairs j, j+Dims/2), the rest passed through
//	attention  per query head h: softmax(cap(q_h·Kᵀ·Scale) + mask)·V over the positions of the
//	           KV cache (past positions, then the new ones), K and V of KV head h/(Heads/KVHeads);
//	           cap(s) = Cap·tanh(s/Cap) when Cap is set (Gemma 2), s otherwise;
//	           In = q (after RoPE), k (after RoPE: what the cache stores), v
//	add        x + y
//	swiglu     silu(gate)·up = gate·sigmoid(gate)·up; with one input, gate and up are its two
//	           halves (Phi-3's fused gate_up: gate first)
//	geglu      gelu_tanh(gate)·up, gelu_tanh(g) = g·sigmoid(2·√(2/π)·(g + 0.044715·g³)) (the
//	           tanh approximation written with a sigmoid: 0.5·(1 + tanh(z)) = sigmoid(2z))
//	softcap    Cap·tanh(x/Cap) (Gemma 2's final logits)
//	moe        a routed mixture of SwiGLU experts (Mixtral, Qwen3-MoE). In = x, r: r is the
//	           router's logits over the Experts experts (a linear node over x, ffn_gate_inp).
//	           p = softmax(r) (to float32 precision); the Used experts of the highest p (the
//	           lower index first among equal ones) are the token's; w_k = p of the k-th,
//	           divided by their sum (clamped below at 2⁻¹⁴, as llama.cpp does) when Norm is
//	           set; the value is Σ_k w_k·down_k(silu(gate_k·x)·up_k·x), summed over the
//	           experts in index order, where gate_k, up_k and down_k are the k-th expert's
//	           matrices of the stacks GateExps, UpExps and DownExps (Inner rows for gate and
//	           up). Each expert reads the rows of the tokens routed to it only (ExpertWeight
//	           names their inputs to the hooks), so a token reads the weights of its Used
//	           experts, not all Experts
//
// mask is 0 for a visible position and Graph.Mask for the others: a position is visible when
// it is at or before the token's own and, for an attention node with a Window, less than
// Window before it (sliding-window attention). The masked positions contribute about e^Mask
// of a visible one to the softmax: the runtime's fast path leaves them out (exactly 0); when
// the points of an attention node are observed or quantized it computes them, over the new
// tokens of the evaluation, as the primitive graph does. A finite mask masks only when it is
// far below the spread of the scores: MaskFor chooses one from their calibrated range.

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
	OpGeGLU     Op = "geglu"
	OpSoftcap   Op = "softcap"
	OpMoE       Op = "moe"
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
	// Scale multiplies an embed node's rows (0: none) and an attention node's scores.
	Scale float32
	// Cap is the soft-cap of an attention node's scores (0: none) and of a softcap node.
	Cap float32
	// Window is an attention node's sliding window (0: none).
	Window int
	// Rope is a rope node's table in Graph.Ropes.
	Rope int
	// A moe node's expert stacks (GGUF names), its count of experts, the experts each token
	// uses, their width and whether their weights are renormalized (see the semantics).
	GateExps, UpExps, DownExps string
	Experts, Used, Inner       int
	Norm                       bool
}

// RopeTable is one set of rotary frequencies: the base, the rope scaling folded into the
// frequencies (linear, llama3's rope_freqs, longrope's factors) and the rotated dimensions
// of each head.
type RopeTable struct {
	Theta   float64
	Scaling *RopeScaling // nil: none
	Dims    int
}

// Graph is a model's decoder.
type Graph struct {
	Spec  *Spec
	Nodes []Node
	// Output is the value holding the logits.
	Output string
	// Mask is added to the attention scores of the positions a token does not see (see the
	// semantics above); ModelGraph sets MaskValue.
	Mask float32
	// Ropes are the rotary tables of the rope nodes: the global one, then (Gemma 3) the
	// sliding layers' own.
	Ropes []RopeTable
}

// prefix is the naming stem of a node's internal points: "blk.0.q" for the rope
// "blk.0.q_rope" (whatever its input, q or q_norm), the layer prefix for attention and swiglu.
func (n *Node) prefix() string {
	switch n.Op {
	case OpRope:
		return trimSuffix(n.Name, "_rope")
	case OpAttention, OpSwiGLU, OpGeGLU:
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
	pointKQDiv    = "kq_div"    // attention soft-cap: scores / cap
	pointKQTanh   = "kq_tanh"   // tanh of that
	pointKQCapped = "kq_capped" // times cap
	pointGateSq   = "ffn_gate_sq"
	pointGateSqK  = "ffn_gate_sqk"
	pointGatePoly = "ffn_gate_poly"
	pointGateZ    = "ffn_gate_z"
	pointGELU     = "ffn_gelu"
	suffixRows    = "_rows" // scaled embed: the rows before the scale
	suffixDiv     = "_div"  // softcap: x / cap
	suffixTanh    = "_tanh" // softcap: tanh of that
)

// GeGLU's constants: gelu_tanh(g) = g·sigmoid(g·(GELUK0 + GELUK1·g²)).
var (
	GELUK0 = float32(2 * math.Sqrt(2/math.Pi))
	GELUK1 = float32(2 * math.Sqrt(2/math.Pi) * 0.044715)
)

// Points lists, in the order they are computed, the tensors of the node that the primitive
// graph computes (its data-movement tensors aside, see Lower): the node's value last. These
// are what calibration observes and what a gqf file's activation encodings quantize.
//
//	embed with a scale   NAME_rows, NAME
//	linear with a bias   NAME_fc, NAME
//	rope                 X_cos, X_sin, NAME          (X: NAME without _rope)
//	attention            blk.L.kq, blk.L.kq_scaled, [blk.L.kq_div, blk.L.kq_tanh,
//	                     blk.L.kq_capped (with a cap)], blk.L.kq_masked, blk.L.kq_softmax, NAME
//	swiglu               blk.L.ffn_gate_sig, blk.L.ffn_silu, NAME
//	geglu                blk.L.ffn_gate_sq, _sqk, _poly, _z, _sig, blk.L.ffn_gelu, NAME
//	softcap              NAME_div, NAME_tanh, NAME
//	anything else        NAME
//
// The attention scores kq have, per token, one row per query head over the KV positions.
func (n *Node) Points() []string {
	p := n.prefix()
	switch n.Op {
	case OpEmbed:
		if n.Scale != 0 {
			return []string{n.Name + suffixRows, n.Name}
		}
	case OpLinear:
		if n.Bias != "" {
			return []string{n.Name + suffixFC, n.Name}
		}
	case OpRope:
		return []string{p + suffixCos, p + suffixSin, n.Name}
	case OpAttention:
		if n.Cap != 0 {
			return []string{p + pointKQ, p + pointKQScaled, p + pointKQDiv, p + pointKQTanh, p + pointKQCapped, p + pointKQMasked, p + pointSoftmax, n.Name}
		}
		return []string{p + pointKQ, p + pointKQScaled, p + pointKQMasked, p + pointSoftmax, n.Name}
	case OpSwiGLU:
		return []string{p + pointGateSig, p + pointSiLU, n.Name}
	case OpGeGLU:
		return []string{p + pointGateSq, p + pointGateSqK, p + pointGatePoly, p + pointGateZ, p + pointGateSig, p + pointGELU, n.Name}
	case OpSoftcap:
		return []string{n.Name + suffixDiv, n.Name + suffixTanh, n.Name}
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
// and v biases, the per-head q and k norms of Qwen3 and Gemma 3, and Gemma's scaled
// embedding, GeGLU, post-norms, soft-capping and sliding windows, Phi-3's fused gate_up and
// partial rotary, and the routed experts of Mixtral and Qwen3-MoE (a linear router, then a
// moe node) where the spec has them.
func ModelGraph(s *Spec) *Graph {
	g := &Graph{Spec: s, Output: "logits", Mask: MaskValue, Ropes: Ropes(s)}
	add := func(n Node) string {
		g.Nodes = append(g.Nodes, n)
		return n.Name
	}
	embed := Node{Op: OpEmbed, Name: "token_embd", Inputs: []string{TokensValue}, Weight: string(TokenEmbd), Layer: -1, Dim: s.Hidden}
	if s.EmbedScale {
		embed.Scale = float32(math.Sqrt(float64(s.Hidden)))
	}
	x := add(embed)
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
		rope := 0
		if s.RopeLocalTheta > 0 && s.IsSliding(l) {
			rope = 1
		}
		q = add(Node{Op: OpRope, Name: p + "q_rope", Inputs: []string{q}, Layer: l, Dim: qDim, Heads: s.Heads, Rope: rope})
		k = add(Node{Op: OpRope, Name: p + "k_rope", Inputs: []string{k}, Layer: l, Dim: kvDim, Heads: s.KVHeads, Rope: rope})
		att := Node{Op: OpAttention, Name: p + "kqv_out", Inputs: []string{q, k, v}, Layer: l, Dim: qDim, Heads: s.Heads, KVHeads: s.KVHeads,
			Scale: AttentionScale(s), Cap: float32(s.AttnSoftcap)}
		if s.IsSliding(l) {
			att.Window = s.SlidingWindow
		}
		o := add(Node{Op: OpLinear, Name: p + "attn_out", Inputs: []string{add(att)}, Weight: w(AttnOut), Layer: l, Dim: s.Hidden})
		if s.PostNorms {
			o = add(Node{Op: OpRMSNorm, Name: p + "attn_post_norm", Inputs: []string{o}, Weight: w(AttnPostNorm), Layer: l, Dim: s.Hidden})
		}
		x = add(Node{Op: OpAdd, Name: p + "ffn_inp", Inputs: []string{x, o}, Layer: l, Dim: s.Hidden})
		fn := add(Node{Op: OpRMSNorm, Name: p + "ffn_norm", Inputs: []string{x}, Weight: w(FFNNorm), Layer: l, Dim: s.Hidden})
		if s.Experts > 0 {
			r := add(Node{Op: OpLinear, Name: p + "ffn_gate_inp", Inputs: []string{fn}, Weight: w(FFNGateInp), Layer: l, Dim: s.Experts})
			moe := add(Node{Op: OpMoE, Name: p + "ffn_moe", Inputs: []string{fn, r}, Layer: l, Dim: s.Hidden,
				GateExps: w(FFNGateExps), UpExps: w(FFNUpExps), DownExps: w(FFNDownExps),
				Experts: s.Experts, Used: s.ExpertsUsed, Inner: s.ExpertFF, Norm: s.NormTopK})
			x = add(Node{Op: OpAdd, Name: p + "out", Inputs: []string{x, moe}, Layer: l, Dim: s.Hidden})
			continue
		}
		var act string
		if s.FusedGateUp {
			up := add(Node{Op: OpLinear, Name: p + "ffn_up", Inputs: []string{fn}, Weight: w(FFNUp), Layer: l, Dim: 2 * s.Intermediate})
			act = add(Node{Op: OpSwiGLU, Name: p + "ffn_act", Inputs: []string{up}, Layer: l, Dim: s.Intermediate})
		} else {
			gate := add(Node{Op: OpLinear, Name: p + "ffn_gate", Inputs: []string{fn}, Weight: w(FFNGate), Layer: l, Dim: s.Intermediate})
			up := add(Node{Op: OpLinear, Name: p + "ffn_up", Inputs: []string{fn}, Weight: w(FFNUp), Layer: l, Dim: s.Intermediate})
			op := OpSwiGLU
			if s.Act == ActGELUTanh {
				op = OpGeGLU
			}
			act = add(Node{Op: op, Name: p + "ffn_act", Inputs: []string{gate, up}, Layer: l, Dim: s.Intermediate})
		}
		fo := add(Node{Op: OpLinear, Name: p + "ffn_out", Inputs: []string{act}, Weight: w(FFNDown), Layer: l, Dim: s.Hidden})
		if s.PostNorms {
			fo = add(Node{Op: OpRMSNorm, Name: p + "ffn_post_norm", Inputs: []string{fo}, Weight: w(FFNPostNorm), Layer: l, Dim: s.Hidden})
		}
		x = add(Node{Op: OpAdd, Name: p + "out", Inputs: []string{x, fo}, Layer: l, Dim: s.Hidden})
	}
	xn := add(Node{Op: OpRMSNorm, Name: "output_norm", Inputs: []string{x}, Weight: string(OutputNorm), Layer: -1, Dim: s.Hidden, Tail: true})
	out := string(Output)
	if s.Tied {
		out = string(TokenEmbd)
	}
	if s.FinalSoftcap == 0 {
		add(Node{Op: OpLinear, Name: g.Output, Inputs: []string{xn}, Weight: out, Layer: -1, Dim: s.Vocab, Tail: true})
		return g
	}
	raw := add(Node{Op: OpLinear, Name: "output", Inputs: []string{xn}, Weight: out, Layer: -1, Dim: s.Vocab, Tail: true})
	add(Node{Op: OpSoftcap, Name: g.Output, Inputs: []string{raw}, Layer: -1, Dim: s.Vocab, Tail: true, Cap: float32(s.FinalSoftcap)})
	return g
}

// Ropes lists a spec's rotary tables: the global one, then the sliding layers' own when
// they have a base of their own (Gemma 3: no scaling there).
func Ropes(s *Spec) []RopeTable {
	t := []RopeTable{{Theta: s.RopeTheta, Scaling: s.RopeScaling, Dims: s.RotDims()}}
	if s.RopeLocalTheta > 0 {
		t = append(t, RopeTable{Theta: s.RopeLocalTheta, Dims: s.RotDims()})
	}
	return t
}

// RopeInvFreq computes the rotary frequencies of each pair of table t as transformers does,
// in float32: inv_freq[i] = 1 / theta^(2i/dims), divided by the pair's frequency factor
// (llama3's rope_freqs or longrope's factors; nil for none) and by a linear scaling factor.
// It is the one definition the runtime and the primitive graph's tables share.
func RopeInvFreq(t RopeTable, factors []float32) []float32 {
	inv := make([]float32, t.Dims/2)
	d := float32(t.Dims)
	for i := range inv {
		exp := float32(2*i) / d
		f := float32(1 / math.Pow(t.Theta, float64(exp)))
		if factors != nil {
			f /= factors[i]
		}
		if sc := t.Scaling; sc != nil && sc.Type == "linear" && sc.Factor > 0 {
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

// AttentionScale is the factor of the attention scores in float32: 1/√head_dim, or Gemma's
// query_pre_attn_scalar^−½.
func AttentionScale(s *Spec) float32 {
	if s.QueryScalar > 0 {
		return float32(1 / math.Sqrt(s.QueryScalar))
	}
	return float32(1 / math.Sqrt(float64(s.HeadDim)))
}
