package arch

import (
	"fmt"

	"github.com/gquant/gquant/formats/gqf"
)

// The deployment form of the graph (LowerKV): the primitive graph over AR new positions and a
// KV cache of a fixed context CTX, with the inputs and outputs of Qualcomm AI Hub's LLM
// exports, batch 1, static shapes:
//
//	input_ids            int32   [1, AR]
//	attention_mask       float32 [1, 1, AR, CTX]   additive: 0 attends, the mask value masks;
//	                                               the CTX−AR past slots, then the AR new positions
//	position_ids_cos     float32 [1, 1, AR, rot/2]   cos and sin of each pair's angle at each
//	position_ids_sin     float32 [1, 1, AR, rot/2]   new position (rotate-half pairs; rot: the
//	                                                 rotated dimensions, head_dim unless partial)
//	past_key_{l}_in      float32 [kv_heads, 1, head_dim, CTX−AR]   keys after RoPE
//	past_value_{l}_in    float32 [kv_heads, 1, CTX−AR, head_dim]
//	→ logits             float32 [1, AR, vocab]
//	  past_key_{l}_out   float32 [kv_heads, 1, head_dim, AR]   the new positions' keys
//	  past_value_{l}_out float32 [kv_heads, 1, AR, head_dim]
//
// l is the absolute layer index. A part (KVOptions.First, Last) holds the layers [First,
// Last): the first part reads input_ids, a later one the residual stream the part before it
// leaves (a graph input and output named as the activation, say blk.13.out, [1, AR, hidden]);
// the last part alone computes the logits.
//
// Every activation keeps the name, and the point, it has in Lower's graph, so a gqf file's
// activation encodings apply to it unchanged: the rotation tables are computed in the graph
// (rope.cos and rope.sin, [1, AR, 1, head_dim], from the inputs by Concat, a sign multiply
// for sin, and Reshape), query heads are grouped by KV head ([kv_heads, heads/kv_heads, AR,
// head_dim], blk.L.q_groups) instead of repeating keys and values, and the cache is the
// past slots followed by the new keys (blk.L.k_cache, Concat) and values (blk.L.v_cache).
// past_key_{l}_in and _out belong to the point blk.L.k_rope (the cache stores quantized keys
// with their encoding), past_value_{l} to blk.L.v.

// Names of the deployment graph's inputs and constants.
const (
	InputAttentionMask = "attention_mask"
	InputCos           = "position_ids_cos"
	InputSin           = "position_ids_sin"
	ConstRopeSign      = "rope.sign" // [head_dim]: −1 in the first half of the rotated dimensions, +1 after
	// A model with sliding-window layers and a context longer than the window has a second
	// mask, the sliding layers' (the same layout, the positions Window or more before a
	// token's own masked too); one with a second rotary table (Gemma 3's sliding layers) has
	// its cos and sin too; partial rotary tables are padded to the head with cos 1, sin 0.
	InputAttentionMaskSWA = "attention_mask_sliding"
	InputCosLocal         = "position_ids_cos_local"
	InputSinLocal         = "position_ids_sin_local"
	ConstRopeCosPad       = "rope.cos_pad" // [1, 1, AR, head_dim − rotated]: ones
	ConstRopeSinPad       = "rope.sin_pad" // zeros
)

// RopeInputs names the cos and sin inputs of rotary table k.
func RopeInputs(k int) (cos, sin string) {
	if k == 1 {
		return InputCosLocal, InputSinLocal
	}
	return InputCos, InputSin
}

// PastKeyIn and the others name the KV cache inputs and outputs of layer l.
func PastKeyIn(l int) string    { return fmt.Sprintf("past_key_%d_in", l) }
func PastValueIn(l int) string  { return fmt.Sprintf("past_value_%d_in", l) }
func PastKeyOut(l int) string   { return fmt.Sprintf("past_key_%d_out", l) }
func PastValueOut(l int) string { return fmt.Sprintf("past_value_%d_out", l) }

// KVOptions shape the deployment graph.
type KVOptions struct {
	// AR is the number of new positions per run, Ctx the context: Ctx−AR past slots.
	AR, Ctx int
	// First and Last select the layers [First, Last) of one part; Last 0 means every layer
	// from First on.
	First, Last int
}

