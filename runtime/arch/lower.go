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
//	add        ElementWiseAdd
//	swiglu     Sigmoid (blk.L.ffn_gate_sig), ElementWiseMultiply (blk.L.ffn_silu), ElementWiseMultiply
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
	if err := g.lowerable(); err != nil {
		return nil, err
	}
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

// lowerable refuses what the primitive graph cannot express.
func (g *Graph) lowerable() error {
	if sc := g.Spec.RopeScaling; sc != nil && sc.Type == "yarn" {
		return fmt.Errorf("rope_scaling: yarn is not supported by the gqf graph")
	}
	for _, n := range g.Nodes {
		bad := ""
		switch {
		case n.Op == OpGeGLU || n.Op == OpSoftcap:
			bad = "op " + string(n.Op)
		case n.Op == OpEmbed && n.Scale != 0:
			bad = "a scaled embedding"
		case n.Op == OpAttention && (n.Cap != 0 || n.Window != 0):
			bad = "soft-capped or sliding-window attention"
		case n.Op == OpRope && (n.Rope != 0 || g.Ropes[n.Rope].Dims != g.Spec.HeadDim):
			bad = "a second or partial rotary table"
		case n.Op == OpSwiGLU && len(n.Inputs) == 1:
			bad = "a fused gate_up"
		}
		if bad != "" {
			return fmt.Errorf("graph: node %s: %s is not supported by the gqf graph yet", n.Name, bad)
		}
	}
	return nil
}

// lower builds the primitive graph over L new positions: with no KV cache (kv nil) or, as
// LowerKV describes, over a KV cache for the layers of one part.
func (g *Graph) lower(L int, kv *KVOptions) (*Lowered, error) {
	s := g.Spec
	b := &lowerer{g: &gqf.Graph{Name: "decoder", MaxLen: uint32(L)}, shapes: map[string][]int64{}, point: map[string]string{}}
	l64, hd := int64(L), int64(s.HeadDim)
	eps := attrFloat("epsilon", float32(s.RMSEps))
	var consts []Const
	nodes := g.Nodes
	if kv == nil {
		b.g.Inputs = []*gqf.Value{{Name: InputIDs, Dtype: gqf.DataType_INT64, Shape: []int64{1, l64}}}
		b.g.Outputs = []string{g.Output}
		consts = ropeConsts(s, L)
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
			b.emit(gqf.OpGather, n.Name, "", row, []string{n.Weight, in(0)}, attrInt("axis", 0))
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
			c := b.emit(gqf.OpElementWiseMultiply, p+suffixCos, "", shape, []string{x, ConstRopeCos})
			sn := b.emit(gqf.OpElementWiseMultiply, p+suffixSin, "", shape, []string{rot, ConstRopeSin})
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
			kq = b.emit(gqf.OpElementWiseAdd, p+pointKQMasked, "", scores, []string{kq, ConstMask})
			kq = b.emit(gqf.OpSoftmax, p+pointSoftmax, "", scores, []string{kq}, attrInt("axis", -1))
			// The product's value is the node's point: the transposes after it only move it.
			kqv := b.emit(gqf.OpMatMul, p+"kqv", n.Name, []int64{1, nh, l64, hd}, []string{kq, vt})
			kqv = b.move(gqf.OpTranspose, p+"kqv_t", kqv, []int64{1, l64, nh, hd}, []string{kqv}, attrInts("perm", 0, 2, 1, 3))
			b.move(gqf.OpReshape, n.Name, kqv, row, []string{kqv}, attrInts("shape", 0, l64, nh*hd))
		case OpAdd:
			b.emit(gqf.OpElementWiseAdd, n.Name, "", row, []string{in(0), in(1)})
		case OpSwiGLU:
			p := n.prefix()
			sig := b.emit(gqf.OpSigmoid, p+pointGateSig, "", row, []string{in(0)})
			silu := b.emit(gqf.OpElementWiseMultiply, p+pointSiLU, "", row, []string{in(0), sig})
			b.emit(gqf.OpElementWiseMultiply, n.Name, "", row, []string{silu, in(1)})
		default:
			return nil, fmt.Errorf("graph: node %s: op %q has no primitive form", n.Name, n.Op)
		}
	}
	if kv != nil {
		b.kvOutputs(g, kv, nodes)
		consts = append(consts, Const{Name: ConstScale, Shape: []int64{1}, F: []float32{AttentionScale(s)}})
		return &Lowered{Graph: b.g, Consts: consts, Point: b.point}, nil
	}
	mask := make([]float32, L*L)
	for i := 0; i < L; i++ {
		for j := i + 1; j < L; j++ {
			mask[i*L+j] = g.Mask
		}
	}
	consts = append(consts,
		Const{Name: ConstMask, Shape: []int64{l64, l64}, F: mask},
		Const{Name: ConstScale, Shape: []int64{1}, F: []float32{AttentionScale(s)}})
	return &Lowered{Graph: b.g, Consts: consts, Point: b.point}, nil
}

func trimSuffix(s, suffix string) string {
	if len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)]
	}
	return s
}

// ropeConsts computes the rotation tables as the runtime does (RopeTables), each pair's
// values in both halves of a head, sin negated in the first.
func ropeConsts(s *Spec, L int) []Const {
	hd, half := s.HeadDim, s.HeadDim/2
	inv := RopeInvFreq(Ropes(s)[0], RopeFreqFactors(s))
	hc, hs := make([]float32, L*half), make([]float32, L*half)
	RopeTables(inv, 0, L, hc, hs)
	cos, sin := make([]float32, L*hd), make([]float32, L*hd)
	for p := 0; p < L; p++ {
		for i := 0; i < half; i++ {
			c, sn := hc[p*half+i], hs[p*half+i]
			cos[p*hd+i], cos[p*hd+half+i] = c, c
			sin[p*hd+i], sin[p*hd+half+i] = -sn, sn
		}
	}
	rot := make([]int64, hd)
	for j := range rot {
		rot[j] = int64((j + half) % hd)
	}
	shape := []int64{int64(L), 1, int64(hd)}
	return []Const{
		{Name: ConstRopeCos, Shape: shape, F: cos},
		{Name: ConstRopeSin, Shape: shape, F: sin},
		{Name: ConstRopeRot, Shape: []int64{int64(hd)}, I: rot},
	}
}
