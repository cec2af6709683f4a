package convert

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/problems"
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
// What the blocks share (the importance, the Hessian, GPTQ's factored Hessian) is computed
// once per matrix: GPTQ's factor by Prepare, before the first block (a row's bits do not
// depend on its block: quantize.GPTQPlan), or at the first block that needs it; Finish frees
// it.
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
	plans map[int]*quantize.GPTQPlan // by group size (kBlockGroup: the K-quants')
	h     []float64
	hOK   bool
	// hOwned: h is the rounder's (read from the file, folded, or handed over): a plan may be
	// built in its memory, after which hUsed is set and h holds nothing else's values.
	hOwned, hUsed bool
	imp           []float32
	impOK         bool
}

// SetFold tells the rounder that the matrix's columns were multiplied by s (its input divided
// by s): the importance becomes Σx²/s² and the Hessian H/(s sᵀ).
func (r *Rounder) SetFold(s []float32) { r.fold = s }

// Finish frees what the rounder holds for the whole matrix.
func (r *Rounder) Finish() {
	r.mu.Lock()
	r.plans, r.h, r.hOK, r.hOwned, r.hUsed, r.imp, r.impOK = nil, nil, false, false, false, nil, false
	r.mu.Unlock()
}

// method is the method the rounder uses: its own, rtn where the statistics lack the matrix's
// input, and imatrix for an expert no calibration token was routed to (its Hessian is 0;
// llama-quantize weights its columns equally, and so does Stats.Importance).
func (r *Rounder) method() string {
	if r.Method == MethodRTN {
		return MethodRTN
	}
	ls := (*stats.LinearStats)(nil)
	if r.Stats != nil {
		ls = r.Stats.LinearFor(r.Weight)
	}
	switch {
	case ls == nil:
		return MethodRTN
	case ls.Count == 0:
		return MethodImatrix
	}
	return r.Method
}

// Prepares reports whether the matrix's blocks share a GPTQ factor (GPTQ with a Hessian):
// then Prepare builds it before the first block.
func (r *Rounder) Prepares() bool {
	return r.method() == MethodGPTQ && r.Stats.HasHessian(r.Weight)
}

// Prepare builds what the blocks of rows of cols rounded with spec share (GPTQ's factored
// Hessian), so that Round only reads it.
func (r *Rounder) Prepare(spec quantize.GroupSpec, cols int) error {
	if !r.Prepares() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	H, err := r.hessian()
	if err != nil || H == nil {
		return err
	}
	_, err = r.gptqPlan(H, spec.Group, cols)
	return err
}

// PrepareBlocks is Prepare for RoundBlocks with the plans' key of its codec.
func (r *Rounder) PrepareBlocks(key, cols int) error {
	if !r.Prepares() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	H, err := r.hessian()
	if err != nil || H == nil {
		return err
	}
	_, err = r.gptqPlan(H, key, cols)
	return err
}

// hessian returns the matrix's input Hessian, folded, read once (nil when none). r.mu is held.
func (r *Rounder) hessian() ([]float64, error) {
	if r.hOK {
		return r.h, nil
	}
	H, _, owned, err := r.Stats.TakeHessian(r.Weight)
	if err != nil {
		return nil, err
	}
	if H != nil && r.fold != nil {
		H, owned = quantize.ScaleHessian(H, r.fold), true
	}
	r.h, r.hOK, r.hOwned, r.hUsed = H, true, owned, false
	return H, nil
}

// importance returns the matrix's input importance, folded, computed once. r.mu is held.
func (r *Rounder) importance() []float32 {
	if !r.impOK {
		r.imp, r.impOK = foldImportance(r.Stats.Importance(r.Weight), r.fold), true
	}
	return r.imp
}

// kBlockGroup and block32Group are the plans' keys of the K-quant super-blocks and of the
// blocks of 32 that RoundBlocks writes.
const (
	kBlockGroup  = -256
	block32Group = -32
)

// gptqPlan returns the GPTQ plan for groups of group columns, built once. r.mu is held. The
// ggml blocks of RoundBlocks (kBlockGroup, block32Group) run in column order, each super-block's grid
// fitted from the weights as GPTQ has updated them, with diag(H) as llama.cpp's quant_weights:
// with act-order their grids would come from the original weights, and the tight sub-block
// ranges clamp the columns processed last (quantize's TestKBlocksGPTQLowersOutputError: 3×
// worse than llama.cpp's own Q4_K there, 0.76× in column order).
func (r *Rounder) gptqPlan(H []float64, group, cols int) (*quantize.GPTQPlan, error) {
	key := group
	if plan := r.plans[key]; plan != nil {
		return plan, nil
	}
	if r.hUsed { // another plan was built in H's memory: fetch H again
		r.hOK = false
		var err error
		if H, err = r.hessian(); err != nil {
			return nil, err
		}
	}
	opts := r.GPTQ
	opts.StaticGroups = opts.StaticGroups || opts.ActOrder
	if key == kBlockGroup || key == block32Group {
		group = -key
		opts.ActOrder, opts.StaticGroups, opts.ClipSearch = false, false, true
	}
	newPlan := quantize.NewGPTQPlan
	if r.hOwned {
		// The plan's factor takes H's memory: the Hessian costs its bytes once.
		newPlan, r.hUsed = quantize.NewGPTQPlanInPlace, true
	}
	plan, err := newPlan(H, cols, group, opts)
	if err != nil {
		return nil, err
	}
	if r.plans == nil {
		r.plans = map[int]*quantize.GPTQPlan{}
	}
	r.plans[key] = plan
	return plan, nil
}

