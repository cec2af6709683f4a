package convert

import (
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/runtime/arch"
)

// The decoder graph of a gqf file, in QNN's op vocabulary, over a fixed length L with no KV
// cache: input_ids [batch, L] → logits [batch, L, vocab]. Activations are named as the
// runtime's Hooks.Activation names them where the runtime has the tensor ("blk.0.q",
// "blk.0.ffn_act", "logits"); the others are named after what they hold ("blk.0.kq_softmax").
//
// RoPE is expressed with Gather and element-wise ops, in the rotate-half (NeoX) layout of
// the HF weights the file stores:
//
//	rope(x) = x·cos + gather(x, rot)·sin±
//
// where rot swaps the two halves of each head and sin± is sin with the first half negated.
// Grouped-query attention repeats key and value heads with a Gather over the head axis. The
// causal mask adds maskValue above the diagonal before the softmax: a finite value keeps the
// masked scores inside a 16-bit activation range (Qualcomm's own LLM exports use −50 too).

// maskValue is added to the attention scores of future positions.
const maskValue = -50

// Graph constant names.
const (
	constRopeCos = "rope.cos"    // [L, 1, head_dim]
	constRopeSin = "rope.sin"    // [L, 1, head_dim], first half negated
	constRopeRot = "rope.rot"    // int64 [head_dim]: j ↦ j ± head_dim/2
	constMask    = "attn.mask"   // [L, L]: 0 on and below the diagonal, maskValue above
	constScale   = "attn.scale"  // [1]: 1/√head_dim
	constKVRep   = "attn.kv_rep" // int64 [heads]: the KV head of each query head
	inputIDs     = "input_ids"   // graph input, int64 [batch, L]
	outputLogits = "logits"      // graph output
	roleConstant = "constant"    // tensor role of graph constants
)

// graphConst is a constant tensor the graph needs besides the weights.
type graphConst struct {
	name  string
	shape []int64
	f     []float32 // float constants
	i     []int64   // index constants
}

// graphBuilder accumulates nodes and activation shapes.
type graphBuilder struct {
	g      *gqf.Graph
	shapes map[string][]int64
}

// node appends one node with one output of the given shape and returns the output's name.
func (b *graphBuilder) node(op, out string, shape []int64, inputs []string, attrs ...*gqf.Attribute) string {
	b.g.Nodes = append(b.g.Nodes, &gqf.Node{Name: out, Op: op, Inputs: inputs, Outputs: []string{out}, Attrs: attrs})
	b.g.Activations = append(b.g.Activations, &gqf.Value{Name: out, Dtype: gqf.DataType_F32, Shape: shape})
	b.shapes[out] = shape
	return out
}

func attrInt(name string, v int64) *gqf.Attribute     { return &gqf.Attribute{Name: name, I: v} }
func attrInts(name string, v ...int64) *gqf.Attribute { return &gqf.Attribute{Name: name, Ints: v} }
func attrFloat(name string, v float32) *gqf.Attribute { return &gqf.Attribute{Name: name, F: v} }

