// Package convert turns a HuggingFace checkpoint into a quantized artifact in three steps, the
// same for every output format: inventory (headers only), plan (a pure function of the
// inventory and the options: one Plan type for GGUF and gqf) and execute (row blocks streamed
// through read → transform and folds → rounding method and encoding → a sink, on a bounded
// pool). The GGUF sink is here; gqf's, with its schemes and activation encodings, is package
// convert/gqfconv.
package convert

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// SourceTensor is one tensor of the input checkpoint, as its header describes it.
type SourceTensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	File  string `json:"file"`
}

// PlanOptions are the user's choices that shape a GGUF plan.
type PlanOptions struct {
	Scheme     string     // preset name
	Overrides  []Override // --tensor-type rules, first match wins
	HasImatrix bool       // an importance matrix will be used (changes llama-quantize's mix)
	Name       string     // general.name; defaults to the model folder's name
	// llama-quantize's --pure (every quantized tensor the base type, no mix),
	// --leave-output-tensor (output.weight kept as stored), --output-tensor-type and
	// --token-embedding-type (nil: the mix decides).
	Pure, LeaveOutput         bool
	OutputType, TokenEmbdType *gguf.Type
}

// PlannedTensor is one output tensor.
type PlannedTensor struct {
	Name      string `json:"name"`
	Source    string `json:"source,omitempty"` // HF tensor ("" when generated)
	SrcDType  string `json:"source_dtype,omitempty"`
	Transform string `json:"transform,omitempty"`
	// Shape is in GGUF order for every format: shape[0] is the row length.
	Shape []uint64 `json:"shape"`
	// Type is the encoding: a ggml type name ("Q4_K") for GGUF, gqf's description of its
	// encoding ("int4 g128 asymmetric, fp16 scale, uint8 zero") for gqf.
	Type     string `json:"type"`
	Wanted   string `json:"wanted,omitempty"` // set when a fallback changed the type
	Reason   string `json:"reason,omitempty"`
	Fallback string `json:"fallback,omitempty"`
	// NeedsImatrix: llama-quantize refuses to write this tensor's type without an importance
	// matrix (tensor_requires_imatrix), and so does convert; a dry run reports it.
	NeedsImatrix bool `json:"needs_imatrix,omitempty"`
	// Method is the rounding method of a quantized tensor ("rtn", "imatrix", "gptq", "awq").
	Method string `json:"method,omitempty"`
	// Predicted is the KL the tensor's encoding is predicted to add (--target-bpw's allocated
	// weights: target.go).
	Predicted float64 `json:"predicted_kl,omitempty"`
	Note      string  `json:"note,omitempty"`
	Bytes     uint64  `json:"bytes"`

	ref   arch.TensorRef
	typ   gguf.Type // GGUF
	trans arch.Transform
	gen   bool
	// Weight reports whether the tensor is a weight of the model (graph constants are not:
	// they do not count in the parameters and bits per weight).
	weight bool
	// enc writes the tensor's bytes (set by the format's policy).
	enc Encoder
	// values are the contents of a generated tensor (rope_freqs, graph constants).
	values []float32
	// fold is the AWQ or SmoothQuant scaling folded into the tensor (nil: none).
	fold *Fold
	// again marks a tensor that layer-sequential AWQ encodes once for the running model and
	// again, for the file, once a later stage's scaling is folded into its rows: its encoder
	// is not finished in between, so its rounder keeps the Hessian it read (the statistics
	// free it when its stage advances).
	again bool
	// offset is added to every value read from an HF checkpoint (arch.Tensor.Offset: Gemma's
	// norms); row0 is the first row of the source a tensor cut from a fused one starts at.
	offset float32
	row0   int
	// parts are the HF tensors a stack of expert matrices is read from, one per expert in
	// expert order (arch.Tensor.Parts; nil for any other tensor, and for a GGUF source).
	parts []string
}

// sources lists the source tensors a planned tensor is read from.
func (t *PlannedTensor) sources() []string {
	switch {
	case t.parts != nil:
		return t.parts
	case t.Source != "":
		return []string{t.Source}
	}
	return nil
}

// Ref is the tensor's model role (a graph constant has Layer −1 and its own name as role).
func (t *PlannedTensor) Ref() arch.TensorRef { return t.ref }

// SetEncoder sets the encoder that writes the tensor (the format's policy does).
func (t *PlannedTensor) SetEncoder(e Encoder) { t.enc = e }

// Encoder returns the tensor's encoder.
func (t *PlannedTensor) Encoder() Encoder { return t.enc }

