package convert

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/sensitivity"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/filehash"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// --target-bpw and --target-size choose each linear weight's encoding from measurements instead
// of llama-quantize's fixed rules: the one mix of the GGUF types stock llama.cpp runs that
// minimises the model's predicted output error (KL) within the budget.
//
// The prediction is additive over the weights. For each linear weight W and each encoding e it
// may take (targetTypes after llama-quantize's row-length fallback: the K-quants, IQ4_XS and
// Q8_0 rounded with GPTQ where the statistics hold the weight's Hessian, the i-quants with
// llama.cpp's importance-weighted quantizer, no GPTQ into their grids existing), the
// encoding's output error E(W, e) = Σ_r (ŵ_r − w_r)·H·(ŵ_r − w_r)ᵀ / tokens is computed from
// the statistics' H = Σ xᵀx (quantize.OutputError); one probe per weight and rounding method m
// (verify.Probe) measures the KL of the model with W alone replaced by one encoding p of that
// method on calibration windows, which gives the weight's gain g_W,m = KL_W(p) / E(W, p), the
// KL one unit of its output error costs where the weight sits. The predicted KL of a mix is
// Σ_W g_W,m(e_W)·E(W, e_W), and the allocation (knapsack.go) minimises it within the bytes the
// target leaves. On stories3m it is within 10 % of the KL measured with float activations for
// llama-quantize's K-quant mixes and for allocations alike (docs/quality.md); probing every
// candidate instead of one per weight, or on four times the windows, chose mixes no better.
// The gain depends on the rounding method: with the GPTQ probe's gain alone, llama-quantize's
// IQ2_M mix was predicted 1.41× its measured KL (its linear layers alone), with the i-quants'
// own probe 1.23×.
//
// The measurements are the costly part (every candidate encoding of every weight, and one pass
// of the model per weight and method), and do not depend on the target: they are kept in a
// sensitivity file (formats/sensitivity) keyed by the model, the statistics file's digest, the
// probe's windows, the settings and the candidate types, reused by every later target and
// refused when any of these differ, except that a file measured in a beginning of targetTypes
// (or of layout 1, which probed each weight once) is extended with what it lacks and written
// back, to the bytes measuring everything afresh writes.
//
// With --target-bpw the norms follow llama-quantize's rules: those of the mix whose base type's
// bits per weight are the largest at most the target's (targetRules: iq1_s … iq2_m, q2_k,
// q3_k_m, iq4_xs, q4_k_m, q5_k_m, q6_k, q8_0), whose general.file_type the file takes; the
// token embedding and the output (of a model whose output has its own weight), whose bytes the
// linear layers' bits do not count, are chosen within the bytes those rules give them, so that
// the file is no larger than that mix's at the same bits. --target-size counts every byte of
// the file, so the ends share the one budget. The ends are measured as the linear weights are:
// the output's error on its input's Hessian, the embedding's as the squared error of its rows
// (what a lookup passes on), each with its gain from the probe.

// Prober measures how far the model's output moves when one linear weight is replaced
// (verify.Probe).
type Prober interface {
	// KL replaces the weight name (GGUF name; values in the source's row order) by w, returns
	// the mean KL(model ‖ model with w) over the probe's windows, and puts orig back.
	KL(name string, w, orig []float32) (float64, error)
}

// ProbeConfig says how the sensitivities are measured when no file holds them.
type ProbeConfig struct {
	Corpus string // calibration text
	Ctx    int    // window length (0: 512, or the model's context when shorter)
	Chunks int    // windows (0: every window the corpus fills)
	// Open loads the probe (verify.NewProbe) for windows of ctx tokens.
	Open func(corpus string, ctx, chunks int) (Prober, error)
}