// buildGraph returns the decoder graph of spec over L positions and the constants it reads.
// Weights are read by their GGUF names; a tied output reads token_embd.weight.
func buildGraph(s *arch.Spec, L int) (*gqf.Graph, []graphConst) {
	b := &graphBuilder{g: &gqf.Graph{Name: "decoder", MaxLen: uint32(L)}, shapes: map[string][]int64{}}
	b.g.Inputs = []*gqf.Value{{Name: inputIDs, Dtype: gqf.DataType_INT64, Shape: []int64{1, int64(L)}}}
	b.g.Outputs = []string{outputLogits}
	consts := ropeConsts(s, L)
	l64, h64, hd := int64(L), int64(s.Hidden), int64(s.HeadDim)
	nh, nkv := int64(s.Heads), int64(s.KVHeads)
	eps := attrFloat("epsilon", float32(s.RMSEps))
	if nh != nkv {
		rep := make([]int64, nh)
		for h := range rep {
			rep[h] = int64(h) / (nh / nkv)
		}
		consts = append(consts, graphConst{name: constKVRep, shape: []int64{nh}, i: rep})
	}

	x := b.node("Gather", "token_embd", []int64{1, l64, h64}, []string{string(arch.TokenEmbd), inputIDs}, attrInt("axis", 0))
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		w := func(r arch.Role) string { return arch.TensorRef{Role: r, Layer: l}.GGUFName() }
		xn := b.node("RmsNorm", p+"attn_norm", []int64{1, l64, h64}, []string{x, w(arch.AttnNorm)}, eps)
		// proj is a fully connected layer with an optional bias; heads reshapes its output.
		proj := func(name string, weight, bias arch.Role, heads int64) string {
			shape := []int64{1, l64, heads * hd}
			if !s.QKVBias {
				return b.node("FullyConnected", p+name, shape, []string{xn, w(weight)})
			}
			y := b.node("FullyConnected", p+name+"_fc", shape, []string{xn, w(weight)})
			return b.node("ElementWiseAdd", p+name, shape, []string{y, w(bias)})
		}
		q := proj("q", arch.AttnQ, arch.AttnQBias, nh)
		k := proj("k", arch.AttnK, arch.AttnKBias, nkv)
		v := proj("v", arch.AttnV, arch.AttnVBias, nkv)
		// rope reshapes a projection to heads, applies the optional QK norm and rotates it.
		rope := func(name, in string, heads int64, norm arch.Role) string {
			shape := []int64{1, l64, heads, hd}
			t := b.node("Reshape", p+name+"_heads", shape, []string{in}, attrInts("shape", 0, l64, heads, hd))
			if s.QKNorm {
				t = b.node("RmsNorm", p+name+"_norm", shape, []string{t, w(norm)}, eps)
			}
			rot := b.node("Gather", p+name+"_rot", shape, []string{t, constRopeRot}, attrInt("axis", 3))
			c := b.node("ElementWiseMultiply", p+name+"_cos", shape, []string{t, constRopeCos})
			sn := b.node("ElementWiseMultiply", p+name+"_sin", shape, []string{rot, constRopeSin})
			return b.node("ElementWiseAdd", p+name+"_rope", shape, []string{c, sn})
		}
		qr := rope("q", q, nh, arch.AttnQNorm)
		kr := rope("k", k, nkv, arch.AttnKNorm)
		qt := b.node("Transpose", p+"q_t", []int64{1, nh, l64, hd}, []string{qr}, attrInts("perm", 0, 2, 1, 3))
		kt := b.node("Transpose", p+"k_t", []int64{1, nkv, hd, l64}, []string{kr}, attrInts("perm", 0, 2, 3, 1))
		vh := b.node("Reshape", p+"v_heads", []int64{1, l64, nkv, hd}, []string{v}, attrInts("shape", 0, l64, nkv, hd))
		vt := b.node("Transpose", p+"v_t", []int64{1, nkv, l64, hd}, []string{vh}, attrInts("perm", 0, 2, 1, 3))
		if nh != nkv {
			kt = b.node("Gather", p+"k_rep", []int64{1, nh, hd, l64}, []string{kt, constKVRep}, attrInt("axis", 1))
			vt = b.node("Gather", p+"v_rep", []int64{1, nh, l64, hd}, []string{vt, constKVRep}, attrInt("axis", 1))
		}
		scores := []int64{1, nh, l64, l64}
		kq := b.node("MatMul", p+"kq", scores, []string{qt, kt})
		kq = b.node("ElementWiseMultiply", p+"kq_scaled", scores, []string{kq, constScale})
		kq = b.node("ElementWiseAdd", p+"kq_masked", scores, []string{kq, constMask})
		kq = b.node("Softmax", p+"kq_softmax", scores, []string{kq}, attrInt("axis", -1))
		kqv := b.node("MatMul", p+"kqv", []int64{1, nh, l64, hd}, []string{kq, vt})
		kqv = b.node("Transpose", p+"kqv_t", []int64{1, l64, nh, hd}, []string{kqv}, attrInts("perm", 0, 2, 1, 3))
		kqv = b.node("Reshape", p+"kqv_out", []int64{1, l64, nh * hd}, []string{kqv}, attrInts("shape", 0, l64, nh*hd))
		hs := []int64{1, l64, h64}
		ao := b.node("FullyConnected", p+"attn_out", hs, []string{kqv, w(arch.AttnOut)})
		x = b.node("ElementWiseAdd", p+"ffn_inp", hs, []string{x, ao})
		fn := b.node("RmsNorm", p+"ffn_norm", hs, []string{x, w(arch.FFNNorm)}, eps)
		is := []int64{1, l64, int64(s.Intermediate)}
		gate := b.node("FullyConnected", p+"ffn_gate", is, []string{fn, w(arch.FFNGate)})
		up := b.node("FullyConnected", p+"ffn_up", is, []string{fn, w(arch.FFNUp)})
		sig := b.node("Sigmoid", p+"ffn_gate_sig", is, []string{gate})
		silu := b.node("ElementWiseMultiply", p+"ffn_silu", is, []string{gate, sig})
		act := b.node("ElementWiseMultiply", p+"ffn_act", is, []string{silu, up})
		fo := b.node("FullyConnected", p+"ffn_out", hs, []string{act, w(arch.FFNDown)})
		x = b.node("ElementWiseAdd", p+"out", hs, []string{x, fo})
	}
	xn := b.node("RmsNorm", "output_norm", []int64{1, l64, h64}, []string{x, string(arch.OutputNorm)}, eps)
	out := string(arch.Output)
	if s.Tied {
		out = string(arch.TokenEmbd)
	}
	b.node("FullyConnected", outputLogits, []int64{1, l64, int64(s.Vocab)}, []string{xn, out})

	mask := make([]float32, L*L)
	for i := 0; i < L; i++ {
		for j := i + 1; j < L; j++ {
			mask[i*L+j] = maskValue
		}
	}
	consts = append(consts,
		graphConst{name: constMask, shape: []int64{l64, l64}, f: mask},
		graphConst{name: constScale, shape: []int64{1}, f: []float32{float32(1 / math.Sqrt(float64(s.HeadDim)))}})
	return b.g, consts
}

