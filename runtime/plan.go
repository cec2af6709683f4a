package runtime

import (
	"fmt"

	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// The runtime executes the model's arch.Graph. At load, compile turns the graph into a plan:
// every value gets a buffer slot (reused once the value is dead, and in place where an
// elementwise node may overwrite its input), and the nodes become steps:
//
//   - a linear step: the consecutive linear nodes that read one input (q, k and v; gate and
//     up), one pool job over the rows of them all (linear);
//   - an attention step: the KV cache update and attention (attention.go);
//   - a row step: consecutive row-wise nodes (embed, rms_norm, the biases of the linear
//     nodes before it, rope, add, swiglu) fused into one pool job over the tokens, each
//     worker doing every node for its tokens (rowops.go);
//   - a node step: one node on its own, with its points observed (Hooks.Activation) or
//     quantized (a gqf file's activation encodings): see observe.go.
//
// Tail nodes (the final norm and the output) run on the positions whose logits are wanted.

// slot is one working buffer of a State: n rows of width values.
type slot struct{ width int }

// value is where a value of the graph lives.
type value struct {
	slot int
	dim  int
}

// stepKind says how a step runs.
type stepKind uint8

const (
	stepRows stepKind = iota
	stepLinear
	stepAttention
	stepNode
)

// step is one unit of execution.
type step struct {
	kind  stepKind
	rows  rowOps    // stepRows
	lin   []linOut  // stepLinear: the products, all reading in
	in    value     // stepLinear: the input
	node  *execNode // stepAttention, stepNode
	tail  bool      // runs on the wanted positions only
	layer int
}

// linOut is one product of a linear step.
type linOut struct {
	out    value
	w      *kernels.Matrix
	weight string // GGUF name, for LinearInput
	dynX   bool   // the input is quantized per token for w (execNode.dynX)
}

// execNode is a graph node bound to its weights and buffers.
type execNode struct {
	n   *arch.Node
	out value
	in  []value
	w   *kernels.Matrix // linear
	// exps are a moe node's gate, up and down matrices, one per expert, and expNames the
	// names its experts' inputs take (arch.ExpertWeight).
	exps     [3][]*kernels.Matrix
	expNames [3][]string
	vec      []float32 // rms_norm weight
	bias     []float32 // linear
	points   []string  // n.Points()
	// dynX reports, for a linear node, that its input is quantized with the file's run-time
	// encoding of linear inputs before the product (w's kernels do not do it themselves).
	dynX bool
	// self is the node's own row op without its value's encoding, for a node step
	// (runNode): embed, rms_norm, rope, add, and the bias of a linear node that has one.
	self rowOps
	// quant holds the static encoding of each point (nil: float), from a gqf file.
	quant []*qdq
	// observed marks the points handed to Hooks.Activation; observe is set when any is.
	observed []bool
	observe  bool
	// internal reports whether a point before the value is quantized (or modified by a hook):
	// the node then runs in its primitive form (observe.go).
	internal bool
}

// plan is the compiled graph.
type plan struct {
	steps []step
	slots []slot
	nodes []*execNode
	// output is the logits' node.
	output *execNode
	// vals are the graph's values by name (EvalBlocks reads the residual stream's).
	vals map[string]value
	// bareOutput reports that the logits are one linear step with no observed or quantized
	// point: State.SkipLogits can skip it.
	bareOutput bool
	// batches reports that Model.EvalBatch can evaluate sequences together: every attention
	// is a stepAttention (none in the primitive form).
	batches bool
}

// compile builds the plan of m's graph. observed reports which points Hooks.Activation
// receives (nil: none), modifies (nil: none) which it changes; quant maps points to encodings.
func (m *Model) compile(g *arch.Graph, observed, modifies func(string) bool, quant map[string]*qdq) (*plan, error) {
	p := &plan{}
	// Last use of every value, in node order (the graph output lives to the end).
	last := map[string]int{}
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			last[in] = i
		}
	}
	last[g.Output] = len(g.Nodes)
	vals := map[string]value{}
	var free []int
	alloc := func(dim int) int {
		best := -1
		for i, s := range free {
			if best < 0 || abs(p.slots[s].width-dim) < abs(p.slots[free[best]].width-dim) {
				best = i
			}
		}
		if best < 0 {
			p.slots = append(p.slots, slot{width: dim})
			return len(p.slots) - 1
		}
		s := free[best]
		free = append(free[:best], free[best+1:]...)
		p.slots[s].width = max(p.slots[s].width, dim)
		return s
	}
	release := func(i int, keep int) {
		n := &g.Nodes[i]
		seen := map[string]bool{}
		for _, in := range n.Inputs {
			if in == arch.TokensValue || seen[in] {
				continue
			}
			seen[in] = true
			if v, ok := vals[in]; ok && last[in] == i && v.slot != keep {
				free = append(free, v.slot)
			}
		}
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		en := &execNode{n: n, points: n.Points()}
		for _, in := range n.Inputs {
			if in == arch.TokensValue {
				continue
			}
			v, ok := vals[in]
			if !ok {
				return nil, fmt.Errorf("graph: node %s reads %s, which no earlier node produces", n.Name, in)
			}
			en.in = append(en.in, v)
		}
		// In place: an elementwise node may write over its first input when that dies here.
		slotOut := -1
		switch n.Op {
		case arch.OpAdd, arch.OpRope, arch.OpSwiGLU, arch.OpGeGLU, arch.OpSoftcap:
			if first := n.Inputs[0]; last[first] == i && vals[first].dim == n.Dim {
				slotOut = vals[first].slot
			}
		case arch.OpRMSNorm:
			if first := n.Inputs[0]; n.Heads > 0 && last[first] == i {
				slotOut = vals[first].slot
			}
		}
		if n.Name == g.Output {
			slotOut = -2 // the logits are the caller's slice
		}
		if slotOut == -1 {
			slotOut = alloc(n.Dim)
		}
		release(i, slotOut)
		en.out = value{slot: slotOut, dim: n.Dim}
		vals[n.Name] = en.out
		if err := m.bind(en); err != nil {
			return nil, err
		}
		for _, pt := range en.points {
			e := quant[pt]
			en.quant = append(en.quant, e)
		}
		en.observed = make([]bool, len(en.points))
		for k, pt := range en.points {
			en.observed[k] = observed != nil && observed(pt)
			en.observe = en.observe || en.observed[k]
		}
		for k, e := range en.quant[:len(en.quant)-1] {
			if e != nil || (en.observed[k] && modifies != nil && modifies(en.points[k])) {
				en.internal = true
			}
		}
		en.self = selfOp(en)
		p.nodes = append(p.nodes, en)
		if n.Name == g.Output {
			p.output = en
		}
	}
	p.steps = schedule(p.nodes, m.blocks)
	p.vals = vals
	p.batches = true
	for _, st := range p.steps {
		if st.kind == stepLinear && st.tail && len(st.lin) == 1 && st.lin[0].out == p.output.out {
			p.bareOutput = true
		}
		if st.kind == stepNode && st.node.n.Op == arch.OpAttention {
			p.batches = false // attentionNode: one sequence's scores
		}
	}
	return p, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// selfOp makes a node's own row op, without its value's encoding (runNode applies the