// Dropped is a source tensor deliberately left out, with the reason.
type Dropped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Part is one file of a split GGUF: its path and the bytes of tensor data it holds; a part
// holding one tensor larger than the limit is over it (OverLimit), as with gguf-split.
type Part struct {
	Path      string `json:"path"`
	Bytes     uint64 `json:"tensor_bytes"`
	OverLimit bool   `json:"over_limit,omitempty"`
}

// Plan is everything execute will do, decided before a byte is written.
type Plan struct {
	Model    string          `json:"model"`
	Arch     string          `json:"architecture"`
	Format   string          `json:"format"`
	Scheme   string          `json:"scheme"`
	FileType uint32          `json:"file_type,omitempty"` // GGUF general.file_type
	Method   string          `json:"method,omitempty"`
	Tensors  []PlannedTensor `json:"tensors"`
	Dropped  []Dropped       `json:"dropped,omitempty"`
	// Fallbacks counts the tensors whose rows do not fit the scheme's block or group and
	// took another encoding.
	Fallbacks   int    `json:"fallbacks"`
	OutputBytes uint64 `json:"tensor_bytes"`
	Params      uint64 `json:"parameters"`
	// BPW is over every stored weight (graph constants excluded); BPWLinear over the linear
	// layers of the blocks only (q, k, v, o, gate, up, down), as llama.cpp's tables count.
	BPW       float64 `json:"bpw"`
	BPWLinear float64 `json:"bpw_linear"`

	// gqf: the graph's fixed length, how activations are represented and were calibrated,
	// the graph's size and the folded scalings of AWQ or SmoothQuant.
	MaxLen      int      `json:"max_len,omitempty"`
	Activations string   `json:"activations,omitempty"`
	Calibration string   `json:"calibration,omitempty"`
	Nodes       int      `json:"graph_nodes,omitempty"`
	ActCount    int      `json:"graph_activations,omitempty"`
	Folds       []string `json:"folds,omitempty"`
	// Seconds is the time spent executing the plan (reading, rounding, encoding, writing).
	Seconds float64 `json:"seconds,omitempty"`
	// Parts are the files of a GGUF split by SplitMaxSize, in order (empty: one file).
	Parts []Part `json:"parts,omitempty"`
	// Target is what --target-bpw or --target-size chose (nil for a scheme).
	Target *Target `json:"target,omitempty"`
	// PredictedKL is the sum of the tensors' Predicted: the KL the sensitivities predict for
	// the weights they measured (--target-bpw, or --sensitivity with a scheme).
	PredictedKL float64 `json:"predicted_kl,omitempty"`

	spec                   *arch.Spec
	allBits, linBits, linN float64
	// seqFolds, when set, are the options of layer-sequential AWQ: executeSequential searches
	// each stage's scalings in turn (PrepareFolds with Sequential).
	seqFolds *FoldOptions
}

// Spec is the model spec the plan was made for.
func (p *Plan) Spec() *arch.Spec { return p.spec }

// Choose decides one tensor's encoding for MakePlanWith: its type name, the bytes it stores,
// the encoder that writes it and the plan's remarks. skip leaves the tensor out (gqf stores no
// rope_freqs).
type Choose func(t arch.Tensor, shape []uint64) (pt PlannedTensor, skip bool, err error)

// MakePlan maps every source tensor to a GGUF tensor of the scheme or reports it. It reads no
// weights.
func MakePlan(inv *Inventory, opts PlanOptions) (*Plan, error) {
	preset, err := PresetByName(opts.Scheme)
	if err != nil {
		return nil, err
	}
	if err := arch.CheckGGUF(inv.Spec); err != nil {
		return nil, fmt.Errorf("%s: %w", inv.Dir, err)
	}
	st := &policyState{preset: preset, overrides: opts.Overrides, spec: inv.Spec, tied: inv.Spec.Tied, hasImatrix: opts.HasImatrix,
		pure: opts.Pure, leaveOutput: opts.LeaveOutput, outputType: opts.OutputType, tokenEmbdType: opts.TokenEmbdType}
	stored := map[arch.TensorRef]gguf.Type{}
	for _, t := range inv.Family.Tensors(inv.Spec) {
		if c := categoryOf(t.Ref.GGUFName()); c == catAttnV || c == catAttnQKV {
			st.nAttnV++
		}
		if src, ok := inv.Tensors[inv.sourceName(t)]; ok {
			if typ, err := gguf.ParseType(src.DType); err == nil {
				stored[t.Ref] = typ
			}
		}
	}
	st.source = func(r arch.TensorRef) (gguf.Type, bool) { t, ok := stored[r]; return t, ok }
	p, err := MakePlanWith(inv, "gguf", preset.Name, func(t arch.Tensor, shape []uint64) (PlannedTensor, bool, error) {
		c := st.choose(t.Ref, shape)
		pt := PlannedTensor{typ: c.Type, Type: c.Type.String(), Reason: c.Reason, Fallback: c.Fallback, NeedsImatrix: c.NeedsImatrix}
		if c.Fallback != "" {
			pt.Wanted = c.Wanted.String()
		}
		n := gguf.ElementCount(shape)
		pt.Bytes = uint64(c.Type.RowBytes(int(shape[0]))) * (n / shape[0])
		pt.enc = &ggufEncoder{typ: c.Type, name: t.Ref.GGUFName(), bytes: pt.Bytes}
		if len(shape) == 3 { // a stack of experts: each expert's rows take its own importance
			pt.enc.(*ggufEncoder).expertRows = int(shape[1])
		}
		return pt, false, nil
	})
	if err != nil {
		return nil, err
	}
	p.FileType = preset.FileType
	return p, nil
}