// ropeConsts computes the rotation tables as the runtime does (transformers' float32
// inv_freq with llama3 frequency factors and linear scaling folded in).
func ropeConsts(s *arch.Spec, L int) []graphConst {
	hd, half := s.HeadDim, s.HeadDim/2
	factors := arch.RopeFreqFactors(s)
	inv := make([]float32, half)
	for i := range inv {
		exp := float32(2*i) / float32(hd)
		f := float32(1 / math.Pow(s.RopeTheta, float64(exp)))
		if factors != nil {
			f /= factors[i]
		}
		if sc := s.RopeScaling; sc != nil && sc.Type == "linear" && sc.Factor > 0 {
			f = float32(float64(f) / sc.Factor)
		}
		inv[i] = f
	}
	cos, sin := make([]float32, L*hd), make([]float32, L*hd)
	for p := 0; p < L; p++ {
		for i, f := range inv {
			a := float64(float32(p) * f)
			c, sn := float32(math.Cos(a)), float32(math.Sin(a))
			cos[p*hd+i], cos[p*hd+half+i] = c, c
			sin[p*hd+i], sin[p*hd+half+i] = -sn, sn
		}
	}
	rot := make([]int64, hd)
	for j := range rot {
		rot[j] = int64((j + half) % hd)
	}
	shape := []int64{int64(L), 1, int64(hd)}
	return []graphConst{
		{name: constRopeCos, shape: shape, f: cos},
		{name: constRopeSin, shape: shape, f: sin},
		{name: constRopeRot, shape: []int64{int64(hd)}, i: rot},
	}
}
