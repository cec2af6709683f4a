package arch

import (
	"fmt"

	"github.com/gquant/gquant/formats/gqf"
)

// Lowering: the primitive form of a Graph over a fixed length L with no KV cache, in QNN's op
// vocabulary (formats/gqf's Ops), as a gqf file records it: input_ids [1, L] → logits
// [1, L, vocab]. Weights are read by their GGUF names in HF layout (rotate-half RoPE).
//
// Each node becomes:
//
//	embed      Gather(table, input_ids)
//	rms_norm   RmsNorm (per head: first a Reshape to [1, L, heads, head_dim], X_heads for
//	           the norm X_norm)
//	linear     FullyConnected (+ ElementWiseAdd of the bias: NAME_fc, then NAME)
//	rope       x·cos + gather(x, rot)·sin±, with X_heads (Reshape), X_rot (Gather), X_cos,
//	           X_sin and NAME: rot swaps the two halves of each head, sin± is sin with its
//	           first half negated
//	attention  Transpose q, k and v to heads first (blk.L.q_t, k_t, v_heads, v_t; repeated
//	           to every query head by a Gather, k_rep and v_rep, when KVHeads < Heads),
//	           MatMul (kq), ElementWiseMultiply by the scale (kq_scaled), ElementWiseAdd of the
//	           causal mask (kq_masked), Softmax (kq_softmax), MatMul (kqv), Transpose (kqv_t)
//	           and Reshape (NAME)
//	           With a soft-cap (Gemma 2), kq_scaled is multiplied by 1/cap (kq_div), goes
//	           through Tanh (kq_tanh) and is multiplied by cap (kq_capped) before the mask;
//	           a sliding layer adds attn.mask_swa, which also masks the positions Window or
//	           more before the token's own (when Window < L; attn.mask otherwise)
//	add        ElementWiseAdd
//	swiglu     Sigmoid (blk.L.ffn_gate_sig), ElementWiseMultiply (blk.L.ffn_silu), ElementWiseMultiply;
//	           with one input (a fused gate_up), Gathers of its two halves first
//	           (blk.L.ffn_gate_half, blk.L.ffn_up_half: data movement)
//	geglu      ElementWiseMultiply g·g (ffn_gate_sq), by GELUK1 (ffn_gate_sqk),
//	           ElementWiseAdd of GELUK0 (ffn_gate_poly), ElementWiseMultiply by g (ffn_gate_z),
//	           Sigmoid (ffn_gate_sig), ElementWiseMultiply by g (ffn_gelu) and by up
//	softcap    ElementWiseMultiply by 1/cap (NAME_div), Tanh (NAME_tanh), ElementWiseMultiply by cap
//	embed      with a scale: Gather (NAME_rows), ElementWiseMultiply by it (embd.scale)
//
// Rope nodes of the second table (Gemma 3's sliding layers) read rope_local.cos and
// rope_local.sin; partial rotary tables hold cos 1 and sin 0 beyond their rotated dimensions,
// which the rotation index (rope.rot) leaves in place.
//
// Every primitive activation belongs to one point of the graph (Node.Points): the tensors an
// op computes are points themselves; data movement (Reshape, Transpose, the Gathers of
// rotation and head repetition) keeps its input's values and belongs to its input's point,
// whose encoding it carries. Lowered.Point maps each activation to its point.