// LowerKV returns the deployment form of g (see above): AR in [1, Ctx), Ctx at most the
// model's context length, and a non-empty range of layers.
func (g *Graph) LowerKV(o KVOptions) (*Lowered, error) {
	s := g.Spec
	if o.Last == 0 {
		o.Last = s.Layers
	}
	switch {
	case o.AR < 1:
		return nil, fmt.Errorf("ar: must be at least 1, got %d", o.AR)
	case o.Ctx <= o.AR:
		return nil, fmt.Errorf("ctx: %d must exceed ar %d (the cache holds ctx−ar past positions)", o.Ctx, o.AR)
	case o.Ctx > s.Context:
		return nil, fmt.Errorf("ctx: %d exceeds the model's context length %d", o.Ctx, s.Context)
	case o.First < 0 || o.First >= o.Last || o.Last > s.Layers:
		return nil, fmt.Errorf("layers [%d, %d): not a range of the model's %d layers", o.First, o.Last, s.Layers)
	}

	return g.lower(o.AR, &o)
}

// nodes returns the nodes of the part: its layers, the embedding in the first part, the tail
// in the last.
func (o *KVOptions) nodes(g *Graph) []Node {
	var out []Node
	for _, n := range g.Nodes {
		switch {
		case n.Layer >= 0 && (n.Layer < o.First || n.Layer >= o.Last):
		case n.Layer < 0 && n.Tail && o.Last < g.Spec.Layers:
		case n.Layer < 0 && !n.Tail && o.First > 0:
		default:
			out = append(out, n)
		}
	}
	return out
}

// kvInputs declares the part's inputs, emits the rotation tables and returns the constants.
func (b *lowerer) kvInputs(g *Graph, o *KVOptions, nodes []Node) []Const {
	s := g.Spec
	ar, ctx, hd := int64(o.AR), int64(o.Ctx), int64(s.HeadDim)
	produced, dims := map[string]bool{}, map[string]int{}
	for _, n := range g.Nodes {
		dims[n.Name] = n.Dim
	}
	for _, n := range nodes {
		produced[n.Name] = true
	}
	input := func(name string, t gqf.DataType, shape ...int64) {
		b.g.Inputs = append(b.g.Inputs, &gqf.Value{Name: name, Dtype: t, Shape: shape})
		b.shapes[name] = shape
		if b.point[name] == "" {
			b.point[name] = name
		}
	}
	for _, n := range nodes {
		for _, in := range n.Inputs {
			switch {
			case in == TokensValue:
				input(InputIDs, gqf.DataType_INT32, 1, ar)
			case !produced[in] && b.shapes[in] == nil:
				input(in, gqf.DataType_F32, 1, ar, int64(dims[in]))
			}
		}
	}
	input(InputAttentionMask, gqf.DataType_F32, 1, 1, ar, ctx)
	if w := g.Window(); w > 0 && w < o.Ctx {
		input(InputAttentionMaskSWA, gqf.DataType_F32, 1, 1, ar, ctx)
	}
	rd := int64(g.Ropes[0].Dims)
	for k := range g.Ropes {
		c, sn := RopeInputs(k)
		input(c, gqf.DataType_F32, 1, 1, ar, rd/2)
		input(sn, gqf.DataType_F32, 1, 1, ar, rd/2)
	}
	for l := o.First; l < o.Last; l++ {
		input(PastKeyIn(l), gqf.DataType_F32, int64(s.KVHeads), 1, hd, ctx-ar)
		input(PastValueIn(l), gqf.DataType_F32, int64(s.KVHeads), 1, ctx-ar, hd)
	}
	table := []int64{1, 1, ar, hd}
	rows := []int64{1, ar, 1, hd}
	var consts []Const
	var cosPad, sinPad []string
	if rd < hd { // partial rotary: cos 1 and sin 0 past the rotated dimensions
		pad := make([]float32, ar*(hd-rd))
		ones := make([]float32, len(pad))
		for i := range ones {
			ones[i] = 1
		}
		shape := []int64{1, 1, ar, hd - rd}
		consts = append(consts, Const{Name: ConstRopeCosPad, Shape: shape, F: ones}, Const{Name: ConstRopeSinPad, Shape: shape, F: pad})
		cosPad, sinPad = []string{ConstRopeCosPad}, []string{ConstRopeSinPad}
	}
	for k := range g.Ropes {
		cIn, sIn := RopeInputs(k)
		cOut, sOut, pre := ConstRopeCos, ConstRopeSin, "rope."
		if k == 1 {
			cOut, sOut, pre = ConstRopeLocCos, ConstRopeLocSin, "rope_local."
		}
		cc := b.move(gqf.OpConcat, pre+"cos_cat", cIn, table, append([]string{cIn, cIn}, cosPad...), attrInt("axis", 3))
		b.move(gqf.OpReshape, cOut, cc, rows, []string{cc}, attrInts("shape", rows...))
		sc := b.move(gqf.OpConcat, pre+"sin_cat", sIn, table, append([]string{sIn, sIn}, sinPad...), attrInt("axis", 3))
		ss := b.emit(gqf.OpElementWiseMultiply, pre+"sin_signed", "", table, []string{sc, ConstRopeSign})
		b.move(gqf.OpReshape, sOut, ss, rows, []string{ss}, attrInts("shape", rows...))
	}
	sign := make([]float32, hd)
	for j := range sign {
		sign[j] = 1
		if int64(j) < rd/2 {
			sign[j] = -1
		}
	}
	return append(consts,
		Const{Name: ConstRopeRot, Shape: []int64{hd}, I: ropeRot(int(hd), int(rd))},
		Const{Name: ConstRopeSign, Shape: []int64{hd}, F: sign})
}

