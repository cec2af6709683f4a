package convert

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/atomicfile"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// Options are the inputs of one GGUF conversion besides the folder and the output path.
type Options struct {
	Scheme       string
	Overrides    []Override
	Pre          string // tokenizer.ggml.pre override
	Name         string // general.name
	Threads      int
	Force        bool  // overwrite an existing output
	SplitMaxSize int64 // split the output into files of at most this many bytes (0: one file)
	DryRun       bool  // plan only
	// Method rounds the weights: rtn or imatrix (ggml's encoders, llama-quantize's bytes),
	// or gptq or awq into the Q4_0 blocks of scheme q4_0 (see q4_0Rows). Empty: imatrix with
	// Stats, else rtn.
	Method string
	// Stats is a statistics file (gquant calibrate's, or llama.cpp's GGUF imatrix or .dat):
	// the importance matrix, and the Hessians of gptq and awq.
	Stats string
	// Imatrix, when set, is the importance per GGUF tensor name (instead of Stats).
	Imatrix map[string][]float32
	// GPTQ and AWQ tune those methods.
	GPTQ     quantize.GPTQOptions
	AWQ      quantize.AWQOptions
	Progress func(done, total int64)
	// Sequence, with Method gptq or awq and no Stats, is layer-sequential GPTQ or AWQ: the
	// Hessians come stage by stage from a calibration run through the already rounded stages
	// (calibrate.NewSequential), never all at once; AWQ's scalings are searched from them,
	// stage by stage (executeSequential).
	Sequence Sequence
	// KV overrides metadata keys of the output (llama-quantize --override-kv).
	KV []KVOverride
	// Pure, LeaveOutput, OutputType and TokenEmbdType are llama-quantize's --pure,
	// --leave-output-tensor, --output-tensor-type and --token-embedding-type (PlanOptions).
	Pure, LeaveOutput         bool
	OutputType, TokenEmbdType *gguf.Type

	// TargetBPW, instead of Scheme, chooses each linear weight's type to minimise the
	// predicted KL with at most this many bits per weight over the linear layers; TargetSize
	// does it for a file of at most this many bytes (target.go). They need Stats; Method is
	// gptq (the default when the statistics hold Hessians) or imatrix.
	TargetBPW  float64
	TargetSize int64
	// Sensitivity is the file of the measurements the targets allocate from: read when it
	// exists (and refused unless made for this model, statistics, probe and settings),
	// otherwise measured with Probe and written there. Empty: measured, not kept.
	Sensitivity string
	// Probe measures the sensitivities (nil: they must come from Sensitivity).
	Probe *ProbeConfig
	// MeasureProgress, when set, is called after each weight's sensitivities are measured.
	MeasureProgress func(done, total int)
}

// gptqKSchemes are the GGUF schemes whose linear weights of the types gptqBlockType lists
// --method gptq rounds in ggml's blocks (quantize.KBlocksGPTQ, quantize.Blocks32GPTQ), with
// llama-quantize's imatrix mix; q4_0's are rounded in quantize's groups (q4_0Rows).
var gptqKSchemes = map[string]bool{"q2_k": true, "q2_k_s": true, "q3_k_s": true, "q3_k_m": true, "q3_k_l": true, "q3_k": true, "q4_k_s": true, "q4_k_m": true, "q5_k_s": true, "q5_k_m": true, "q4_k": true, "q5_k": true,
	"q6_k": true, "q4_1": true, "q5_0": true, "q5_1": true, "q8_0": true, "iq4_nl": true, "iq4_xs": true}