// Graph constant names of the lowered graph.
const (
	ConstRopeCos = "rope.cos"    // [L, 1, head_dim]
	ConstRopeSin = "rope.sin"    // [L, 1, head_dim], first half negated
	ConstRopeRot = "rope.rot"    // int64 [head_dim]: j ↦ j ± head_dim/2
	ConstMask    = "attn.mask"   // [L, L]: 0 on and below the diagonal, Graph.Mask above
	ConstScale   = "attn.scale"  // [1]: 1/√head_dim
	ConstKVRep   = "attn.kv_rep" // int64 [heads]: the KV head of each query head
	InputIDs     = "input_ids"   // graph input, int64 [1, L]

	ConstMaskSWA    = "attn.mask_swa"  // [L, L]: attn.mask, and the mask value Window or more below the diagonal
	ConstCapInv     = "attn.cap_inv"   // [1]: 1/cap of the attention scores
	ConstCap        = "attn.cap"       // [1]: cap
	ConstEmbdScale  = "embd.scale"     // [1]: the embedding's scale
	ConstGELUK0     = "gelu.k0"        // [1]: GELUK0
	ConstGELUK1     = "gelu.k1"        // [1]: GELUK1
	ConstGateIdx    = "ffn.gate_idx"   // int64 [intermediate]: the gate half of a fused gate_up
	ConstUpIdx      = "ffn.up_idx"     // int64 [intermediate]: its up half
	ConstOutCapInv  = "logits.cap_inv" // [1]: 1/cap of the logits
	ConstOutCap     = "logits.cap"     // [1]: cap
	ConstRopeLocCos = "rope_local.cos" // the second rotary table's rope.cos
	ConstRopeLocSin = "rope_local.sin" // and rope.sin
)

// Const is a constant tensor the lowered graph reads besides the weights.
type Const struct {
	Name  string
	Shape []int64
	F     []float32 // float constants
	I     []int64   // index constants
}

// Lowered is a graph in primitive form.
type Lowered struct {
	Graph  *gqf.Graph
	Consts []Const
	// Point maps every activation of Graph to the point (Node.Points) it belongs to.
	Point map[string]string
}

// lowerer accumulates the primitive graph.
type lowerer struct {
	g      *gqf.Graph
	shapes map[string][]int64
	point  map[string]string
	// capConsts are the attention soft-cap's constants, once a node has used them.
	capConsts []Const
}

// emit appends a node with one output and returns the output's name; point is the point
// the output belongs to ("" for its own).
func (b *lowerer) emit(op, out, point string, shape []int64, inputs []string, attrs ...*gqf.Attribute) string {
	b.g.Nodes = append(b.g.Nodes, &gqf.Node{Name: out, Op: op, Inputs: inputs, Outputs: []string{out}, Attrs: attrs})
	b.g.Activations = append(b.g.Activations, &gqf.Value{Name: out, Dtype: gqf.DataType_F32, Shape: shape})
	b.shapes[out] = shape
	if point == "" {
		point = out
	}
	b.point[out] = point
	return out
}

// move emits a data-movement node: its output belongs to the input's point.
func (b *lowerer) move(op, out, in string, shape []int64, inputs []string, attrs ...*gqf.Attribute) string {
	return b.emit(op, out, b.point[in], shape, inputs, attrs...)
}

func attrInt(name string, v int64) *gqf.Attribute     { return &gqf.Attribute{Name: name, I: v} }
func attrInts(name string, v ...int64) *gqf.Attribute { return &gqf.Attribute{Name: name, Ints: v} }
func attrFloat(name string, v float32) *gqf.Attribute { return &gqf.Attribute{Name: name, F: v} }

// MaxGraphLen is the longest sequence Lower builds a graph for: its constants grow with the
// square of the length (attn.mask is L×L float32, 256 MiB at 8192).
const MaxGraphLen = 8192

// Lower returns the primitive form of g over L positions, L in [1, min(the model's context
// length, MaxGraphLen)]; another L is refused before anything is sized by it.
func (g *Graph) Lower(L int) (*Lowered, error) {
	s := g.Spec
	switch {
	case L < 1:
		return nil, fmt.Errorf("max_len: must be at least 1, got %d", L)
	case L > s.Context:
		return nil, fmt.Errorf("max_len: %d exceeds the model's context length %d", L, s.Context)
	case L > MaxGraphLen:
		return nil, fmt.Errorf("max_len: %d exceeds the longest graph gquant lowers, %d positions (attn.mask alone would take %d MiB)", L, MaxGraphLen, int64(L)*int64(L)*4>>20)
	}
	return g.lower(L, nil)
}