// MakePlanWith maps every source tensor to an output tensor of the format with choose, or
// reports it: missing tensors, shapes the config does not imply and unmapped tensors are one
// error; tensors the family ignores (rotary buffers) and a tied model's lm_head are dropped
// with a reason. It reads no weights.
func MakePlanWith(inv *Inventory, format, scheme string, choose Choose) (*Plan, error) {
	spec := inv.Spec
	p := &Plan{Model: inv.Dir, Arch: spec.GGUFArch, Format: format, Scheme: scheme, spec: spec}
	if format != "gguf" {
		p.Arch = spec.HFArch
		if inv.gg != nil {
			return nil, fmt.Errorf("%s: a GGUF file converts to GGUF only: convert the HuggingFace folder to %s", inv.Dir, format)
		}
	}
	used := map[string]bool{}
	var missing, badShape []string
	for _, t := range inv.Family.Tensors(spec) {
		name := inv.sourceName(t)
		if t.Parts != nil && inv.gg == nil { // a stack of experts: each part, of one expert's shape
			bad := false
			for _, part := range t.Parts {
				src, ok := inv.Tensors[part]
				used[part] = true
				switch {
				case !ok:
					missing = append(missing, part)
					bad = true
				case !equalShape(src.Shape, t.HFShape()):
					badShape = append(badShape, fmt.Sprintf("%s: shape %v, config implies %v", part, src.Shape, t.HFShape()))
					bad = true
				case src.DType != inv.Tensors[t.Parts[0]].DType:
					badShape = append(badShape, fmt.Sprintf("%s: dtype %s, but %s is %s", part, src.DType, t.Parts[0], inv.Tensors[t.Parts[0]].DType))
					bad = true
				}
			}
			if bad {
				continue
			}
		} else if !t.Generated {
			src, ok := inv.Tensors[name]
			want := t.Shape
			if inv.gg == nil {
				want = t.HFShape() // a fused tensor, whole
			}
			switch {
			case used[name] && !equalShape(src.Shape, want):
				continue // a fused tensor already reported
			case !ok:
				missing = append(missing, name)
				used[name] = true
				continue
			case !equalShape(src.Shape, want):
				used[name] = true
				badShape = append(badShape, fmt.Sprintf("%s: shape %v, config implies %v", name, src.Shape, want))
				continue
			}
			used[name] = true
		}
		// GGUF shapes are reversed: ne[0] is the row length (HF in_features).
		var shape []uint64
		for i := len(t.Shape) - 1; i >= 0; i-- {
			shape = append(shape, uint64(t.Shape[i]))
		}
		pt, skip, err := choose(t, shape)
		if err != nil {
			return nil, err
		}
		if skip {
			continue
		}
		pt.Name, pt.Source, pt.ref, pt.gen, pt.Shape, pt.weight = t.Ref.GGUFName(), name, t.Ref, t.Generated, shape, true
		if t.Generated {
			pt.Source = ""
		} else {
			pt.SrcDType = inv.Tensors[name].DType
		}
		if inv.gg == nil { // values and rows as the HF checkpoint holds them
			pt.offset, pt.row0, pt.parts = t.Offset, t.SrcRow0, t.Parts
			if t.Parts != nil {
				pt.Source = stackSource(t.Parts)
			}
			var notes []string
			if t.SrcShape != nil {
				notes = append(notes, fmt.Sprintf("rows %d-%d of %d", t.SrcRow0, t.SrcRow0+t.Shape[0], t.SrcShape[0]))
			}
			if t.Offset != 0 {
				notes = append(notes, fmt.Sprintf("%+g", t.Offset))
			}
			pt.Note = strings.Join(notes, ", ")
		}
		// A GGUF source is in GGUF layout already.
		if format == "gguf" && inv.gg == nil {
			pt.trans = t.Transform
			pt.Transform = t.Transform.String()
		}
		if t.Generated {
			switch t.Ref.Role {
			case arch.RopeFreqs:
				pt.values = arch.RopeFreqFactors(spec)
			case arch.RopeFactorsLong:
				pt.values, _ = arch.LongRopeFactors(spec, spec.RopeScaling.OriginalContext+1)
			case arch.RopeFactorsShort:
				pt.values, _ = arch.LongRopeFactors(spec, 0)
			}
		}
		if len(pt.Name) > 63 {
			return nil, fmt.Errorf("%s: tensor name longer than 63 bytes", pt.Name)
		}
		p.Add(pt)
	}
	var unmapped []string
	for _, name := range inv.Names() {
		if used[name] {
			continue
		}
		if reason, ok := inv.Family.IgnoredHF(name); ok {
			p.Dropped = append(p.Dropped, Dropped{name, reason})
			continue
		}
		if spec.Tied && name == "lm_head.weight" {
			p.Dropped = append(p.Dropped, Dropped{name, "tie_word_embeddings: output shares token_embd"})
			continue
		}
		unmapped = append(unmapped, name)
	}
	var probs []string
	if len(missing) > 0 {
		probs = append(probs, fmt.Sprintf("missing tensors the config implies: %s", strings.Join(missing, ", ")))
	}
	if len(badShape) > 0 {
		probs = append(probs, strings.Join(badShape, "; "))
	}
	if len(unmapped) > 0 {
		sort.Strings(unmapped)
		probs = append(probs, fmt.Sprintf("%d unmapped tensors for %s: %s", len(unmapped), spec.HFArch, strings.Join(unmapped, ", ")))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", inv.Dir, strings.Join(probs, "; "))
	}
	return p, nil
}