// Convert runs inventory → plan → execute for one HuggingFace folder into GGUF. With DryRun
// it returns the plan and writes nothing. The output appears only when complete (temp file +
// rename).
func Convert(dir, out string, o Options) (*Plan, error) {
	if !o.DryRun {
		if err := atomicfile.CheckNew(out, o.Force); err != nil {
			return nil, err
		}
	}
	inv, err := Open(dir, InventoryOptions{Pre: o.Pre})
	if err != nil {
		return nil, err
	}
	defer inv.Close()
	if inv.gg != nil && !o.DryRun {
		// Every part of a split source is an input.
		if err := atomicfile.CheckOutputs(o.Force, inv.SourceFiles(), out); err != nil {
			return nil, err
		}
	}
	method := o.Method
	target := o.TargetBPW > 0 || o.TargetSize > 0
	var st, imatrixStats *stats.Stats
	if target {
		// The statistics decide the default method, and the plan needs them.
		if st, method, err = targetStats(inv, o); err != nil {
			return nil, err
		}
	}
	if method == "" {
		method = MethodRTN
		if o.Stats != "" || o.Imatrix != nil {
			method = MethodImatrix
		}
	}
	switch method {
	case MethodRTN, MethodImatrix:
	case MethodGPTQ, MethodAWQ:
		switch {
		case method == MethodAWQ && o.Scheme != "q4_0":
			return nil, problems.Usage(fmt.Errorf("--method awq: GGUF output carries AWQ weights exactly only as q4_0 (got --scheme %s; other schemes: --format gqf)", o.Scheme))
		case method == MethodAWQ && target:
			return nil, problems.Usage(fmt.Errorf("--method awq: --target-bpw and --target-size choose among llama.cpp's block types with gptq or imatrix"))
		case method == MethodGPTQ && o.Scheme != "q4_0" && !gptqKSchemes[o.Scheme] && !target:
			return nil, problems.Usage(fmt.Errorf("--method gptq: GGUF output carries GPTQ weights as q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, iq4_xs, q2_k, q2_k_s, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m or q6_k (got --scheme %s; other schemes: --format gqf)", o.Scheme))
		case gptqKSchemes[o.Scheme] && o.Sequence != nil:
			return nil, problems.Usage(fmt.Errorf("--method gptq --scheme %s: layer-sequential GPTQ (--corpus) writes q4_0; GPTQ into K-quant blocks needs --stats FILE (gquant calibrate --hessian)", o.Scheme))
		}
		if o.SplitMaxSize > 0 {
			return nil, problems.Usage(fmt.Errorf("--method %s: --split-max-size is not supported", method))
		}
	default:
		return nil, problems.Usage(fmt.Errorf("--method: unknown method %q (rtn, imatrix, gptq, awq)", method))
	}
	if method == MethodImatrix && o.Stats == "" && o.Imatrix == nil {
		return nil, fmt.Errorf("--method imatrix needs --stats FILE (gquant calibrate or llama-imatrix output)")
	}
	seq := o.Sequence
	switch {
	case seq != nil && (method != MethodGPTQ && method != MethodAWQ || o.Stats != ""):
		return nil, problems.Usage(fmt.Errorf("layer-sequential calibration is for --method gptq or awq without --stats"))
	case (method == MethodGPTQ || method == MethodAWQ) && o.Stats == "" && seq == nil:
		return nil, fmt.Errorf("--method %s needs --stats FILE (gquant calibrate --hessian) or --corpus FILE", method)
	}
	if target && (o.Pure || o.LeaveOutput || o.OutputType != nil || o.TokenEmbdType != nil) {
		return nil, problems.Usage(fmt.Errorf("--target-bpw and --target-size choose the types themselves: --pure, --leave-output-tensor, --output-tensor-type and --token-embedding-type apply to --scheme"))
	}
	if target && (seq != nil || o.SplitMaxSize > 0 || method == MethodRTN) {
		return nil, problems.Usage(fmt.Errorf("--target-bpw and --target-size take --stats FILE and --method gptq or imatrix, one output file"))
	}
	useImatrix := method == MethodImatrix
	// GPTQ into K-quant blocks: llama-quantize's imatrix mix, the GPTQ super-blocks' grids
	// and every other tensor weighted with the statistics' importance, as with --stats alone.
	kGPTQ := method == MethodGPTQ && (gptqKSchemes[o.Scheme] || target)
	var plan *Plan
	if target {
		plan, err = planTarget(inv, o, method, st)
	} else {
		plan, err = MakePlan(inv, PlanOptions{Scheme: o.Scheme, Overrides: o.Overrides, HasImatrix: useImatrix || kGPTQ, Name: o.Name,
			Pure: o.Pure, LeaveOutput: o.LeaveOutput, OutputType: o.OutputType, TokenEmbdType: o.TokenEmbdType})
	}
	if err != nil {
		return nil, err
	}
	if method != MethodRTN {
		plan.Method = method
	}
	if !o.DryRun {
		if err := plan.CheckImatrix(useImatrix || kGPTQ); err != nil {
			return nil, err
		}
		if err := plan.CheckEncoders(); err != nil {
			return nil, err
		}
	}
	switch {
	case useImatrix && o.Imatrix == nil && st != nil:
		if o.Imatrix, err = importance(st, plan, inv.WeightsDigest()); err != nil {
			return nil, err
		}
		imatrixStats = st
	case useImatrix && o.Imatrix == nil:
		if o.Imatrix, imatrixStats, err = LoadImportance(o.Stats, plan, inv.WeightsDigest()); err != nil {
			return nil, err
		}
	case seq != nil:
		st = seq.Statistics()
	case method == MethodGPTQ || method == MethodAWQ:
		if st == nil {
			if st, err = stats.Read(o.Stats); err != nil {
				return nil, err
			}
			if err := arch.ValidateStats(st, inv.Spec, inv.WeightsDigest()); err != nil {
				return nil, err
			}
		}
		if kGPTQ {
			if o.Imatrix, err = importance(st, plan, inv.WeightsDigest()); err != nil {
				return nil, err
			}
			imatrixStats = st
		}
	}
	if !target && o.Sensitivity != "" {
		// The scheme's predicted KL, from the sensitivities --target-bpw allocates from.
		if st == nil {
			if st, _, err = targetStats(inv, Options{Stats: o.Stats, Method: method}); err != nil {
				return nil, err
			}
		}
		if err := predictScheme(inv, plan, o, method, st); err != nil {
			return nil, err
		}
	}
	var gptqWeights []string
	for i := range plan.Tensors {
		pt := &plan.Tensors[i]
		e := pt.enc.(*ggufEncoder)
		if useImatrix || kGPTQ {
			e.imatrix = o.Imatrix[pt.Name]
		}
		if e.imatrix == nil && quantize.RequiresImatrix(pt.typ) && !o.DryRun {
			// llama-quantize: "Missing importance matrix for tensor … in a very low-bit
			// quantization" (its quantizer asserts one).
			src := "no --stats given"
			if useImatrix || kGPTQ {
				src = "the statistics have no entry for it"
			}
			return nil, fmt.Errorf("%s: %s needs an importance matrix, and %s", pt.Name, pt.typ, src)
		}
		if st != nil && method != MethodImatrix && (pt.typ == gguf.Q4_0 || kGPTQ && gptqBlockType(pt.typ)) && pt.ref.Role.IsLinear() {
			pt.Method = method
			if !pt.ref.Role.IsExperts() {
				e.rounder = &Rounder{Method: method, Stats: st, Weight: pt.Name, GPTQ: o.GPTQ}
				gptqWeights = append(gptqWeights, pt.Name)
				continue
			}
			// A stack of experts: each expert rounded with its own statistics.
			e.experts = make([]*Rounder, pt.Shape[2])
			var unreached []string
			for x := range e.experts {
				w := arch.ExpertWeight(pt.Name, x)
				e.experts[x] = &Rounder{Method: method, Stats: st, Weight: w, GPTQ: o.GPTQ}
				if ls := st.LinearFor(w); ls != nil && ls.Count == 0 {
					unreached = append(unreached, strconv.Itoa(x))
					continue
				}
				gptqWeights = append(gptqWeights, w)
			}
			if len(unreached) > 0 && !strings.Contains(pt.Note, "saw no calibration token") {
				pt.Note = joinNote(pt.Note, fmt.Sprintf("expert(s) %s saw no calibration token: imatrix with importance 1, as llama-quantize", strings.Join(unreached, ", ")))
			}
		}
	}
	if method == MethodGPTQ && seq == nil {
		if err := MissingHessians(st, o.Stats, gptqWeights); err != nil {
			return nil, err
		}
	}
	if o.DryRun {
		return plan, nil
	}
	start := time.Now()
	if method == MethodAWQ {
		if plan.Folds, err = PrepareFolds(inv, plan, FoldOptions{AWQ: true, Stats: st, AWQOpt: o.AWQ, Threads: o.Threads, Sequential: seq != nil,
			Grid: func(cols int) quantize.GroupSpec {
				if cols%32 != 0 { // a row that falls back from Q4_0: searched as 8 bits per channel
					return quantize.GroupSpec{Bits: 8, Symmetric: true}
				}
				return q4_0Spec
			}}); err != nil {
			return nil, err
		}
	}
	kvs, err := Metadata(inv, plan, o.Name)
	if err != nil {
		return nil, err
	}
	kvs = applyOverrides(kvs, o.KV, o.Stats, imatrixStats)
	if err := writeGGUF(inv, plan, kvs, out, o); err != nil {
		return nil, err
	}
	plan.Seconds = time.Since(start).Seconds()
	return plan, nil
}