// lower builds the primitive graph over L new positions: with no KV cache (kv nil) or, as
// LowerKV describes, over a KV cache for the layers of one part.
func (g *Graph) lower(L int, kv *KVOptions) (*Lowered, error) {
	s := g.Spec
	if err := CheckGQF(s); err != nil {
		return nil, err
	}
	b := &lowerer{g: &gqf.Graph{Name: "decoder", MaxLen: uint32(L)}, shapes: map[string][]int64{}, point: map[string]string{}}
	l64, hd := int64(L), int64(s.HeadDim)
	eps := attrFloat("epsilon", float32(s.RMSEps))
	var consts []Const
	nodes := g.Nodes
	if kv == nil {
		b.g.Inputs = []*gqf.Value{{Name: InputIDs, Dtype: gqf.DataType_INT64, Shape: []int64{1, l64}}}
		b.g.Outputs = []string{g.Output}
		consts = ropeConsts(g, L)
		if s.Heads != s.KVHeads {
			rep := make([]int64, s.Heads)
			for h := range rep {
				rep[h] = int64(h / (s.Heads / s.KVHeads))
			}
			consts = append(consts, Const{Name: ConstKVRep, Shape: []int64{int64(s.Heads)}, I: rep})
		}
	} else {
		nodes = kv.nodes(g)
		consts = b.kvInputs(g, kv, nodes)
	}
	// heads returns in as [1, L, heads, head_dim], reshaping a row-shaped value.
	heads := func(in, name string, h int) string {
		if len(b.shapes[in]) == 4 {
			return in
		}
		return b.move(gqf.OpReshape, name, in, []int64{1, l64, int64(h), hd}, []string{in}, attrInts("shape", 0, l64, int64(h), hd))
	}
	for i := range nodes {
		n := &nodes[i]
		row := []int64{1, l64, int64(n.Dim)}
		in := func(k int) string {
			if n.Inputs[k] == TokensValue {
				return InputIDs
			}
			return n.Inputs[k]
		}
		switch n.Op {
		case OpEmbed:
			if n.Scale == 0 {
				b.emit(gqf.OpGather, n.Name, "", row, []string{n.Weight, in(0)}, attrInt("axis", 0))
				break
			}
			rows := b.emit(gqf.OpGather, n.Name+suffixRows, "", row, []string{n.Weight, in(0)}, attrInt("axis", 0))
			b.emit(gqf.OpElementWiseMultiply, n.Name, "", row, []string{rows, ConstEmbdScale})
			consts = append(consts, Const{Name: ConstEmbdScale, Shape: []int64{1}, F: []float32{n.Scale}})
		case OpRMSNorm:
			x, shape := in(0), row
			if n.Heads > 0 {
				x = heads(x, trimSuffix(n.Name, "_norm")+"_heads", n.Heads)
				shape = []int64{1, l64, int64(n.Heads), hd}
			}
			b.emit(gqf.OpRmsNorm, n.Name, "", shape, []string{x, n.Weight}, eps)
		case OpLinear:
			if n.Bias == "" {
				b.emit(gqf.OpFullyConnected, n.Name, "", row, []string{in(0), n.Weight})
				break
			}
			y := b.emit(gqf.OpFullyConnected, n.Name+suffixFC, "", row, []string{in(0), n.Weight})
			b.emit(gqf.OpElementWiseAdd, n.Name, "", row, []string{y, n.Bias})
		case OpRope:
			p := n.prefix()
			shape := []int64{1, l64, int64(n.Heads), hd}
			x := heads(in(0), p+"_heads", n.Heads)
			rot := b.move(gqf.OpGather, p+"_rot", x, shape, []string{x, ConstRopeRot}, attrInt("axis", 3))
			cosT, sinT := ConstRopeCos, ConstRopeSin
			if n.Rope == 1 {
				cosT, sinT = ConstRopeLocCos, ConstRopeLocSin
			}
			c := b.emit(gqf.OpElementWiseMultiply, p+suffixCos, "", shape, []string{x, cosT})
			sn := b.emit(gqf.OpElementWiseMultiply, p+suffixSin, "", shape, []string{rot, sinT})
			b.emit(gqf.OpElementWiseAdd, n.Name, "", shape, []string{c, sn})
		case OpAttention:
			p := n.prefix()
			nh, nkv := int64(n.Heads), int64(n.KVHeads)
			qh := heads(in(0), p+"q_heads", n.Heads)
			kh := heads(in(1), p+"k_heads", n.KVHeads)
			if kv != nil {
				b.attentionKV(n, kv, qh, kh, heads(in(2), p+"v_heads", n.KVHeads))
				break
			}
			qt := b.move(gqf.OpTranspose, p+"q_t", qh, []int64{1, nh, l64, hd}, []string{qh}, attrInts("perm", 0, 2, 1, 3))
			kt := b.move(gqf.OpTranspose, p+"k_t", kh, []int64{1, nkv, hd, l64}, []string{kh}, attrInts("perm", 0, 2, 3, 1))
			vh := heads(in(2), p+"v_heads", n.KVHeads)
			vt := b.move(gqf.OpTranspose, p+"v_t", vh, []int64{1, nkv, l64, hd}, []string{vh}, attrInts("perm", 0, 2, 1, 3))
			if nh != nkv {
				kt = b.move(gqf.OpGather, p+"k_rep", kt, []int64{1, nh, hd, l64}, []string{kt, ConstKVRep}, attrInt("axis", 1))
				vt = b.move(gqf.OpGather, p+"v_rep", vt, []int64{1, nh, l64, hd}, []string{vt, ConstKVRep}, attrInt("axis", 1))
			}
			scores := []int64{1, nh, l64, l64}
			kq := b.emit(gqf.OpMatMul, p+pointKQ, "", scores, []string{qt, kt})
			kq = b.emit(gqf.OpElementWiseMultiply, p+pointKQScaled, "", scores, []string{kq, ConstScale})
			kq = b.softcap(n, p, kq, scores)
			mask := ConstMask
			if n.Window > 0 && n.Window < L {
				mask = ConstMaskSWA
			}
			kq = b.emit(gqf.OpElementWiseAdd, p+pointKQMasked, "", scores, []string{kq, mask})
			kq = b.emit(gqf.OpSoftmax, p+pointSoftmax, "", scores, []string{kq}, attrInt("axis", -1))
			// The product's value is the node's point: the transposes after it only move it.
			kqv := b.emit(gqf.OpMatMul, p+"kqv", n.Name, []int64{1, nh, l64, hd}, []string{kq, vt})
			kqv = b.move(gqf.OpTranspose, p+"kqv_t", kqv, []int64{1, l64, nh, hd}, []string{kqv}, attrInts("perm", 0, 2, 1, 3))
			b.move(gqf.OpReshape, n.Name, kqv, row, []string{kqv}, attrInts("shape", 0, l64, nh*hd))
		case OpAdd:
			b.emit(gqf.OpElementWiseAdd, n.Name, "", row, []string{in(0), in(1)})
		case OpSwiGLU, OpGeGLU:
			p := n.prefix()
			gate, up := in(0), ""
			if len(n.Inputs) == 1 { // a fused gate_up: its halves
				gate = b.move(gqf.OpGather, p+"ffn_gate_half", in(0), row, []string{in(0), ConstGateIdx}, attrInt("axis", 2))
				up = b.move(gqf.OpGather, p+"ffn_up_half", in(0), row, []string{in(0), ConstUpIdx}, attrInt("axis", 2))
				consts = appendOnce(consts, gateUpIdx(n.Dim)...)
			} else {
				up = in(1)
			}
			if n.Op == OpSwiGLU {
				sig := b.emit(gqf.OpSigmoid, p+pointGateSig, "", row, []string{gate})
				silu := b.emit(gqf.OpElementWiseMultiply, p+pointSiLU, "", row, []string{gate, sig})
				b.emit(gqf.OpElementWiseMultiply, n.Name, "", row, []string{silu, up})
				break
			}
			sq := b.emit(gqf.OpElementWiseMultiply, p+pointGateSq, "", row, []string{gate, gate})
			sqk := b.emit(gqf.OpElementWiseMultiply, p+pointGateSqK, "", row, []string{sq, ConstGELUK1})
			poly := b.emit(gqf.OpElementWiseAdd, p+pointGatePoly, "", row, []string{sqk, ConstGELUK0})
			z := b.emit(gqf.OpElementWiseMultiply, p+pointGateZ, "", row, []string{gate, poly})
			sig := b.emit(gqf.OpSigmoid, p+pointGateSig, "", row, []string{z})
			gelu := b.emit(gqf.OpElementWiseMultiply, p+pointGELU, "", row, []string{gate, sig})
			b.emit(gqf.OpElementWiseMultiply, n.Name, "", row, []string{gelu, up})
			consts = appendOnce(consts, Const{Name: ConstGELUK0, Shape: []int64{1}, F: []float32{GELUK0}},
				Const{Name: ConstGELUK1, Shape: []int64{1}, F: []float32{GELUK1}})
		case OpSoftcap:
			d := b.emit(gqf.OpElementWiseMultiply, n.Name+suffixDiv, "", row, []string{in(0), ConstOutCapInv})
			t := b.emit(gqf.OpTanh, n.Name+suffixTanh, "", row, []string{d})
			b.emit(gqf.OpElementWiseMultiply, n.Name, "", row, []string{t, ConstOutCap})
			consts = append(consts, Const{Name: ConstOutCapInv, Shape: []int64{1}, F: []float32{1 / n.Cap}},
				Const{Name: ConstOutCap, Shape: []int64{1}, F: []float32{n.Cap}})
		default:
			return nil, fmt.Errorf("graph: node %s: op %q has no primitive form", n.Name, n.Op)
		}
	}
	consts = append(consts, b.capConsts...)
	if kv != nil {
		b.kvOutputs(g, kv, nodes)
		consts = append(consts, Const{Name: ConstScale, Shape: []int64{1}, F: []float32{AttentionScale(s)}})
		return &Lowered{Graph: b.g, Consts: consts, Point: b.point}, nil
	}
	consts = append(consts,
		Const{Name: ConstMask, Shape: []int64{l64, l64}, F: CausalMask(L, 0, g.Mask)},
		Const{Name: ConstScale, Shape: []int64{1}, F: []float32{AttentionScale(s)}})
	if w := g.Window(); w > 0 && w < L {
		consts = append(consts, Const{Name: ConstMaskSWA, Shape: []int64{l64, l64}, F: CausalMask(L, w, g.Mask)})
	}
	return &Lowered{Graph: b.g, Consts: consts, Point: b.point}, nil
}

