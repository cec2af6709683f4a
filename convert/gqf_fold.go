package convert

import (
	"fmt"
	"math"
	goruntime "runtime"
	"sync"

	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// Input-channel scalings folded into the model before quantization (AWQ, SmoothQuant). A
// layer computes x·Wᵀ; with its input divided by s per channel and W's columns multiplied by s
// the product is unchanged, and the division is folded into whatever produces x:
//
//	attn_norm → q, k, v        the RMSNorm weight is divided by s
//	ffn_norm → gate, up        the RMSNorm weight is divided by s
//	v → attn_output (AWQ)      v's rows (and bias) are divided by s: attention mixes positions
//	                           linearly, so kqv_out is divided by s too (heads = kv_heads only)
//	up → down (AWQ)            up's rows are divided by s: ffn_act = silu(gate)·up is linear in up
//
// as llm-awq's auto_scale does for Llama (and SmoothQuant's smooth_ln_fcs for the norms). The
// scales of a group are searched from the original weights, in the order attention, then MLP.

// foldGroup is one scaling: the layers that read one input, the statistics key of that input,
// and the tensors its division folds into (rows or vector entries divided by s).
type foldGroup struct {
	label   string
	targets []string // weights whose columns are multiplied by s
	into    []string // tensors divided by s (a norm vector; or rows of a weight and its bias)
}

// foldGroups lists the scalings of the method for layer l.
func foldGroups(spec *arch.Spec, l int, awq bool) []foldGroup {
	n := func(r arch.Role) string { return arch.TensorRef{Role: r, Layer: l}.GGUFName() }
	gs := []foldGroup{{label: n(arch.AttnNorm) + " → q, k, v", targets: []string{n(arch.AttnQ), n(arch.AttnK), n(arch.AttnV)}, into: []string{n(arch.AttnNorm)}}}
	if awq && spec.Heads == spec.KVHeads {
		into := []string{n(arch.AttnV)}
		if spec.QKVBias {
			into = append(into, n(arch.AttnVBias))
		}
		gs = append(gs, foldGroup{label: n(arch.AttnV) + " → attn_output", targets: []string{n(arch.AttnOut)}, into: into})
	}
	gs = append(gs, foldGroup{label: n(arch.FFNNorm) + " → gate, up", targets: []string{n(arch.FFNGate), n(arch.FFNUp)}, into: []string{n(arch.FFNNorm)}})
	if awq {
		gs = append(gs, foldGroup{label: n(arch.FFNUp) + " → down", targets: []string{n(arch.FFNDown)}, into: []string{n(arch.FFNUp)}})
	}
	return gs
}

// prepare computes the folded scales of the method (AWQ, or SmoothQuant with Smooth > 0) and
// returns a line per scaling for the plan.
func (q *gqfQuantizer) prepare(ts []arch.Tensor) ([]string, error) {
	awq := q.method == MethodAWQ
	if !awq && q.o.Smooth == 0 {
		return nil, nil
	}
	byName := map[string]arch.Tensor{}
	for _, t := range ts {
		byName[t.Ref.GGUFName()] = t
	}
	var groups []foldGroup
	for l := 0; l < q.inv.Spec.Layers; l++ {
		groups = append(groups, foldGroups(q.inv.Spec, l, awq)...)
	}
	// The searches are independent (each reads original weights): run Threads at once.
	type result struct {
		s    []float32
		line string
		err  error
	}
	res := make([]result, len(groups))
	threads := q.o.Threads
	if threads <= 0 {
		threads = goruntime.NumCPU()
	}
	sem := make(chan struct{}, threads)
	var wg sync.WaitGroup
	for i, g := range groups {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := &res[i]
			r.s, r.line, r.err = q.searchFold(g, byName, awq)
		}()
	}
	wg.Wait()
	var lines []string
	for i, g := range groups {
		r := res[i]
		if r.err != nil {
			return nil, r.err
		}
		lines = append(lines, r.line)
		if r.s == nil {
			continue
		}
		for _, t := range g.targets {
			q.colScale[t] = r.s
		}
		for _, t := range g.into {
			q.rowDiv[t] = r.s
		}
	}
	return lines, nil
}

// searchFold returns the scales of one group (nil: none better than unit scales) and a line
// for the plan.
func (q *gqfQuantizer) searchFold(g foldGroup, byName map[string]arch.Tensor, awq bool) ([]float32, string, error) {
	st := q.o.Stats
	key := g.targets[0] // the statistics of the shared input are kept under the first layer
	ls := st.LinearFor(key)
	if ls == nil || ls.Count == 0 {
		return nil, g.label + ": no statistics, not scaled", nil
	}
	var w []float32
	rows, cols := 0, ls.Cols
	for _, name := range g.targets {
		t, ok := byName[name]
		if !ok {
			return nil, "", fmt.Errorf("%s: missing", name)
		}
		if t.Shape[len(t.Shape)-1] != cols {
			return nil, "", fmt.Errorf("%s: %d columns, its input statistics have %d", name, t.Shape[len(t.Shape)-1], cols)
		}
		q.readMu.Lock()
		v, err := readFloat(q.inv, t)
		q.readMu.Unlock()
		if err != nil {
			return nil, "", err
		}
		w = append(w, v...)
		rows += t.Shape[0]
	}
	if !awq { // SmoothQuant: s = max|x|^α / max|w|^(1−α) over the layers together
		s, err := quantize.SmoothScales(ls.AbsMax, quantize.ColumnAbsMax(w, rows, cols), q.o.Smooth)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", key, err)
		}
		return s, fmt.Sprintf("%s: SmoothQuant α %g", g.label, q.o.Smooth), nil
	}
	spec := q.searchSpec(cols)
	in := quantize.AWQStats{Diag: ls.Sum2, Mag: make([]float64, cols)}
	H, _, err := st.Hessian(key)
	if err != nil {
		return nil, "", err
	}
	in.H = H
	for j, v := range ls.Sum2 {
		in.Mag[j] = math.Sqrt(v / float64(ls.Count)) // RMS: the stats hold Σx², not Σ|x|
	}
	res, err := quantize.AWQHessian(w, rows, cols, in, spec, q.o.AWQ)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", key, err)
	}
	if res.Alpha < 0 {
		return nil, fmt.Sprintf("%s: AWQ kept unit scales", g.label), nil
	}
	gain := 0.0
	if res.BaseLoss > 0 {
		gain = 100 * (res.Loss/res.BaseLoss - 1)
	}
	return res.Scales, fmt.Sprintf("%s: AWQ α %.2f, output error %+.1f %%", g.label, res.Alpha, gain), nil
}

// searchSpec is the grid AWQ searches with for rows of cols: the scheme's int4 group (or
// the largest that fits), else int8 per channel.
func (q *gqfQuantizer) searchSpec(cols int) quantize.GroupSpec {
	if q.sch.linear == "int4" {
		for g := q.group; g >= 16; g /= 2 {
			if cols%g == 0 {
				return quantize.GroupSpec{Bits: 4, Group: g, Symmetric: q.sch.sym || q.o.Sym}
			}
		}
	}
	return quantize.GroupSpec{Bits: 8, Symmetric: true}
}