// encodings of the points).
func selfOp(en *execNode) rowOps {
	switch en.n.Op {
	case arch.OpLinear:
		if en.bias != nil {
			return newRowOps([]rowOp{{kind: opBias, node: en, out: en.out}})
		}
	case arch.OpEmbed, arch.OpRMSNorm, arch.OpRope, arch.OpAdd:
		op := newRowOp(en)
		op.q = nil
		return newRowOps([]rowOp{op})
	}
	return rowOps{}
}

// bind attaches a node's weights.
func (m *Model) bind(en *execNode) error {
	n := en.n
	switch n.Op {
	case arch.OpLinear:
		en.w = m.mats[n.Weight]
		if en.w == nil {
			return fmt.Errorf("graph: node %s: weight %s is not loaded", n.Name, n.Weight)
		}
		if en.w.Rows != n.Dim {
			return fmt.Errorf("graph: node %s: weight %s has %d rows, the node %d values", n.Name, n.Weight, en.w.Rows, n.Dim)
		}
		en.dynX = m.dyn != nil && !m.dynInKernel[en.w]
		if n.Bias != "" {
			if en.bias = m.vecs[n.Bias]; len(en.bias) != n.Dim {
				return fmt.Errorf("graph: node %s: bias %s: %d values, want %d", n.Name, n.Bias, len(en.bias), n.Dim)
			}
		}
	case arch.OpRMSNorm:
		want := n.Dim
		if n.Heads > 0 {
			want = n.Dim / n.Heads
		}
		if en.vec = m.vecs[n.Weight]; len(en.vec) != want {
			return fmt.Errorf("graph: node %s: weight %s: %d values, want %d", n.Name, n.Weight, len(en.vec), want)
		}
	case arch.OpEmbed:
		if m.embd == nil || m.embd.cols != n.Dim {
			return fmt.Errorf("graph: node %s: embedding %s is not loaded with %d columns", n.Name, n.Weight, n.Dim)
		}
	case arch.OpMoE:
		if len(en.in) != 2 || en.in[1].dim != n.Experts || n.Used < 1 || n.Used > n.Experts {
			return fmt.Errorf("graph: node %s: routing %d of %d experts from %d logits", n.Name, n.Used, n.Experts, en.in[1].dim)
		}
		cols := en.in[0].dim
		for i, st := range []string{n.GateExps, n.UpExps, n.DownExps} {
			ws := m.experts[st]
			rows, c := n.Inner, cols
			if i == 2 {
				rows, c = n.Dim, n.Inner
			}
			if len(ws) != n.Experts {
				return fmt.Errorf("graph: node %s: %s holds %d experts, want %d", n.Name, st, len(ws), n.Experts)
			}
			for _, w := range ws {
				if w.Rows != rows || w.Cols != c {
					return fmt.Errorf("graph: node %s: %s: experts of %d×%d, want %d×%d", n.Name, st, w.Rows, w.Cols, rows, c)
				}
			}
			en.exps[i] = ws
			en.expNames[i] = make([]string, len(ws))
			for e := range ws {
				en.expNames[i][e] = arch.ExpertWeight(st, e)
			}
		}
	}
	return nil
}