// stackSource names the parts of a stack of experts in a plan: the first part with its
// expert index written as the range ("model.layers.0.mlp.experts.{0..7}.up_proj.weight").
func stackSource(parts []string) string {
	first, last := parts[0], parts[len(parts)-1]
	i := 0 // the common prefix, then the first index that differs
	for i < len(first) && i < len(last) && first[i] == last[i] {
		i++
	}
	for i > 0 && first[i-1] >= '0' && first[i-1] <= '9' {
		i--
	}
	j := strings.IndexByte(first[i:], '.')
	if len(parts) == 1 || j < 0 {
		return first
	}
	k := strings.IndexByte(last[i:], '.')
	return fmt.Sprintf("%s{%s..%s}%s", first[:i], first[i:i+j], last[i:i+k], first[i+j:])
}

// Add appends a tensor to the plan and updates its totals. A tensor that is not a weight of
// the model (a graph constant: AddConstant) does not count in the parameters and bpw.
func (p *Plan) Add(pt PlannedTensor) {
	p.Tensors = append(p.Tensors, pt)
	p.OutputBytes += pt.Bytes
	if pt.Fallback != "" {
		p.Fallbacks++
	}
	if !pt.weight {
		return
	}
	n := gguf.ElementCount(pt.Shape)
	p.Params += n
	p.allBits += 8 * float64(pt.Bytes)
	if pt.ref.Role.IsLinear() {
		p.linBits += 8 * float64(pt.Bytes)
		p.linN += float64(n)
	}
	p.BPW = p.allBits / float64(p.Params)
	if p.linN > 0 {
		p.BPWLinear = p.linBits / p.linN
	}
}

