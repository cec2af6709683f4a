package convert

import (
	"fmt"
	"math"
	"sync"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/mapped"
	"github.com/gquant/gquant/internal/problems"
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
// A mixture of experts (AWQ): ffn_norm's output is the input of the router and of every
// expert's gate and up, so one scaling serves them all, searched over every expert's gate
// and up with the router's statistics (every token's input), and the router's columns are
// multiplied by it too (it stays F32: the routing is unchanged); each expert's down has a
// scaling of its own, searched with that expert's statistics and folded into the rows of the
// same expert's up. The stacks' folds are per expert (Fold.Per).
//
// as llm-awq's auto_scale does for Llama (and SmoothQuant's smooth_ln_fcs for the norms). The
// scales of a group are searched from the original weights; the folds are then a stage of
// execute (readRows), whatever the output format.

// Fold is the scaling folded into one tensor, indexed in HF order: its columns multiplied by
// Cols, its rows (a vector's entries) divided by Rows. In a stack of experts of Per rows each,
// Cols may hold one scaling per expert in turn (expert e's row r takes Cols[e·cols:]); Rows
// index the stack's rows.
type Fold struct {
	Cols, Rows []float32
	Per        int
}

// apply folds one row (HF row sr; a vector's element sr when vector) of a tensor.
func (f *Fold) apply(row []float32, sr int, vector bool) {
	if f.Cols != nil && !vector {
		cols := f.Cols
		if len(cols) > len(row) && f.Per > 0 { // a scaling per expert
			e := sr / f.Per
			cols = cols[e*len(row) : (e+1)*len(row)]
		}
		for i := range row {
			row[i] *= cols[i]
		}
	}
	if f.Rows != nil {
		d := f.Rows[sr]
		for i := range row {
			row[i] /= d
		}
	}
}

// foldGroup is one scaling: the layers that read one input and the tensors its division
// folds into (rows or vector entries divided by s).
type foldGroup struct {
	label   string
	targets []string // weights whose columns are multiplied by s
	into    []string // tensors divided by s (a norm vector; or rows of a weight and its bias)
	// key names the input's statistics ("": targets[0]'s); scaled are weights whose columns
	// are multiplied by s too but which are not searched (a router kept F32); expert ≥ 0 makes
	// the targets that expert's matrix of their stacks and the into its rows.
	key    string
	scaled []string
	expert int
}

// statsKey is the name the group's input statistics are kept under.
func (g foldGroup) statsKey() string {
	if g.key != "" {
		return g.key
	}
	return g.targets[0]
}

// foldGroups lists the scalings of the method for layer l.
func foldGroups(spec *arch.Spec, l int, awq bool) []foldGroup {
	n := func(r arch.Role) string { return arch.TensorRef{Role: r, Layer: l}.GGUFName() }
	gs := []foldGroup{{label: n(arch.AttnNorm) + " → q, k, v", targets: []string{n(arch.AttnQ), n(arch.AttnK), n(arch.AttnV)}, into: []string{n(arch.AttnNorm)}, expert: -1}}
	if awq && spec.Heads == spec.KVHeads {
		into := []string{n(arch.AttnV)}
		if spec.QKVBias {
			into = append(into, n(arch.AttnVBias))
		}
		gs = append(gs, foldGroup{label: n(arch.AttnV) + " → attn_output", targets: []string{n(arch.AttnOut)}, into: into, expert: -1})
	}
	if spec.Experts > 0 {
		gs = append(gs, foldGroup{label: fmt.Sprintf("%s → router, gate, up of %d experts", n(arch.FFNNorm), spec.Experts),
			targets: []string{n(arch.FFNGateExps), n(arch.FFNUpExps)}, into: []string{n(arch.FFNNorm)},
			key: n(arch.FFNGateInp), scaled: []string{n(arch.FFNGateInp)}, expert: -1})
		for e := 0; awq && e < spec.Experts; e++ {
			gs = append(gs, foldGroup{label: fmt.Sprintf("%s → down", arch.ExpertWeight(n(arch.FFNUpExps), e)),
				targets: []string{n(arch.FFNDownExps)}, into: []string{n(arch.FFNUpExps)},
				key: arch.ExpertWeight(n(arch.FFNDownExps), e), expert: e})
		}
		return gs
	}
	gs = append(gs, foldGroup{label: n(arch.FFNNorm) + " → gate, up", targets: []string{n(arch.FFNGate), n(arch.FFNUp)}, into: []string{n(arch.FFNNorm)}, expert: -1})
	if awq {
		gs = append(gs, foldGroup{label: n(arch.FFNUp) + " → down", targets: []string{n(arch.FFNDown)}, into: []string{n(arch.FFNUp)}, expert: -1})
	}
	return gs
}

// FoldOptions choose the scalings of PrepareFolds.
type FoldOptions struct {
	// AWQ searches AWQ's scales (with Stats' Hessians, or their diagonal); otherwise Smooth is
	// SmoothQuant's migration strength α (0: no folds).
	AWQ    bool
	Smooth float64
	Stats  *stats.Stats
	AWQOpt quantize.AWQOptions
	// Grid is the quantization grid AWQ searches with for rows of cols.
	Grid func(cols int) quantize.GroupSpec
	// Threads bounds the searches run at once (0: 1); they also share a budget of weights in
	// memory, the largest group's or 256 MB, whichever is more.
	Threads int
	// Sequential defers AWQ's searches to layer-sequential execution (ExecOptions.Sequence):
	// each stage's scaling is searched when the statistics of its input have been collected
	// through the already rounded stages, and Stats are the Sequence's.
	Sequential bool
}

// PrepareFolds searches the scalings (reading the original weights of each group's layers)
// and attaches them to the plan's tensors: the targets' columns and rounders, the rows or
// entries of the tensors the division folds into. It returns a line per scaling for the plan.
// With o.Sequential it searches nothing: it keeps o in the plan for executeSequential, which
// searches and attaches each stage's scalings in turn and adds their lines to p.Folds.
func PrepareFolds(inv *Inventory, p *Plan, o FoldOptions) ([]string, error) {
	if !o.AWQ && o.Smooth == 0 {
		return nil, nil
	}
	if o.Sequential {
		switch {
		case !o.AWQ:
			return nil, problems.Usage(fmt.Errorf("--smooth: layer-sequential execution searches AWQ's scales only; SmoothQuant needs --stats FILE"))
		case inv.Spec.Experts > 0:
			return nil, problems.Usage(fmt.Errorf("--method awq: layer-sequential AWQ does not take mixtures of experts yet; use --stats FILE (gquant calibrate --hessian)"))
		}
		p.seqFolds = &o
		return nil, nil
	}
	var groups []foldGroup
	for l := 0; l < inv.Spec.Layers; l++ {
		groups = append(groups, foldGroups(inv.Spec, l, o.AWQ)...)
	}
	return searchFolds(inv, p, groups, o)
}

// searchFolds searches the scalings of groups, several at once, and attaches them to the
// plan's tensors (PrepareFolds); it returns a line per group.
func searchFolds(inv *Inventory, p *Plan, groups []foldGroup, o FoldOptions) ([]string, error) {
	byName := map[string]int{}
	for i := range p.Tensors {
		byName[p.Tensors[i].Name] = i
	}
	groupBytes := func(g foldGroup) int64 {
		var n int64
		for _, t := range g.targets {
			if i, ok := byName[t]; ok {
				n += 4 * int64(gguf64(p.Tensors[i].Shape))
				if g.expert >= 0 {
					n /= int64(p.Tensors[i].Shape[2])
				}
			}
		}
		return n
	}
	budget := int64(256 << 20)
	for _, g := range groups {
		budget = max(budget, groupBytes(g))
	}
	sem := newByteSem(budget, max(o.Threads, 1))
	type result struct {
		s    []float32
		line string
		err  error
	}
	res := make([]result, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		need := groupBytes(g)
		sem.acquire(need)
		wg.Add(1)
		go func() {
			defer func() { sem.release(need); wg.Done() }()
			r := &res[i]
			mapped.Guard()
			defer mapped.Recover(func(err error) { r.err = err })
			r.s, r.line, r.err = searchFold(inv, p, g, byName, o)
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
		for _, t := range append(append([]string{}, g.targets...), g.scaled...) {
			pt := &p.Tensors[byName[t]]
			pt.foldCols(r.s, g.expert)
		}
		for _, t := range g.into {
			if i, ok := byName[t]; ok {
				p.Tensors[i].foldRows(r.s, g.expert)
			}
		}
	}
	return lines, nil
}

// foldRows records a division of a tensor's rows (a vector's entries) by s; of expert
// expert's rows of a stack (the others' stay as they are), or of all of them for expert −1.
func (pt *PlannedTensor) foldRows(s []float32, expert int) {
	if pt.fold == nil {
		pt.fold = &Fold{}
	}
	if expert < 0 {
		pt.fold.Rows = s
		return
	}
	per := int(pt.Shape[1])
	if pt.fold.Rows == nil {
		pt.fold.Rows = ones(per * int(pt.Shape[2]))
	}
	copy(pt.fold.Rows[expert*per:], s)
}

// ones returns n ones.
func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// foldCols records a column scaling of a target and tells its rounder: of every matrix of a
// stack of experts (each expert's rounder) for expert −1, of expert expert's only otherwise.
func (pt *PlannedTensor) foldCols(s []float32, expert int) {
	if pt.fold == nil {
		pt.fold = &Fold{}
	}
	e, _ := pt.enc.(*ggufEncoder)
	if expert < 0 {
		pt.fold.Cols = s
		if r, ok := pt.enc.(interface{ Rounder() *Rounder }); ok && r.Rounder() != nil {
			r.Rounder().SetFold(s)
		}
		for _, r := range expertRounders(e) {
			r.SetFold(s)
		}
		return
	}
	cols, n := int(pt.Shape[0]), int(pt.Shape[2])
	if pt.fold.Cols == nil {
		pt.fold.Cols, pt.fold.Per = ones(cols*n), int(pt.Shape[1])
	}
	copy(pt.fold.Cols[expert*cols:], s)
	if rs := expertRounders(e); rs != nil {
		rs[expert].SetFold(s)
	}
}

// expertRounders are a stack's experts' rounders (nil for others).
func expertRounders(e *ggufEncoder) []*Rounder {
	if e == nil {
		return nil
	}
	return e.experts
}

func gguf64(shape []uint64) uint64 {
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// readOriginal reads a planned tensor's values in HF layout with no transform and no fold: all
// of them, or of a stack of experts expert's matrix only (expert ≥ 0).
func (inv *Inventory) readOriginal(pt *PlannedTensor, expert int) ([]float32, error) {
	orig := PlannedTensor{Name: pt.Name, Source: pt.Source, Shape: pt.Shape, ref: pt.ref, parts: pt.parts}
	rows, n := rowsOf(&orig)
	r0 := 0
	if expert >= 0 {
		per := int(pt.Shape[1])
		r0, rows = expert*per, per
	}
	dst := make([]float32, rows*n)
	if err := inv.readRows(&orig, inv.Spec, r0, r0+rows, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

// searchFold returns the scales of one group (nil: none better than unit scales) and a line
// for the plan.
func searchFold(inv *Inventory, p *Plan, g foldGroup, byName map[string]int, o FoldOptions) ([]float32, string, error) {
	st := o.Stats
	key := g.statsKey() // the shared input's statistics: those of the first layer, or named
	ls := st.LinearFor(key)
	if ls == nil || ls.Count == 0 {
		return nil, g.label + ": no statistics, not scaled", nil
	}
	var w []float32
	rows, cols := 0, ls.Cols
	for _, name := range g.targets {
		i, ok := byName[name]
		if !ok {
			return nil, "", fmt.Errorf("%s: missing", name)
		}
		pt := &p.Tensors[i]
		if int(pt.Shape[0]) != cols {
			return nil, "", fmt.Errorf("%s: %d columns, its input statistics have %d", name, pt.Shape[0], cols)
		}
		v, err := inv.readOriginal(pt, g.expert)
		if err != nil {
			return nil, "", err
		}
		w = append(w, v...)
		rows += len(v) / cols
	}
	if !o.AWQ { // SmoothQuant: s = max|x|^α / max|w|^(1−α) over the layers together
		s, err := quantize.SmoothScales(ls.AbsMax, quantize.ColumnAbsMax(w, rows, cols), o.Smooth)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", key, err)
		}
		return s, fmt.Sprintf("%s: SmoothQuant α %g", g.label, o.Smooth), nil
	}
	in := quantize.AWQStats{Diag: ls.Sum2, Mag: make([]float64, cols)}
	H, _, err := st.Hessian(key)
	if err != nil {
		return nil, "", err
	}
	in.H = H
	for j, v := range ls.Sum2 {
		in.Mag[j] = math.Sqrt(v / float64(ls.Count)) // RMS: the stats hold Σx², not Σ|x|
	}
	res, err := quantize.AWQHessian(w, rows, cols, in, o.Grid(cols), o.AWQOpt)
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

// byteSem bounds the bytes and the number of holders at once (a holder of more than the
// budget waits for everything else to finish).
type byteSem struct {
	mu           sync.Mutex
	cond         *sync.Cond
	budget, used int64
	slots, held  int
}

func newByteSem(budget int64, slots int) *byteSem {
	s := &byteSem{budget: budget, slots: slots}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *byteSem) acquire(n int64) {
	s.mu.Lock()
	for s.held > 0 && (s.held >= s.slots || s.used+n > s.budget) {
		s.cond.Wait()
	}
	s.used += n
	s.held++
	s.mu.Unlock()
}

func (s *byteSem) release(n int64) {
	s.mu.Lock()
	s.used -= n
	s.held--
	s.cond.Broadcast()
	s.mu.Unlock()
}