// CausalMask is the L×L mask of Lower's graph: 0 where position i sees position j (j ≤ i, and
// with a window w > 0 also i − j < w), m elsewhere.
func CausalMask(L, w int, m float32) []float32 {
	mask := make([]float32, L*L)
	for i := 0; i < L; i++ {
		for j := 0; j < L; j++ {
			if j > i || (w > 0 && i-j >= w) {
				mask[i*L+j] = m
			}
		}
	}
	return mask
}

// Window is the sliding window of the graph's attention nodes (0: none; a model has one).
func (g *Graph) Window() int {
	for _, n := range g.Nodes {
		if n.Op == OpAttention && n.Window > 0 {
			return n.Window
		}
	}
	return 0
}

// softcap emits an attention node's soft-cap of the scaled scores kq (nothing without a cap)
// and returns the capped scores; its constants are added once, by lower.
func (b *lowerer) softcap(n *Node, p, kq string, shape []int64) string {
	if n.Cap == 0 {
		return kq
	}
	d := b.emit(gqf.OpElementWiseMultiply, p+pointKQDiv, "", shape, []string{kq, ConstCapInv})
	t := b.emit(gqf.OpTanh, p+pointKQTanh, "", shape, []string{d})
	b.capConsts = []Const{{Name: ConstCapInv, Shape: []int64{1}, F: []float32{1 / n.Cap}}, {Name: ConstCap, Shape: []int64{1}, F: []float32{n.Cap}}}
	return b.emit(gqf.OpElementWiseMultiply, p+pointKQCapped, "", shape, []string{t, ConstCap})
}