// AddConstant appends a generated tensor that is not a weight (a graph constant): shape in
// GGUF order, its values, and the encoder that writes them.
func (p *Plan) AddConstant(name string, shape []uint64, typ string, bytes uint64, values []float32, enc Encoder) {
	p.Add(PlannedTensor{Name: name, Shape: shape, Type: typ, Bytes: bytes, gen: true, values: values, enc: enc,
		ref: arch.TensorRef{Role: arch.Role(name), Layer: -1}})
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Text renders the plan for --dry-run.
func (p *Plan) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model:  %s\narch:   %s\n", p.Model, p.Arch)
	switch p.Format {
	case "gguf":
		fmt.Fprintf(&b, "scheme: %s (file_type %d", p.Scheme, p.FileType)
		if p.Method != "" && p.Method != "rtn" {
			fmt.Fprintf(&b, ", method %s", p.Method)
		}
		b.WriteString(")\n")
	default:
		fmt.Fprintf(&b, "scheme: %s (%s, method %s, graph length %d, activations %s)\n", p.Scheme, p.Format, p.Method, p.MaxLen, p.Activations)
	}
	if p.Calibration != "" {
		fmt.Fprintf(&b, "calibration: %s\n", p.Calibration)
	}
	if tg := p.Target; tg != nil {
		exact := "exact"
		if !tg.Exact {
			exact = "costs rounded up"
		}
		fmt.Fprintf(&b, "target: %d weights chosen within %d bytes (%d used); predicted KL %.6g (no choice within the budget below %.6g; %s); other tensors as %s\n",
			tg.Weights, tg.Budget, tg.Used, p.PredictedKL, tg.BoundKL, exact, tg.Rules)
		src := "measured now"
		if !tg.Measured {
			src = "read from " + tg.Sensitivity
			if len(tg.Added) > 0 {
				src += ", extended with " + strings.Join(tg.Added, ", ") + " and written back"
			}
		} else if tg.Sensitivity != "" {
			src += ", written to " + tg.Sensitivity
		}
		fmt.Fprintf(&b, "sensitivities: %s; probe: %s\n", src, tg.Probe)
	}
	for _, f := range p.Folds {
		fmt.Fprintf(&b, "fold: %s\n", f)
	}
	width := 7
	for _, t := range p.Tensors {
		width = max(width, len(t.Type))
	}
	fmt.Fprintf(&b, "%-28s %-14s %-*s %-10s %s\n", "tensor", "shape", width, "type", "bytes", "source / notes")
	for _, t := range p.Tensors {
		shape := make([]string, len(t.Shape))
		for i, s := range t.Shape {
			shape[i] = fmt.Sprint(s)
		}
		notes := t.Source
		if notes == "" {
			notes = "(generated)"
		}
		if t.Transform != "" {
			notes += " [" + t.Transform + "]"
		}
		for _, n := range []string{t.Reason, t.Note} {
			if n != "" {
				notes += "; " + n
			}
		}
		if t.Method != "" && t.Method != p.Method {
			notes += "; method " + t.Method
		}
		if t.Fallback != "" {
			notes += "; FALLBACK " + t.Fallback
		}
		if t.NeedsImatrix {
			notes += "; needs an importance matrix"
		}
		if t.Predicted != 0 {
			notes += fmt.Sprintf("; predicted KL %.3g", t.Predicted)
		}
		fmt.Fprintf(&b, "%-28s %-14s %-*s %-10d %s\n", t.Name, strings.Join(shape, "x"), width, t.Type, t.Bytes, notes)
	}
	for _, d := range p.Dropped {
		fmt.Fprintf(&b, "dropped %s: %s\n", d.Name, d.Reason)
	}
	fmt.Fprintf(&b, "%d tensors, %d parameters, %d bytes of tensor data, %.4f bpw (linear layers %.4f), %d fallbacks",
		len(p.Tensors), p.Params, p.OutputBytes, p.BPW, p.BPWLinear, p.Fallbacks)
	if p.Target != nil && p.Target.FileBytes > 0 {
		fmt.Fprintf(&b, ", file %d bytes", p.Target.FileBytes)
	}
	if p.PredictedKL > 0 {
		fmt.Fprintf(&b, ", predicted KL %.6g (the measured weights)", p.PredictedKL)
	}
	if p.Nodes > 0 {
		fmt.Fprintf(&b, "; graph: %d nodes, %d activations", p.Nodes, p.ActCount)
	}
	b.WriteString("\n")
	return b.String()
}

// CheckEncoders refuses a plan with a tensor type gquant cannot encode, naming the first.
func (p *Plan) CheckEncoders() error {
	for _, t := range p.Tensors {
		if _, err := quantize.For(t.typ); err != nil && t.enc != nil {
			return fmt.Errorf("--scheme %s: %s: %w", p.Scheme, t.Name, err)
		}
	}
	return nil
}

// CheckImatrix refuses a plan with tensors whose type llama-quantize writes only with an
// importance matrix (the i-quants of 3 bits and fewer; Q2_K in a Q2_K_S file) when none is
// given, naming the first, as llama-quantize does.
func (p *Plan) CheckImatrix(have bool) error {
	if have {
		return nil
	}
	for _, t := range p.Tensors {
		if t.NeedsImatrix {
			return problems.Usage(fmt.Errorf("--scheme %s: %s: %s needs an importance matrix, as llama-quantize requires: pass --stats FILE (gquant calibrate --imatrix, or llama-imatrix's output)",
				p.Scheme, t.Name, t.Type))
		}
	}
	return nil
}
