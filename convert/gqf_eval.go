package convert

import (
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/gqf"
)

// A small reference evaluator of gqf graphs: dense float32 tensors, one op at a time, in the
// order of the nodes. It computes every activation of the graph, which is what calibration
// needs (the runtime's hooks see only some of them), and serves as an independent check of
// the graph against the runtime. It favours clarity over speed.

// value is a dense tensor: float32 data, or int64 indices.
type value struct {
	shape []int
	f     []float32
	i     []int64
}

func (v *value) size() int { return numel(v.shape) }

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// evalGraph runs g over the given inputs and tensors (weights and constants by name), calling
// observe with every node's output as it is produced. It returns the graph outputs.
func evalGraph(g *gqf.Graph, inputs, tensors map[string]*value, observe func(name string, v *value)) (map[string]*value, error) {
	env := map[string]*value{}
	get := func(name string) (*value, error) {
		if v, ok := env[name]; ok {
			return v, nil
		}
		if v, ok := inputs[name]; ok {
			return v, nil
		}
		if v, ok := tensors[name]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("graph: %s: no such tensor", name)
	}
	for _, nd := range g.Nodes {
		in := make([]*value, len(nd.Inputs))
		for i, name := range nd.Inputs {
			v, err := get(name)
			if err != nil {
				return nil, err
			}
			in[i] = v
		}
		out, err := evalNode(nd, in)
		if err != nil {
			return nil, fmt.Errorf("graph: node %s (%s): %v", nd.Name, nd.Op, err)
		}
		env[nd.Outputs[0]] = out
		if observe != nil {
			observe(nd.Outputs[0], out)
		}
	}
	res := map[string]*value{}
	for _, o := range g.Outputs {
		v, err := get(o)
		if err != nil {
			return nil, err
		}
		res[o] = v
	}
	return res, nil
}

// attr returns a node attribute by name.
func attr(nd *gqf.Node, name string) *gqf.Attribute {
	for _, a := range nd.Attrs {
		if a.Name == name {
			return a
		}
	}
	return &gqf.Attribute{}
}

// normAxis turns a negative axis into a positive one.
func normAxis(a, rank int) int {
	if a < 0 {
		a += rank
	}
	return a
}

// evalNode computes one node.
func evalNode(nd *gqf.Node, in []*value) (*value, error) {
	need := map[string]int{"Gather": 2, "RmsNorm": 2, "FullyConnected": 2, "MatMul": 2, "ElementWiseAdd": 2,
		"ElementWiseMultiply": 2, "Softmax": 1, "Reshape": 1, "Transpose": 1, "Sigmoid": 1}
	n, ok := need[nd.Op]
	if !ok {
		return nil, fmt.Errorf("op not supported by the evaluator")
	}
	if len(in) != n {
		return nil, fmt.Errorf("%d inputs, want %d", len(in), n)
	}
	switch nd.Op {
	case "Gather":
		return gather(in[0], in[1], int(attr(nd, "axis").I))
	case "RmsNorm":
		return rmsNormOp(in[0], in[1], float64(attr(nd, "epsilon").F))
	case "FullyConnected":
		return fullyConnected(in[0], in[1])
	case "MatMul":
		return matMul(in[0], in[1])
	case "ElementWiseAdd":
		return broadcast(in[0], in[1], func(a, b float32) float32 { return a + b })
	case "ElementWiseMultiply":
		return broadcast(in[0], in[1], func(a, b float32) float32 { return a * b })
	case "Softmax":
		return softmaxOp(in[0], int(attr(nd, "axis").I))
	case "Reshape":
		return reshape(in[0], attr(nd, "shape").Ints)
	case "Transpose":
		return transpose(in[0], attr(nd, "perm").Ints)
	case "Sigmoid":
		out := &value{shape: in[0].shape, f: make([]float32, len(in[0].f))}
		for i, x := range in[0].f {
			out.f[i] = float32(1 / (1 + math.Exp(-float64(x))))
		}
		return out, nil
	}
	return nil, fmt.Errorf("op not supported by the evaluator")
}