// Target reports what --target-bpw or --target-size chose (Plan.Target).
type Target struct {
	BPW  float64 `json:"bpw,omitempty"`  // --target-bpw: bits per weight over the linear layers
	Size int64   `json:"size,omitempty"` // --target-size: bytes of the file
	// Rules is the llama-quantize mix whose rules set the tensors not allocated.
	Rules string `json:"rules"`
	// Weights is the number of weights allocated; Budget the bytes they may take (Used: do;
	// --target-bpw: the linear weights' budget and the ends', each kept apart).
	Weights int    `json:"weights"`
	Budget  uint64 `json:"budget_bytes"`
	Used    uint64 `json:"used_bytes"`
	// FileBytes is the size of the file the plan writes (--target-size).
	FileBytes uint64 `json:"file_bytes,omitempty"`
	// BoundKL is the least predicted KL (Plan.PredictedKL) any choice within the budget
	// could reach (the relaxation's bound); Exact whether the choice is the optimum of the
	// predictions (costs not rounded).
	BoundKL float64 `json:"bound_kl"`
	Exact   bool    `json:"exact"`
	// Sensitivity is the file the measurements came from or were written to ("" none);
	// Measured says whether this run measured them; Added names the candidate types this run
	// added to the file's when it extended it (and wrote it back).
	Sensitivity string   `json:"sensitivity,omitempty"`
	Measured    bool     `json:"measured"`
	Added       []string `json:"added,omitempty"`
	// Probe describes the probe's windows.
	Probe string `json:"probe"`
}

// targetTypes are the encodings a weight may take, before the row-length fallback: the
// K-quants, IQ4_XS and Q8_0, which GPTQ rounds where the statistics hold the weight's Hessian
// (Q4_0, the fallback of Q2_K and Q3_K, too), then the i-quants of 3.44 bits per weight and
// fewer, which llama.cpp's importance-weighted quantizer rounds with the statistics'
// importance (no GPTQ into their lattice grids exists; the plan says "method imatrix"). A
// sensitivity file lists its types in this order, and one measured in a prefix of it is
// extended with the rest (extendSensitivities): new types go at the end.
var targetTypes = []gguf.Type{gguf.Q2_K, gguf.Q3_K, gguf.IQ4_XS, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.Q8_0,
	gguf.IQ3_S, gguf.IQ3_XXS, gguf.IQ2_S, gguf.IQ2_XS, gguf.IQ2_XXS, gguf.IQ1_M, gguf.IQ1_S}

// legacyTypes are the types of the sensitivity files of layout 1, which named them in their
// settings (legacyCandidates).
var legacyTypes = targetTypes[:7]

// targetRules are the mixes whose rules set the tensors not allocated, by their base type's
// bits per weight: llama-quantize's i-quant mixes below Q2_K's, then its K-quant mixes. The
// bytes they give the token embedding and the output (--target-bpw allocates the ends within
// them) grow along the list; iq3_xxs (IQ3_S and Q5_K, fewer bytes than q2_k's Q2_K and Q6_K)
// is left out for it.
var targetRules = []string{"iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_m", "q2_k", "q3_k_m", "iq4_xs", "q4_k_m", "q5_k_m", "q6_k", "q8_0"}

// probeBPW: each weight's gain for a rounding method is measured with its candidate of that
// method nearest this many bits per weight (the first on a tie).
const probeBPW = 4.5

// sensitivityVersion names the measurement in the sensitivity file's settings: a change to
// what is measured or how changes it, and older files are then measured again (version 2,
// one probe per weight, is extended: legacyCandidates).
const sensitivityVersion = 3

// typeBPW is the bits per weight of a ggml type.
func typeBPW(t gguf.Type) float64 { return 8 * float64(t.TypeSize()) / float64(t.BlockSize()) }

// rulesFor returns the mix of targetRules whose base type takes the most bits per weight but at
// most bpw (the first below them all).
func rulesFor(bpw float64) Preset {
	best, _ := PresetByName(targetRules[0])
	for _, n := range targetRules[1:] {
		if p, _ := PresetByName(n); typeBPW(p.Base) <= bpw {
			best = p
		}
	}
	return best
}

// targetCandidates returns the encodings a weight of this shape may take among types: each
// after the policy's row-length fallback (llama-quantize's tensor_type_fallback), once, less
// those ggml's quantizer cannot write without an importance matrix when the weight has none
// (imatrix false: the token embedding).
func targetCandidates(types []gguf.Type, shape []uint64, imatrix bool) []gguf.Type {
	var st policyState
	var out []gguf.Type
	for _, t := range types {
		c := st.fallback(Choice{Type: t}, shape)
		if !slices.Contains(out, c.Type) && (imatrix || !quantize.RequiresImatrix(c.Type)) {
			out = append(out, c.Type)
		}
	}
	return out
}