// appendOnce appends the constants not already in cs.
func appendOnce(cs []Const, add ...Const) []Const {
	for _, a := range add {
		found := false
		for _, c := range cs {
			found = found || c.Name == a.Name
		}
		if !found {
			cs = append(cs, a)
		}
	}
	return cs
}

// gateUpIdx are the Gather indices of a fused gate_up's halves, n values each.
func gateUpIdx(n int) []Const {
	g, u := make([]int64, n), make([]int64, n)
	for i := range g {
		g[i], u[i] = int64(i), int64(n+i)
	}
	return []Const{{Name: ConstGateIdx, Shape: []int64{int64(n)}, I: g}, {Name: ConstUpIdx, Shape: []int64{int64(n)}, I: u}}
}

func trimSuffix(s, suffix string) string {
	if len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)]
	}
	return s
}

// ropeConsts computes the rotation tables of each of the graph's rotary tables as the
// runtime does (RopeTables, with longrope's factors for a sequence of L), each pair's values
// in both halves of its rotated dimensions, sin negated in the first, cos 1 and sin 0 beyond
// them (partial rotary), and the rotation index.
func ropeConsts(g *Graph, L int) []Const {
	s := g.Spec
	hd := s.HeadDim
	var out []Const
	for k, t := range g.Ropes {
		dims, half := t.Dims, t.Dims/2
		factors, attn := RopeFreqFactors(s), float32(1)
		if sc := s.RopeScaling; sc != nil && sc.Type == "longrope" {
			factors, attn = LongRopeFactors(s, L)
		}
		if k > 0 {
			factors, attn = nil, 1
		}
		inv := RopeInvFreq(t, factors)
		hc, hs := make([]float32, L*half), make([]float32, L*half)
		RopeTables(inv, 0, L, hc, hs)
		cos, sin := make([]float32, L*hd), make([]float32, L*hd)
		for p := 0; p < L; p++ {
			for i := 0; i < half; i++ {
				c, sn := hc[p*half+i]*attn, hs[p*half+i]*attn
				cos[p*hd+i], cos[p*hd+half+i] = c, c
				sin[p*hd+i], sin[p*hd+half+i] = -sn, sn
			}
			for i := dims; i < hd; i++ {
				cos[p*hd+i] = 1
			}
		}
		shape := []int64{int64(L), 1, int64(hd)}
		names := [2]string{ConstRopeCos, ConstRopeSin}
		if k == 1 {
			names = [2]string{ConstRopeLocCos, ConstRopeLocSin}
		}
		out = append(out, Const{Name: names[0], Shape: shape, F: cos}, Const{Name: names[1], Shape: shape, F: sin})
	}
	return append(out, Const{Name: ConstRopeRot, Shape: []int64{int64(hd)}, I: ropeRot(hd, g.Ropes[0].Dims)})
}

// ropeRot is the rotation index of a head of hd values whose first dims rotate: j ↦ j ±
// dims/2 for j < dims, j beyond.
func ropeRot(hd, dims int) []int64 {
	rot := make([]int64, hd)
	for j := range rot {
		rot[j] = int64(j)
		if j < dims {
			rot[j] = int64((j + dims/2) % dims)
		}
	}
	return rot
}