// gather takes the slices of data at idx along axis (ONNX Gather).
func gather(data, idx *value, axis int) (*value, error) {
	if data.f == nil || idx.i == nil {
		return nil, fmt.Errorf("want float data and int64 indices")
	}
	axis = normAxis(axis, len(data.shape))
	if axis < 0 || axis >= len(data.shape) {
		return nil, fmt.Errorf("axis %d out of range for shape %v", axis, data.shape)
	}
	outer, dim, inner := numel(data.shape[:axis]), data.shape[axis], numel(data.shape[axis+1:])
	shape := append(append(append([]int{}, data.shape[:axis]...), idx.shape...), data.shape[axis+1:]...)
	out := &value{shape: shape, f: make([]float32, outer*len(idx.i)*inner)}
	for o := 0; o < outer; o++ {
		for j, k := range idx.i {
			if k < 0 || int(k) >= dim {
				return nil, fmt.Errorf("index %d out of range [0, %d)", k, dim)
			}
			copy(out.f[(o*len(idx.i)+j)*inner:(o*len(idx.i)+j+1)*inner], data.f[(o*dim+int(k))*inner:(o*dim+int(k)+1)*inner])
		}
	}
	return out, nil
}

// rmsNormOp normalises the last axis as the runtime does (sum of squares in float64).
func rmsNormOp(x, w *value, eps float64) (*value, error) {
	d := x.shape[len(x.shape)-1]
	if len(w.f) != d {
		return nil, fmt.Errorf("gamma of %d values for rows of %d", len(w.f), d)
	}
	out := &value{shape: x.shape, f: make([]float32, len(x.f))}
	for r := 0; r < len(x.f)/d; r++ {
		xr, dr := x.f[r*d:(r+1)*d], out.f[r*d:(r+1)*d]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(ss/float64(d)+eps))
		for i, v := range xr {
			dr[i] = float32(v*scale) * w.f[i]
		}
	}
	return out, nil
}