// probeCandidates are the candidates a weight's gains are measured with: for each rounding
// method among them (in the order they first appear), its candidate nearest probeBPW.
func probeCandidates(cands []sensitivity.Candidate) []int {
	var out []int
	for i, c := range cands {
		j := slices.IndexFunc(out, func(k int) bool { return cands[k].Method == c.Method })
		switch {
		case j < 0:
			out = append(out, i)
		case math.Abs(typeBPW(c.Type)-probeBPW) < math.Abs(typeBPW(cands[out[j]].Type)-probeBPW):
			out[j] = i
		}
	}
	return out
}

// pinned reports whether --tensor-type sets the tensor's type.
func pinned(overrides []Override, name string) bool {
	for _, o := range overrides {
		if o.Pattern.MatchString(name) {
			return true
		}
	}
	return false
}

// targetName is the plan's scheme for a target.
func (o *Options) targetName() string {
	if o.TargetBPW > 0 {
		return fmt.Sprintf("target-bpw %g", o.TargetBPW)
	}
	return fmt.Sprintf("target-size %d", o.TargetSize)
}

// measured returns the weights whose sensitivities are measured (every linear weight with a
// choice of encodings, and the token embedding and output of a model whose output has its own
// weight; --tensor-type or not: the measurements do not depend on the options that only
// restrict the choice) and their candidates among types, in model order. imp is the
// statistics' importance (the token embedding has none).
func measured(p *Plan, types []gguf.Type, imp map[string][]float32) ([]string, map[string][]gguf.Type) {
	var names []string
	cands := map[string][]gguf.Type{}
	for _, pt := range p.Tensors {
		if !pt.ref.Role.IsLinear() && !(untiedEnd(p, pt) && len(pt.Shape) == 2) {
			continue
		}
		if c := targetCandidates(types, pt.Shape, imp[pt.Name] != nil); len(c) > 1 {
			names = append(names, pt.Name)
			cands[pt.Name] = c
		}
	}
	return names, cands
}

// untiedEnd reports whether pt is the token embedding or the output of a model whose output
// has its own weight (a tied model's token embedding follows the rules).
func untiedEnd(p *Plan, pt PlannedTensor) bool {
	return !p.spec.Tied && (pt.ref.Role == arch.TokenEmbd || pt.ref.Role == arch.Output)
}

// predictions returns each measured weight's candidates' predicted KL, g_W,m·E(W, e): the
// gain of the candidate's rounding method m, from the probe of that method's candidate.
func predictions(sens *sensitivity.File) map[string][]float64 {
	pred := map[string][]float64{}
	for _, t := range sens.Tensors {
		gain := map[string]float64{}
		for _, k := range probeCandidates(t.Candidates) {
			if p := t.Candidates[k]; p.Error > 0 {
				gain[p.Method] = p.ProbeKL / p.Error
			}
		}
		for _, c := range t.Candidates {
			pred[t.Name] = append(pred[t.Name], gain[c.Method]*c.Error)
		}
	}
	return pred
}

// planSensitivities returns the sensitivities of the plan's weights (read from
// o.Sensitivity or measured) and their predictions.
func planSensitivities(inv *Inventory, p *Plan, o Options, method string, st *stats.Stats) (*sensitivity.File, map[string][]float64, sensOrigin, error) {
	var origin sensOrigin
	imp, err := importance(st, p, inv.WeightsDigest())
	if err != nil {
		return nil, nil, origin, err
	}
	names, cands := measured(p, targetTypes, imp)
	if len(names) == 0 {
		return nil, nil, origin, problems.Usage(fmt.Errorf("%s: no linear weight has a choice of encodings (no row length fits a block)", inv.Dir))
	}
	if method == MethodGPTQ {
		var lin []string
		for _, pt := range p.Tensors {
			if pt.ref.Role.IsLinear() && cands[pt.Name] != nil {
				lin = append(lin, pt.Name)
			}
		}
		if err := MissingHessians(st, o.Stats, lin); err != nil {
			return nil, nil, origin, err
		}
	}
	sens, origin, err := targetSensitivities(inv, p, st, imp, names, cands, method, o)
	if err != nil {
		return nil, nil, origin, err
	}
	return sens, predictions(sens), origin, nil
}