// gptqBlocks is a GPTQ codec that lays its rows out as ggml blocks.
type gptqBlocks interface {
	quantize.GPTQQuantizer
	Bytes() []byte
}

// blockCodec returns the GPTQ codec of a GGUF type that RoundBlocks writes, and its plans' key
// (the K-quants' super-blocks, or blocks of 32), or nil.
func blockCodec(typ gguf.Type, rows, cols int) (gptqBlocks, int, error) {
	switch typ {
	case gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.IQ4_XS:
		k, err := quantize.NewKBlocksGPTQ(typ, rows, cols)
		return k, kBlockGroup, err
	case gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.IQ4_NL:
		k, err := quantize.NewBlocks32GPTQ(typ, rows, cols)
		return k, block32Group, err
	}
	return nil, 0, nil
}

// RoundBlocks rounds rows × cols weights w into blocks of typ (one blockCodec takes) with
// GPTQ and returns their bytes; nil bytes when the statistics hold no Hessian for the matrix
// (the caller then uses llama.cpp's quantizer with the importance).
func (r *Rounder) RoundBlocks(typ gguf.Type, w []float32, rows, cols int) ([]byte, error) {
	if r.method() != MethodGPTQ {
		return nil, nil
	}
	k, key, err := blockCodec(typ, rows, cols)
	if err != nil || k == nil {
		return nil, err
	}
	r.mu.Lock()
	H, err := r.hessian()
	var plan *quantize.GPTQPlan
	if err == nil && H != nil {
		plan, err = r.gptqPlan(H, key, cols)
	}
	r.mu.Unlock()
	if err != nil || plan == nil {
		return nil, err
	}
	if _, err := plan.Run(k, w, rows); err != nil {
		return nil, err
	}
	return k.Bytes(), nil
}

// Round rounds rows × cols weights w (rows of the matrix, in any order) with spec, and says
// which method it used: the matrix's, or another where the statistics lack what it needs
// (no statistics: rtn; no Hessian: imatrix).
func (r *Rounder) Round(spec quantize.GroupSpec, w []float32, rows, cols int) (*quantize.GroupTensor, string, error) {
	method := r.method()
	if method == MethodRTN {
		gt, err := quantize.QuantizeGroups(spec, w, rows, cols, nil)
		return gt, method, err
	}
	r.mu.Lock()
	var (
		H    []float64
		plan *quantize.GPTQPlan
		err  error
	)
	if method == MethodGPTQ || method == MethodAWQ {
		H, err = r.hessian()
		if err == nil && H != nil && method == MethodGPTQ {
			plan, err = r.gptqPlan(H, spec.Group, cols)
		}
	}
	var imp []float32
	if err == nil && (method == MethodImatrix || H == nil || (method == MethodAWQ && spec.Bits != 4)) {
		imp = r.importance()
	}
	r.mu.Unlock()
	switch {
	case err != nil:
		return nil, "", err
	case method == MethodImatrix:
		gt, err := quantize.QuantizeGroups(spec, w, rows, cols, imp)
		return gt, method, err
	case method != MethodGPTQ && method != MethodAWQ:
		return nil, "", fmt.Errorf("method %q", method)
	case H == nil || (method == MethodAWQ && spec.Bits != 4):
		gt, err := quantize.QuantizeGroups(spec, w, rows, cols, imp)
		return gt, MethodImatrix, err
	case method == MethodGPTQ:
		gt, err := quantize.GPTQRows(plan, w, rows, spec)
		return gt, method, err
	}
	gt, err := quantize.QuantizeGroupsHessian(spec, w, rows, cols, H)
	return gt, method, err
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

// MissingHessians checks that the statistics hold a Hessian for each of weights (the names of
// the linear weights rounded by GPTQ); statsName names them in the error.
func MissingHessians(st *stats.Stats, statsName string, weights []string) error {
	var probs []string
	for _, w := range weights {
		if !st.HasHessian(w) {
			probs = append(probs, fmt.Sprintf("%s: no Hessian (gquant calibrate --hessian)", w))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %s", statsName, strings.Join(problems.First(probs, 5), "; "))
	}
	return nil
}