// inputName is the name LinearInput gets for a linear node's input: its weight's, and
// "output.weight" for the output layer, tied or not (the statistics' key for it, as in
// llama.cpp's imatrix).
func (en *execNode) inputName() string {
	if en.n.Tail {
		return string(arch.Output)
	}
	return en.n.Weight
}

// fusable reports whether a node runs as a row op (rowops.go) inside a row step.
func (en *execNode) fusable() bool {
	if en.observe || en.internal {
		return false
	}
	switch en.n.Op {
	case arch.OpEmbed, arch.OpRMSNorm, arch.OpRope, arch.OpAdd, arch.OpSwiGLU, arch.OpGeGLU, arch.OpSoftcap:
		return true
	}
	return false
}

// schedule groups the nodes into steps. With blocks, no row step spans two blocks (or a block
// and the embedding or the tail), so that every step has one layer (EvalBlocks).
func schedule(nodes []*execNode, blocks bool) []step {
	var steps []step
	var rows []rowOp
	rowsTail, rowsLayer := false, -1
	flush := func() {
		if len(rows) > 0 {
			steps = append(steps, step{kind: stepRows, rows: newRowOps(rows), tail: rowsTail, layer: rowsLayer})
			rows = nil
		}
	}
	for i := 0; i < len(nodes); i++ {
		en := nodes[i]
		n := en.n
		switch {
		case n.Op == arch.OpLinear && !en.observe && !en.internal:
			flush()
			st := step{kind: stepLinear, in: en.in[0], tail: n.Tail, layer: n.Layer}
			var biases []rowOp
			for ; i < len(nodes); i++ {
				e := nodes[i]
				if e.n.Op != arch.OpLinear || e.observe || e.internal || e.n.Inputs[0] != n.Inputs[0] || e.n.Tail != n.Tail {
					break
				}
				st.lin = append(st.lin, linOut{out: e.out, w: e.w, weight: e.inputName(), dynX: e.dynX})
				if e.bias != nil || e.quant[len(e.quant)-1] != nil {
					biases = append(biases, rowOp{kind: opBias, node: e, out: e.out, q: e.quant[len(e.quant)-1]})
				}
			}
			i--
			steps = append(steps, st)
			rows, rowsTail, rowsLayer = biases, n.Tail, n.Layer
		case en.fusable():
			if len(rows) > 0 && (rowsTail != n.Tail || (blocks && rowsLayer != n.Layer)) {
				flush()
			}
			rowsTail, rowsLayer = n.Tail, n.Layer
			rows = append(rows, newRowOp(en))
		case n.Op == arch.OpAttention && !en.observe && !en.internal:
			flush()
			steps = append(steps, step{kind: stepAttention, node: en, layer: n.Layer})
			if en.quant[len(en.quant)-1] != nil {
				rows = append(rows, rowOp{kind: opQDQ, node: en, out: en.out, q: en.quant[len(en.quant)-1]})
				rowsTail, rowsLayer = false, n.Layer
			}
		default:
			flush()
			steps = append(steps, step{kind: stepNode, node: en, tail: n.Tail, layer: n.Layer})
		}
	}
	flush()
	return steps
}