// predictScheme sets the predicted KL of a scheme's plan (--sensitivity without a target):
// each measured weight whose type is among its candidates gets its prediction.
func predictScheme(inv *Inventory, p *Plan, o Options, method string, st *stats.Stats) error {
	sens, pred, _, err := planSensitivities(inv, p, o, method, st)
	if err != nil {
		return err
	}
	setPredicted(p, sens, pred)
	return nil
}

// setPredicted gives every measured weight of p whose type is among its candidates its
// predicted KL, and p their sum.
func setPredicted(p *Plan, sens *sensitivity.File, pred map[string][]float64) {
	at := map[string]int{}
	for i := range p.Tensors {
		at[p.Tensors[i].Name] = i
	}
	p.PredictedKL = 0
	for _, t := range sens.Tensors {
		pt := &p.Tensors[at[t.Name]]
		for k, c := range t.Candidates {
			if c.Type == pt.typ {
				pt.Predicted = pred[t.Name][k]
				p.PredictedKL += pt.Predicted
			}
		}
	}
}

// planTarget makes the plan of --target-bpw or --target-size (see above): method is the
// rounding method of the linear weights (gptq or imatrix), st the statistics (checked against
// the model).
func planTarget(inv *Inventory, o Options, method string, st *stats.Stats) (*Plan, error) {
	base, err := MakePlan(inv, PlanOptions{Scheme: targetRules[0], Overrides: o.Overrides, HasImatrix: true, Name: o.Name})
	if err != nil {
		return nil, err
	}
	sens, pred, origin, err := planSensitivities(inv, base, o, method, st)
	if err != nil {
		return nil, err
	}
	// --tensor-type fixes a weight's type; the others are allocated.
	var free []int
	for i, t := range sens.Tensors {
		if !pinned(o.Overrides, t.Name) {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return nil, problems.Usage(fmt.Errorf("--%s: --tensor-type sets the type of every weight there was a choice for", strings.Fields(o.targetName())[0]))
	}
	var res *targetChoice
	if o.TargetBPW > 0 {
		res, err = chooseForBPW(inv, o, sens, pred, free)
	} else {
		res, err = chooseForSize(inv, o, sens, pred, free, st)
	}
	if err != nil {
		return nil, err
	}
	return res.plan(inv, o, sens, pred, origin)
}

// targetChoice is an allocation under one mix's rules: the plan of that mix (for the tensors
// not allocated) and the allocation's result for the weights free of sens, in order.
type targetChoice struct {
	rules  Preset
	base   *Plan
	free   []int
	alloc  *allocation
	budget uint64
	file   uint64 // the file's bytes (--target-size)
}

// options returns the knapsack's items, the weights free of sens: their candidates' bytes
// (each rounded up to align, when not 0) and predicted KL.
func options(sens *sensitivity.File, pred map[string][]float64, free []int, align uint64) [][]option {
	items := make([][]option, len(free))
	for i, f := range free {
		t := sens.Tensors[f]
		for k, c := range t.Candidates {
			cost := c.Bytes
			if align > 0 {
				cost = (cost + align - 1) / align * align
			}
			items[i] = append(items[i], option{cost: cost, err: pred[t.Name][k]})
		}
	}
	return items
}

// chooseForBPW allocates the linear weights at most o.TargetBPW bits per weight over the
// linear layers (what verify reports as bpw linear): the bytes of the weights not allocated
// (--tensor-type, or rows no block fits) count in the budget. The token embedding and the
// output (of a model whose output has its own weight), whose bytes the linear layers' bits do
// not count, are allocated apart, within the bytes the rules' mix gives them: the file is no
// larger than that mix's would be at the same bits, and its ends are the ones the
// measurements prefer (on stories3m the rules' Q2_K embedding of q2_k alone predicts a third
// of the file's KL, and Q3_K with Q5_K's output takes fewer bytes than Q2_K with Q6_K's).
func chooseForBPW(inv *Inventory, o Options, sens *sensitivity.File, pred map[string][]float64, free []int) (*targetChoice, error) {
	rules := rulesFor(o.TargetBPW)
	base, err := MakePlan(inv, PlanOptions{Scheme: rules.Name, Overrides: o.Overrides, HasImatrix: true, Name: o.Name})
	if err != nil {
		return nil, err
	}
	isLinear := map[string]bool{}
	for _, pt := range base.Tensors {
		isLinear[pt.Name] = pt.ref.Role.IsLinear()
	}
	var lin, ends []int // of free: the linear weights, the ends
	alloc := map[string]bool{}
	for i, f := range free {
		alloc[sens.Tensors[f].Name] = true
		if isLinear[sens.Tensors[f].Name] {
			lin = append(lin, i)
		} else {
			ends = append(ends, i)
		}
	}
	var linN float64
	var fixed, endBytes uint64
	for _, pt := range base.Tensors {
		switch {
		case pt.ref.Role.IsLinear():
			linN += float64(gguf.ElementCount(pt.Shape))
			if !alloc[pt.Name] {
				fixed += pt.Bytes
			}
		case alloc[pt.Name]:
			endBytes += pt.Bytes
		}
	}
	total := uint64(math.Floor(o.TargetBPW * linN / 8))
	items := options(sens, pred, free, 0)
	part := func(idx []int) [][]option {
		var it [][]option
		for _, i := range idx {
			it = append(it, items[i])
		}
		return it
	}
	linItems := part(lin)
	if low := cheapest(linItems); total < fixed+low {
		return nil, problems.Usage(fmt.Errorf("--target-bpw %g: the smallest choice takes %.4f bits per weight over the linear layers", o.TargetBPW, 8*float64(fixed+low)/linN))
	}
	a, err := allocate(linItems, total-fixed)
	if err != nil {
		return nil, err
	}
	budget := total - fixed
	if endItems := part(ends); len(ends) > 0 && cheapest(endItems) <= endBytes {
		e, err := allocate(endItems, endBytes)
		if err != nil {
			return nil, err
		}
		a = joinAllocations(a, lin, e, ends)
		budget += endBytes
	} else {
		// The ends fit no candidate within the rules' bytes: they keep the rules' types.
		var keep []int
		for _, i := range lin {
			keep = append(keep, free[i])
		}
		free = keep
	}
	return &targetChoice{rules: rules, base: base, free: free, alloc: a, budget: budget}, nil
}

// cheapest is the least total cost of the items (one option each).
func cheapest(items [][]option) uint64 {
	var low uint64
	for _, it := range items {
		c := it[0].cost
		for _, op := range it {
			c = min(c, op.cost)
		}
		low += c
	}
	return low
}

// joinAllocations joins the allocations a of the items at positions ia and b of those at ib
// (together 0 … n-1) into one of the n items, in order.
func joinAllocations(a *allocation, ia []int, b *allocation, ib []int) *allocation {
	j := &allocation{pick: make([]int, len(ia)+len(ib)), cost: a.cost + b.cost, err: a.err + b.err,
		bound: a.bound + b.bound, exact: a.exact && b.exact}
	for k, i := range ia {
		j.pick[i] = a.pick[k]
	}
	for k, i := range ib {
		j.pick[i] = b.pick[k]
	}
	return j
}

// chooseForSize allocates the linear weights so that the whole file takes at most o.TargetSize
// bytes: its header (whose size the types do not change) and every tensor's data, padded to
// the alignment. The rules are those of the largest mix that the budget's bits per weight
// over the linear layers reach (or the smallest).
func chooseForSize(inv *Inventory, o Options, sens *sensitivity.File, pred map[string][]float64, free []int, st *stats.Stats) (*targetChoice, error) {
	alloc := map[string]bool{}
	for _, f := range free {
		alloc[sens.Tensors[f].Name] = true
	}
	var smallest uint64
	for r := len(targetRules) - 1; r >= 0; r-- {
		rules, _ := PresetByName(targetRules[r])
		base, err := MakePlan(inv, PlanOptions{Scheme: rules.Name, Overrides: o.Overrides, HasImatrix: true, Name: o.Name})
		if err != nil {
			return nil, err
		}
		base.FileType = rules.FileType
		kvs, err := Metadata(inv, base, o.Name)
		if err != nil {
			return nil, err
		}
		h := Header(base, applyOverrides(kvs, o.KV, o.Stats, st))
		size, err := h.FileSize()
		if err != nil {
			return nil, err
		}
		align := uint64(h.Alignment)
		pad := func(n uint64) uint64 { return (n + align - 1) / align * align }
		fixed, linFixed := size, uint64(0) // everything but the allocated weights' padded data
		var linN float64
		for _, pt := range base.Tensors {
			if alloc[pt.Name] {
				fixed -= pad(pt.Bytes)
			} else if pt.ref.Role.IsLinear() {
				linFixed += pt.Bytes
			}
			if pt.ref.Role.IsLinear() {
				linN += float64(gguf.ElementCount(pt.Shape))
			}
		}
		items := options(sens, pred, free, align)
		low := cheapest(items)
		if r == 0 || smallest == 0 {
			smallest = fixed + low
		}
		if uint64(o.TargetSize) < fixed+low {
			continue
		}
		budget := uint64(o.TargetSize) - fixed
		// The rules fit when the budget reaches their base type's bits per weight.
		if r > 0 && rulesFor(8*float64(budget+linFixed)/linN).Name != rules.Name {
			continue
		}
		a, err := allocate(items, budget)
		if err != nil {
			return nil, err
		}
		file := fixed
		for i, k := range a.pick {
			file += items[i][k].cost
		}
		return &targetChoice{rules: rules, base: base, free: free, alloc: a, budget: budget, file: file}, nil
	}
	return nil, problems.Usage(fmt.Errorf("--target-size %d: the smallest choice takes %d bytes", o.TargetSize, smallest))
}

// plan builds the output plan: the allocated weights' chosen encodings with their predicted
// KL, every other tensor as the rules' mix has it.
func (c *targetChoice) plan(inv *Inventory, o Options, sens *sensitivity.File, pred map[string][]float64, origin sensOrigin) (*Plan, error) {
	chosen := map[string]int{}
	pos := map[string]int{}
	for i, f := range c.free {
		chosen[sens.Tensors[f].Name] = c.alloc.pick[i]
		pos[sens.Tensors[f].Name] = f
	}
	baseOf := map[string]*PlannedTensor{}
	for i := range c.base.Tensors {
		baseOf[c.base.Tensors[i].Name] = &c.base.Tensors[i]
	}
	p, err := MakePlanWith(inv, "gguf", o.targetName(), func(t arch.Tensor, shape []uint64) (PlannedTensor, bool, error) {
		name := t.Ref.GGUFName()
		b := baseOf[name]
		if b == nil {
			return PlannedTensor{}, false, fmt.Errorf("%s: not in the plan of %s", name, c.rules.Name)
		}
		pt := PlannedTensor{typ: b.typ, Type: b.Type, Wanted: b.Wanted, Reason: b.Reason, Fallback: b.Fallback}
		if k, ok := chosen[name]; ok {
			st := sens.Tensors[pos[name]]
			pt = PlannedTensor{typ: st.Candidates[k].Type, Type: st.Candidates[k].Type.String(),
				Reason: fmt.Sprintf("chosen of %d", len(st.Candidates)), Method: st.Candidates[k].Method}
		}
		n := gguf.ElementCount(shape)
		pt.Bytes = uint64(pt.typ.RowBytes(int(shape[0]))) * (n / shape[0])
		pt.enc = &ggufEncoder{typ: pt.typ, name: name, bytes: pt.Bytes}
		return pt, false, nil
	})
	if err != nil {
		return nil, err
	}
	p.FileType = c.rules.FileType
	setPredicted(p, sens, pred)
	tg := &Target{BPW: o.TargetBPW, Size: o.TargetSize, Rules: c.rules.Name, Weights: len(c.free), Budget: c.budget,
		Used: c.alloc.cost, BoundKL: p.PredictedKL - c.alloc.err + c.alloc.bound, Exact: c.alloc.exact,
		Sensitivity: o.Sensitivity, Measured: origin.measured,
		Probe: fmt.Sprintf("%s (sha256 %.12s), windows of %d tokens, %d windows (0: all)", sens.Key.CorpusName, sens.Key.CorpusSHA256, sens.Key.Ctx, sens.Key.Chunks)}
	for _, t := range origin.added {
		tg.Added = append(tg.Added, t.String())
	}
	if o.TargetSize > 0 {
		tg.FileBytes = c.file
	}
	p.Target = tg
	// The budget is the contract: check it on the plan itself.
	if o.TargetBPW > 0 && p.BPWLinear > o.TargetBPW {
		return nil, fmt.Errorf("--target-bpw %g: the plan takes %.6f bits per weight over the linear layers", o.TargetBPW, p.BPWLinear)
	}
	return p, nil
}

// sensitivityKey is the key of the measurements for the model, the statistics, the probe's
// windows, the settings and the candidate types.
func sensitivityKey(inv *Inventory, o Options, method string) (sensitivity.Key, error) {
	model, err := arch.StatsModel(filepath.Base(filepath.Clean(inv.Dir)), inv.Spec)
	if err != nil {
		return sensitivity.Key{}, err
	}
	k := sensitivity.Key{ModelName: model.ID.Name, TensorsSHA256: model.ID.TensorsSHA256, WeightsSHA256: inv.WeightsDigest(),
		Candidates: slices.Clone(targetTypes)}
	if inv.gg == nil {
		if k.ConfigSHA256, err = filehash.SHA256(filepath.Join(inv.Dir, "config.json")); err != nil {
			return k, err
		}
	}
	if k.StatsSHA256, err = filehash.SHA256(o.Stats); err != nil {
		return k, err
	}
	k.Settings = settings(method, o)
	if pc := o.Probe; pc != nil {
		k.CorpusName = filepath.Base(pc.Corpus)
		if k.CorpusSHA256, err = filehash.SHA256(pc.Corpus); err != nil {
			return k, err
		}
		k.Ctx, k.Chunks = pc.Ctx, pc.Chunks
		if k.Ctx == 0 {
			k.Ctx = min(512, inv.Spec.Context)
		}
	}
	return k, nil
}

// settings names what changes the measurements besides the model, the statistics, the windows
// and the candidate types.
func settings(method string, o Options) string {
	return fmt.Sprintf("measurement %d; method %s; gptq damp %g, act-order %v; one probe per rounding method, at its candidate nearest %g bpw",
		sensitivityVersion, method, o.GPTQ.Damp, o.GPTQ.ActOrder, probeBPW)
}

// legacyCandidates gives a sensitivity file of layout 1 the key of the current layout when it
// was measured with this run's settings: such a file (measurement 2) named its candidates,
// legacyTypes, in its settings, and probed each weight once, with its candidate nearest
// probeBPW, which is the probe of that candidate's method here; extendSensitivities adds the
// rest. Other files are left as they are (and Check refuses their settings).
func legacyCandidates(f *sensitivity.File, method string, o Options) {
	legacy := fmt.Sprintf("measurement 2; method %s; gptq damp %g, act-order %v; candidates %s after the row-length fallback; probe at the candidate nearest %g bpw",
		method, o.GPTQ.Damp, o.GPTQ.ActOrder, typeList(legacyTypes), probeBPW)
	if f.Key.Candidates == nil && f.Key.Settings == legacy {
		f.Key.Settings, f.Key.Candidates = settings(method, o), slices.Clone(legacyTypes)
	}
}

// sensOrigin says where a run's sensitivities came from: measured now, or read from the
// sensitivity file and, when it was measured in fewer candidate types, extended with added.
type sensOrigin struct {
	measured bool
	added    []gguf.Type
}

// targetSensitivities returns the measurements of the weights names: read from o.Sensitivity
// when it exists (refused unless its key is this run's; extended when it was measured in a
// beginning of the candidate types or lacks a probe, and written back), else measured with
// o.Probe (and written to o.Sensitivity when set).
func targetSensitivities(inv *Inventory, base *Plan, st *stats.Stats, imp map[string][]float32, names []string, cands map[string][]gguf.Type,
	method string, o Options) (*sensitivity.File, sensOrigin, error) {
	var origin sensOrigin
	key, err := sensitivityKey(inv, o, method)
	if err != nil {
		return nil, origin, err
	}
	if o.Sensitivity != "" {
		f, err := sensitivity.Read(o.Sensitivity)
		switch {
		case err == nil:
			legacyCandidates(f, method, o)
			want := key
			if o.Probe == nil { // no windows asked for: the file's are taken
				want.CorpusName, want.CorpusSHA256, want.Ctx, want.Chunks = f.Key.CorpusName, f.Key.CorpusSHA256, f.Key.Ctx, f.Key.Chunks
			}
			if err := f.Key.Check(o.Sensitivity, want); err != nil {
				return nil, origin, err
			}
			have := f.Key.Candidates
			if len(have) > len(want.Candidates) || !slices.Equal(have, want.Candidates[:len(have)]) {
				return nil, origin, fmt.Errorf("%s: %s: measured in %s, not a beginning of this build's %s: measure again (remove the file, or name another)",
					o.Sensitivity, sensitivity.KeyCandidates, typeList(have), typeList(want.Candidates))
			}
			if len(have) < len(want.Candidates) || !probed(f) {
				if origin.added, err = extendSensitivities(inv, base, st, imp, f, names, cands, method, o); err != nil {
					return nil, origin, err
				}
				f.Key.Candidates = want.Candidates
				if err := sensitivity.Write(o.Sensitivity, f); err != nil {
					return nil, origin, err
				}
			}
			if err := sameWeights(o.Sensitivity, f, names, cands); err != nil {
				return nil, origin, err
			}
			return f, origin, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, origin, err
		}
	}
	if o.Probe == nil {
		what := "no --sensitivity file"
		if o.Sensitivity != "" {
			what = o.Sensitivity + " does not exist"
		}
		return nil, origin, problems.Usage(fmt.Errorf("--%s: %s: measuring the sensitivities needs --corpus FILE (calibration text)", strings.Fields(o.targetName())[0], what))
	}
	f, err := measureSensitivities(inv, base, st, imp, names, cands, method, key, o)
	if err != nil {
		return nil, origin, err
	}
	if o.Sensitivity != "" {
		if err := sensitivity.Write(o.Sensitivity, f); err != nil {
			return nil, origin, err
		}
	}
	origin.measured = true
	return f, origin, nil
}

// typeList names types for messages: "Q2_K,Q3_K,…".
func typeList(types []gguf.Type) string {
	s := make([]string, len(types))
	for i, t := range types {
		s[i] = t.String()
	}
	return strings.Join(s, ",")
}

// probed reports whether every weight of f has the probes its gains need (probeCandidates), and
// no other.
func probed(f *sensitivity.File) bool {
	for _, t := range f.Tensors {
		want := probeCandidates(t.Candidates)
		for k, c := range t.Candidates {
			if c.Probed != slices.Contains(want, k) {
				return false
			}
		}
	}
	return true
}

// sameWeights checks that a sensitivity file measured the weights and candidates asked for.
func sameWeights(path string, f *sensitivity.File, names []string, cands map[string][]gguf.Type) error {
	if len(f.Tensors) != len(names) {
		return fmt.Errorf("%s: sensitivity.tensors: %d weights measured, %d to allocate", path, len(f.Tensors), len(names))
	}
	for i, t := range f.Tensors {
		if t.Name != names[i] {
			return fmt.Errorf("%s: sensitivity.tensors: %s measured where %s is allocated", path, t.Name, names[i])
		}
		var have []gguf.Type
		for _, c := range t.Candidates {
			have = append(have, c.Type)
		}
		if !slices.Equal(have, cands[t.Name]) {
			return fmt.Errorf("%s: %s: candidates %v measured, %v wanted", path, t.Name, have, cands[t.Name])
		}
	}
	return nil
}