// dot32 is a float32 dot product with four partial sums.
func dot32(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// fullyConnected computes x·Wᵀ for x [..., in] and W [out, in].
func fullyConnected(x, w *value) (*value, error) {
	if len(w.shape) != 2 || x.shape[len(x.shape)-1] != w.shape[1] {
		return nil, fmt.Errorf("input %v and weight %v do not fit", x.shape, w.shape)
	}
	in, outN := w.shape[1], w.shape[0]
	rows := len(x.f) / in
	shape := append(append([]int{}, x.shape[:len(x.shape)-1]...), outN)
	out := &value{shape: shape, f: make([]float32, rows*outN)}
	for r := 0; r < rows; r++ {
		xr := x.f[r*in : (r+1)*in]
		for o := 0; o < outN; o++ {
			out.f[r*outN+o] = dot32(xr, w.f[o*in:(o+1)*in])
		}
	}
	return out, nil
}

// matMul multiplies matrices over equal leading dimensions: [..., M, K]·[..., K, N].
func matMul(a, b *value) (*value, error) {
	ra, rb := len(a.shape), len(b.shape)
	if ra != rb || ra < 2 {
		return nil, fmt.Errorf("shapes %v and %v do not fit", a.shape, b.shape)
	}
	for i := 0; i < ra-2; i++ {
		if a.shape[i] != b.shape[i] {
			return nil, fmt.Errorf("shapes %v and %v do not fit", a.shape, b.shape)
		}
	}
	M, K, N := a.shape[ra-2], a.shape[ra-1], b.shape[rb-1]
	if b.shape[rb-2] != K {
		return nil, fmt.Errorf("shapes %v and %v do not fit", a.shape, b.shape)
	}
	batch := numel(a.shape[:ra-2])
	shape := append(append([]int{}, a.shape[:ra-2]...), M, N)
	out := &value{shape: shape, f: make([]float32, batch*M*N)}
	col := make([]float32, K)
	for bt := 0; bt < batch; bt++ {
		am, bm, om := a.f[bt*M*K:], b.f[bt*K*N:], out.f[bt*M*N:]
		for n := 0; n < N; n++ {
			for k := 0; k < K; k++ {
				col[k] = bm[k*N+n]
			}
			for m := 0; m < M; m++ {
				om[m*N+n] = dot32(am[m*K:(m+1)*K], col)
			}
		}
	}
	return out, nil
}

// broadcast applies op elementwise with numpy broadcasting.
func broadcast(a, b *value, op func(a, b float32) float32) (*value, error) {
	r := max(len(a.shape), len(b.shape))
	pad := func(s []int) []int {
		p := make([]int, r)
		for i := range p {
			p[i] = 1
		}
		copy(p[r-len(s):], s)
		return p
	}
	as, bs := pad(a.shape), pad(b.shape)
	shape := make([]int, r)
	for i := range shape {
		switch {
		case as[i] == bs[i] || bs[i] == 1:
			shape[i] = as[i]
		case as[i] == 1:
			shape[i] = bs[i]
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", a.shape, b.shape)
		}
	}
	strides := func(s []int) []int {
		st := make([]int, r)
		acc := 1
		for i := r - 1; i >= 0; i-- {
			if s[i] != 1 {
				st[i] = acc
			}
			acc *= s[i]
		}
		return st
	}
	sa, sb := strides(as), strides(bs)
	out := &value{shape: shape, f: make([]float32, numel(shape))}
	idx := make([]int, r)
	ia, ib := 0, 0
	for o := range out.f {
		out.f[o] = op(a.f[ia], b.f[ib])
		for d := r - 1; d >= 0; d-- {
			idx[d]++
			ia += sa[d]
			ib += sb[d]
			if idx[d] < shape[d] {
				break
			}
			ia -= sa[d] * shape[d]
			ib -= sb[d] * shape[d]
			idx[d] = 0
		}
	}
	return out, nil
}

// softmaxOp normalises the last axis (the maximum subtracted first).
func softmaxOp(x *value, axis int) (*value, error) {
	if normAxis(axis, len(x.shape)) != len(x.shape)-1 {
		return nil, fmt.Errorf("softmax over axis %d: only the last axis is supported", axis)
	}
	d := x.shape[len(x.shape)-1]
	out := &value{shape: x.shape, f: append([]float32(nil), x.f...)}
	for r := 0; r < len(x.f)/d; r++ {
		row := out.f[r*d : (r+1)*d]
		mx := float32(math.Inf(-1))
		for _, v := range row {
			mx = max(mx, v)
		}
		var sum float64
		for i, v := range row {
			e := math.Exp(float64(v - mx))
			row[i] = float32(e)
			sum += e
		}
		inv := float32(1 / sum)
		for i := range row {
			row[i] *= inv
		}
	}
	return out, nil
}

// reshape gives x a new shape (ONNX rules: 0 copies the input dimension, −1 is inferred).
func reshape(x *value, target []int64) (*value, error) {
	shape := make([]int, len(target))
	infer, known := -1, 1
	for i, d := range target {
		switch {
		case d == 0 && i < len(x.shape):
			shape[i] = x.shape[i]
		case d == -1 && infer < 0:
			infer = i
			continue
		case d > 0:
			shape[i] = int(d)
		default:
			return nil, fmt.Errorf("bad target shape %v", target)
		}
		known *= shape[i]
	}
	if infer >= 0 && known > 0 {
		shape[infer] = x.size() / known
	}
	if numel(shape) != x.size() {
		return nil, fmt.Errorf("cannot reshape %v to %v", x.shape, target)
	}
	return &value{shape: shape, f: x.f, i: x.i}, nil
}

// transpose permutes the axes of x.
func transpose(x *value, perm []int64) (*value, error) {
	r := len(x.shape)
	if len(perm) != r {
		return nil, fmt.Errorf("perm %v for shape %v", perm, x.shape)
	}
	inStride := make([]int, r)
	acc := 1
	for i := r - 1; i >= 0; i-- {
		inStride[i] = acc
		acc *= x.shape[i]
	}
	shape, st := make([]int, r), make([]int, r)
	for i, p := range perm {
		if p < 0 || int(p) >= r {
			return nil, fmt.Errorf("perm %v for shape %v", perm, x.shape)
		}
		shape[i], st[i] = x.shape[p], inStride[p]
	}
	out := &value{shape: shape, f: make([]float32, len(x.f))}
	idx := make([]int, r)
	src := 0
	for o := range out.f {
		out.f[o] = x.f[src]
		for d := r - 1; d >= 0; d-- {
			idx[d]++
			src += st[d]
			if idx[d] < shape[d] {
				break
			}
			src -= st[d] * shape[d]
			idx[d] = 0
		}
	}
	return out, nil
}