// attentionKV emits an attention node over the KV cache.
func (b *lowerer) attentionKV(n *Node, o *KVOptions, qh, kh, vh string) {
	p := n.prefix()
	hd := b.shapes[qh][3]
	nh, nkv := int64(n.Heads), int64(n.KVHeads)
	grp := nh / nkv
	ar, ctx := int64(o.AR), int64(o.Ctx)
	l := n.Layer
	qt := b.move(gqf.OpTranspose, p+"q_t", qh, []int64{1, nh, ar, hd}, []string{qh}, attrInts("perm", 0, 2, 1, 3))
	qg := b.move(gqf.OpReshape, p+"q_groups", qt, []int64{nkv, grp, ar, hd}, []string{qt}, attrInts("shape", nkv, grp, ar, hd))
	b.point[PastKeyIn(l)], b.point[PastValueIn(l)] = b.point[kh], b.point[vh]
	kOut := b.move(gqf.OpTranspose, PastKeyOut(l), kh, []int64{nkv, 1, hd, ar}, []string{kh}, attrInts("perm", 2, 0, 3, 1))
	vOut := b.move(gqf.OpTranspose, PastValueOut(l), vh, []int64{nkv, 1, ar, hd}, []string{vh}, attrInts("perm", 2, 0, 1, 3))
	kAll := b.move(gqf.OpConcat, p+"k_cache", kh, []int64{nkv, 1, hd, ctx}, []string{PastKeyIn(l), kOut}, attrInt("axis", 3))
	vAll := b.move(gqf.OpConcat, p+"v_cache", vh, []int64{nkv, 1, ctx, hd}, []string{PastValueIn(l), vOut}, attrInt("axis", 2))
	scores := []int64{nkv, grp, ar, ctx}
	kq := b.emit(gqf.OpMatMul, p+pointKQ, "", scores, []string{qg, kAll})
	kq = b.emit(gqf.OpElementWiseMultiply, p+pointKQScaled, "", scores, []string{kq, ConstScale})
	kq = b.softcap(n, p, kq, scores)
	mask := InputAttentionMask
	if n.Window > 0 && n.Window < o.Ctx {
		mask = InputAttentionMaskSWA
	}
	kq = b.emit(gqf.OpElementWiseAdd, p+pointKQMasked, "", scores, []string{kq, mask})
	kq = b.emit(gqf.OpSoftmax, p+pointSoftmax, "", scores, []string{kq}, attrInt("axis", -1))
	kqv := b.emit(gqf.OpMatMul, p+"kqv", n.Name, []int64{nkv, grp, ar, hd}, []string{kq, vAll})
	kqv = b.move(gqf.OpReshape, p+"kqv_heads", kqv, []int64{1, nh, ar, hd}, []string{kqv}, attrInts("shape", 1, nh, ar, hd))
	kqv = b.move(gqf.OpTranspose, p+"kqv_t", kqv, []int64{1, ar, nh, hd}, []string{kqv}, attrInts("perm", 0, 2, 1, 3))
	b.move(gqf.OpReshape, n.Name, kqv, []int64{1, ar, nh * hd}, []string{kqv}, attrInts("shape", 0, ar, nh*hd))
}

// kvOutputs declares the part's outputs: the logits (the last part) or the values later
// parts read, then each layer's new keys and values.
func (b *lowerer) kvOutputs(g *Graph, o *KVOptions, nodes []Node) {
	in := map[string]bool{}
	for _, n := range nodes {
		in[n.Name] = true
	}
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		if in[n.Name] {
			continue
		}
		for _, x := range n.Inputs {
			if in[x] && !seen[x] {
				seen[x] = true
				b.g.Outputs = append(b.g.Outputs, x)
			}
		}
	}
	if in[g.Output] {
		b.g.Outputs = append(b.g.Outputs, g.Output)
	}
	for l := o.First; l < o.Last; l++ {
		b.g.Outputs = append(b.g.Outputs, PastKeyOut(l), PastValueOut(l))
	}
}