// targetStats reads and checks the statistics of --target-bpw and --target-size (or of
// --sensitivity) and returns them with the method: o.Method, or gptq when they hold a Hessian
// for every linear weight of the blocks, else imatrix.
func targetStats(inv *Inventory, o Options) (*stats.Stats, string, error) {
	if o.Stats == "" {
		return nil, "", problems.Usage(fmt.Errorf("--target-bpw, --target-size and --sensitivity need --stats FILE (gquant calibrate --hessian, or an importance matrix)"))
	}
	switch o.Method {
	case "", MethodGPTQ, MethodImatrix:
	default:
		return nil, "", problems.Usage(fmt.Errorf("--method %s: --target-bpw, --target-size and --sensitivity round with gptq or imatrix", o.Method))
	}
	st, err := stats.Read(o.Stats)
	if err != nil {
		return nil, "", err
	}
	if err := arch.ValidateStats(st, inv.Spec, inv.WeightsDigest()); err != nil {
		return nil, "", err
	}
	method := o.Method
	if method == "" {
		method = MethodGPTQ
		for _, t := range inv.Family.Tensors(inv.Spec) {
			if t.Ref.Role.IsLinear() && !st.HasHessian(t.Ref.GGUFName()) {
				method = MethodImatrix
				break
			}
		}
	}
	return st, method, nil
}

// Rounder returns a GGUF tensor's rounding stage (nil for ggml's encoders).
func (e *ggufEncoder) Rounder() *Rounder { return e.rounder }
