package convert

import (
	"fmt"
	"sync"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/quantize"
)

// Rounding methods of the weights of linear layers.
const (
	MethodRTN     = "rtn"     // round to nearest over each group's min-max grid
	MethodImatrix = "imatrix" // importance-weighted range search (Σx² of the input)
	MethodGPTQ    = "gptq"    // GPTQ with the input's Hessian
	MethodAWQ     = "awq"     // activation-aware scales folded into the previous layer, ranges searched on the output error
)

// Rounder is the rounding stage of one weight matrix: it rounds blocks of its rows onto
// quantize's groups with its method, using the calibration statistics of the matrix's input.
// GPTQ's factored Hessian is computed once per matrix, at the first block, and shared by the
// blocks (a row's bits do not depend on its block: quantize.GPTQPlan); Finish frees it.
type Rounder struct {
	// Method is one of the Method constants; Stats the statistics (nil for rtn), Weight the
	// matrix's key in them (its GGUF name).
	Method string
	Stats  *stats.Stats
	Weight string
	// GPTQ tunes GPTQ (act-order always comes with static groups: gqf and ggml store
	// contiguous groups).
	GPTQ quantize.GPTQOptions

	fold []float32 // the input's folded column scales (SetFold), nil for none

	mu    sync.Mutex
	plans map[int]*quantize.GPTQPlan // by group size
	h     []float64
	hOK   bool
}

// SetFold tells the rounder that the matrix's columns were multiplied by s (its input divided
// by s): the importance becomes Σx²/s² and the Hessian H/(s sᵀ).
func (r *Rounder) SetFold(s []float32) { r.fold = s }

// Finish frees what the rounder holds for the whole matrix.
func (r *Rounder) Finish() {
	r.mu.Lock()
	r.plans, r.h, r.hOK = nil, nil, false
	r.mu.Unlock()
}

// hessian returns the matrix's input Hessian, folded, read once (nil when none).
func (r *Rounder) hessian() ([]float64, error) {
	if r.hOK {
		return r.h, nil
	}
	H, _, err := r.Stats.Hessian(r.Weight)
	if err != nil {
		return nil, err
	}
	if H != nil && r.fold != nil {
		H = quantize.ScaleHessian(H, r.fold)
	}
	r.h, r.hOK = H, true
	return H, nil
}

// Round rounds rows × cols weights w (rows of the matrix, in any order) with spec, and says
// which method it used: the matrix's, or another where the statistics lack what it needs
// (no statistics: rtn; no Hessian: imatrix).
func (r *Rounder) Round(spec quantize.GroupSpec, w []float32, rows, cols int) (*quantize.GroupTensor, string, error) {
	method := r.Method
	if method != MethodRTN && (r.Stats == nil || r.Stats.LinearFor(r.Weight) == nil) {
		method = MethodRTN
	}
	imp := func() []float32 { return foldImportance(r.Stats.Importance(r.Weight), r.fold) }
	switch method {
	case MethodRTN:
		gt, err := quantize.QuantizeGroups(spec, w, rows, cols, nil)
		return gt, method, err
	case MethodImatrix:
		gt, err := quantize.QuantizeGroups(spec, w, rows, cols, imp())
		return gt, method, err
	case MethodGPTQ, MethodAWQ:
		r.mu.Lock()
		H, err := r.hessian()
		var plan *quantize.GPTQPlan
		if err == nil && H != nil && method == MethodGPTQ {
			if plan = r.plans[spec.Group]; plan == nil {
				opts := r.GPTQ
				opts.StaticGroups = opts.StaticGroups || opts.ActOrder
				if plan, err = quantize.NewGPTQPlan(H, cols, spec.Group, opts); err == nil {
					if r.plans == nil {
						r.plans = map[int]*quantize.GPTQPlan{}
					}
					r.plans[spec.Group] = plan
				}
			}
		}
		r.mu.Unlock()
		switch {
		case err != nil:
			return nil, "", err
		case H == nil || (method == MethodAWQ && spec.Bits != 4):
			gt, err := quantize.QuantizeGroups(spec, w, rows, cols, imp())
			return gt, MethodImatrix, err
		case method == MethodGPTQ:
			gt, err := quantize.GPTQRows(plan, w, rows, spec)
			return gt, method, err
		}
		gt, err := quantize.QuantizeGroupsHessian(spec, w, rows, cols, H)
		return gt, method, err
	}
	return nil, "", fmt.Errorf("method %q", method)
}

// foldImportance is the importance of a layer's input after its columns were scaled by s (the
// input divided by s): Σx²/s².
func foldImportance(imp, s []float32) []float32 {
	if s == nil || imp == nil {
		return imp
	}
	out := make([]float32, len(imp))
	for j, v := range imp {
		out[j] = v / (s[j] * s[j])
	}
	return out
}

// CheckMethod checks a method name and that the statistics hold what it needs for each
// linear weight of the plan that uses it (weights: their names); stats may be nil for rtn.
func CheckMethod(method string, st *stats.Stats, statsName string, weights []string) error {
	switch method {
	case MethodRTN:
		return nil
	case MethodImatrix, MethodGPTQ, MethodAWQ:
		if st == nil {
			return fmt.Errorf("--method %s needs --stats FILE (gquant calibrate%s)", method, map[bool]string{true: " --hessian", false: ""}[method != MethodImatrix])
		}
	default:
		return fmt.Errorf("--method: unknown method %q (rtn, imatrix, gptq, awq)", method)
	}
	if method != MethodGPTQ {
		return nil
	}
	var probs []string
	for _, w := range weights {
		if !st.HasHessian(w) {
			probs = append(probs, fmt.Sprintf("%s: no Hessian (gquant calibrate --hessian)", w))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %s", statsName, joinFirst(probs, 5))
	}
	return nil
}

// joinFirst joins the first n problems and counts the rest.
func joinFirst(ps []string, n int) string {
	s := first(ps, n)
	out := s[0]
	for _, p := range s[1:] {
		out += "; " + p
	}
	return out
}
