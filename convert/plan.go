// Package convert turns a HuggingFace checkpoint into a GGUF file in three steps: inventory
// (headers only), plan (a pure function of the inventory and the options) and execute (streams
// row blocks through transform → quantize → writer on a bounded pool).
package convert

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/runtime/arch"
)

// SourceTensor is one tensor of the input checkpoint, as its header describes it.
type SourceTensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	File  string `json:"file"`
}

// PlanOptions are the user's choices that shape a plan.
type PlanOptions struct {
	Scheme     string     // preset name
	Overrides  []Override // --tensor-type rules, first match wins
	HasImatrix bool       // an importance matrix will be used (changes llama-quantize's mix)
	Name       string     // general.name; defaults to the model folder's name
}

// PlannedTensor is one output tensor.
type PlannedTensor struct {
	Name      string   `json:"name"`
	Source    string   `json:"source,omitempty"` // HF tensor ("" when generated)
	SrcDType  string   `json:"source_dtype,omitempty"`
	Transform string   `json:"transform,omitempty"`
	Shape     []uint64 `json:"shape"` // GGUF order: shape[0] is the row length
	Type      string   `json:"type"`
	Wanted    string   `json:"wanted,omitempty"` // set when a fallback changed the type
	Reason    string   `json:"reason,omitempty"`
	Fallback  string   `json:"fallback,omitempty"`
	Bytes     uint64   `json:"bytes"`

	ref   arch.TensorRef
	typ   gguf.Type
	trans arch.Transform
	gen   bool
}

// Dropped is a source tensor deliberately left out, with the reason.
type Dropped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Plan is everything execute will do, decided before a byte is written.
type Plan struct {
	Model       string          `json:"model"`
	Arch        string          `json:"architecture"`
	Scheme      string          `json:"scheme"`
	FileType    uint32          `json:"file_type"`
	Tensors     []PlannedTensor `json:"tensors"`
	Dropped     []Dropped       `json:"dropped,omitempty"`
	Fallbacks   int             `json:"fallbacks"`
	OutputBytes uint64          `json:"tensor_bytes"`
	Params      uint64          `json:"parameters"`
	BPW         float64         `json:"bpw"`
	BPWLinear   float64         `json:"bpw_linear"`

	spec *arch.Spec
}

// Spec is the model spec the plan was made for.
func (p *Plan) Spec() *arch.Spec { return p.spec }

// MakePlan maps every source tensor to an output tensor or reports it. It reads no weights.
func MakePlan(inv *Inventory, opts PlanOptions) (*Plan, error) {
	preset, err := PresetByName(opts.Scheme)
	if err != nil {
		return nil, err
	}
	spec := inv.Spec
	expected := inv.Family.Tensors(spec)
	st := &policyState{preset: preset, overrides: opts.Overrides, spec: spec,
		tied: spec.Tied, hasImatrix: opts.HasImatrix}
	for _, t := range expected {
		if t.Ref.Role == arch.AttnV {
			st.nAttnV++
		}
	}
	p := &Plan{Model: inv.Dir, Arch: spec.GGUFArch, Scheme: preset.Name, FileType: preset.FileType, spec: spec}

	used := map[string]bool{}
	var missing, badShape []string
	var linParams, linBits, allBits float64
	for _, t := range expected {
		pt := PlannedTensor{Name: t.Ref.GGUFName(), Source: t.HFName, ref: t.Ref, trans: t.Transform, gen: t.Generated}
		pt.Transform = t.Transform.String()
		if !t.Generated {
			src, ok := inv.Tensors[t.HFName]
			if !ok {
				missing = append(missing, t.HFName)
				continue
			}
			used[t.HFName] = true
			if !equalShape(src.Shape, t.Shape) {
				badShape = append(badShape, fmt.Sprintf("%s: shape %v, config implies %v", t.HFName, src.Shape, t.Shape))
				continue
			}
			pt.SrcDType = src.DType
		}
		// GGUF shapes are reversed: ne[0] is the row length (HF in_features).
		for i := len(t.Shape) - 1; i >= 0; i-- {
			pt.Shape = append(pt.Shape, uint64(t.Shape[i]))
		}
		c := st.choose(t.Ref, pt.Shape)
		if len(pt.Name) > 63 {
			return nil, fmt.Errorf("%s: tensor name longer than 63 bytes", pt.Name)
		}
		pt.typ, pt.Type, pt.Reason, pt.Fallback = c.Type, c.Type.String(), c.Reason, c.Fallback
		if c.Fallback != "" {
			pt.Wanted = c.Wanted.String()
			p.Fallbacks++
		}
		n := gguf.ElementCount(pt.Shape)
		pt.Bytes = uint64(c.Type.RowBytes(int(pt.Shape[0]))) * (n / pt.Shape[0])
		p.Tensors = append(p.Tensors, pt)
		p.OutputBytes += pt.Bytes
		p.Params += n
		allBits += float64(pt.Bytes) * 8
		if t.Ref.Role.IsLinear() {
			linParams += float64(n)
			linBits += float64(pt.Bytes) * 8
		}
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
	if p.Params > 0 {
		p.BPW = allBits / float64(p.Params)
	}
	if linParams > 0 {
		p.BPWLinear = linBits / linParams
	}
	return p, nil
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
	fmt.Fprintf(&b, "model:  %s\narch:   %s\nscheme: %s (file_type %d)\n", p.Model, p.Arch, p.Scheme, p.FileType)
	fmt.Fprintf(&b, "%-28s %-14s %-7s %-10s %s\n", "tensor", "shape", "type", "bytes", "source / notes")
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
		if t.Reason != "" {
			notes += "; " + t.Reason
		}
		if t.Fallback != "" {
			notes += "; FALLBACK " + t.Fallback
		}
		fmt.Fprintf(&b, "%-28s %-14s %-7s %-10d %s\n", t.Name, strings.Join(shape, "x"), t.Type, t.Bytes, notes)
	}
	for _, d := range p.Dropped {
		fmt.Fprintf(&b, "dropped %s: %s\n", d.Name, d.Reason)
	}
	fmt.Fprintf(&b, "%d tensors, %d parameters, %d bytes of tensor data, %.4f bpw (linear layers %.4f), %d fallbacks\n",
		len(p.Tensors), p.Params, p.OutputBytes, p.BPW, p.BPWLinear, p.Fallbacks)
	return b.String()
}
