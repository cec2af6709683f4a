package gqf

import (
	"encoding/json"
	"fmt"
	"strings"

	problemlist "github.com/gquant/gquant/internal/problems"
)

// Report is what `gquant inspect` shows of a gqf file; it marshals to stable JSON and
// String renders it as text.
type Report struct {
	File            string          `json:"file"`
	Format          string          `json:"format"`
	FormatVersion   uint32          `json:"format_version"`
	ManifestVersion uint32          `json:"manifest_version"`
	Scheme          string          `json:"scheme"`
	Family          string          `json:"family"`
	HFArchitecture  string          `json:"hf_architecture"`
	Config          json.RawMessage `json:"config"`
	TokenizerKeys   int             `json:"tokenizer_metadata_keys"`
	TokenizerJSON   int             `json:"tokenizer_json_bytes"`
	Provenance      *Provenance     `json:"provenance,omitempty"`
	Tensors         []TensorReport  `json:"tensors"`
	Params          uint64          `json:"parameters"`
	Bytes           uint64          `json:"tensor_bytes"`
	BPW             float64         `json:"bpw"`
	// LinearInputs describes the run-time quantization of linear layer inputs, if any.
	LinearInputs string       `json:"linear_inputs,omitempty"`
	Graph        *GraphReport `json:"graph,omitempty"`
}

// TensorReport is one stored tensor.
type TensorReport struct {
	Name     string  `json:"name"`
	Role     string  `json:"role"`
	Shape    []int64 `json:"shape"`
	Encoding string  `json:"encoding"`
	Bytes    uint64  `json:"bytes"`
	Offset   uint64  `json:"offset"`
}

// GraphReport is the decoder graph.
type GraphReport struct {
	MaxLen      uint32        `json:"max_len"`
	Inputs      []ValueReport `json:"inputs"`
	Outputs     []string      `json:"outputs"`
	Nodes       []NodeReport  `json:"nodes"`
	Activations []ValueReport `json:"activations"`
}

// NodeReport is one graph node.
type NodeReport struct {
	Name    string         `json:"name"`
	Op      string         `json:"op"`
	Inputs  []string       `json:"inputs"`
	Outputs []string       `json:"outputs"`
	Attrs   map[string]any `json:"attrs,omitempty"`
}

// ValueReport is one graph value with its encoding.
type ValueReport struct {
	Name     string  `json:"name"`
	Dtype    string  `json:"dtype"`
	Shape    []int64 `json:"shape"`
	Encoding string  `json:"encoding,omitempty"`
	Scale    float32 `json:"scale,omitempty"`
	Offset   int32   `json:"offset,omitempty"`
}

// Inspect opens a gqf file and describes it.
func Inspect(path string) (any, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Report(), nil
}

// Report describes the file.
func (f *File) Report() *Report {
	m := f.Manifest
	r := &Report{File: f.Path, Format: "gqf", FormatVersion: FormatVersion, ManifestVersion: m.Version,
		Scheme: m.Scheme, Family: m.Config.GetFamily(), HFArchitecture: m.Config.GetHfArchitecture(),
		Provenance: m.Provenance, TokenizerKeys: len(m.Tokenizer.GetMetadata()), TokenizerJSON: len(m.Tokenizer.GetTokenizerJson()),
		LinearInputs: m.LinearInputs.Describe()}
	if json.Valid(m.Config.GetConfigJson()) {
		r.Config = json.RawMessage(m.Config.GetConfigJson())
	}
	for _, t := range m.Tensors {
		var size uint64
		for _, b := range t.Buffers() {
			size += b.GetSize()
		}
		n, _ := elements(t.Shape)
		r.Params += n
		r.Bytes += size
		r.Tensors = append(r.Tensors, TensorReport{Name: t.Name, Role: t.Role, Shape: t.Shape,
			Encoding: t.Encoding.Describe(), Bytes: size, Offset: t.Data.GetOffset()})
	}
	if r.Params > 0 {
		r.BPW = 8 * float64(r.Bytes) / float64(r.Params)
	}
	if g := m.Graph; g != nil {
		gr := &GraphReport{MaxLen: g.MaxLen, Outputs: g.Outputs}
		for _, v := range g.Inputs {
			gr.Inputs = append(gr.Inputs, valueReport(v))
		}
		for _, nd := range g.Nodes {
			nr := NodeReport{Name: nd.Name, Op: nd.Op, Inputs: nd.Inputs, Outputs: nd.Outputs}
			for _, a := range nd.Attrs {
				if nr.Attrs == nil {
					nr.Attrs = map[string]any{}
				}
				switch {
				case a.Ints != nil:
					nr.Attrs[a.Name] = a.Ints
				case a.F != 0:
					nr.Attrs[a.Name] = a.F
				default:
					nr.Attrs[a.Name] = a.I
				}
			}
			gr.Nodes = append(gr.Nodes, nr)
		}
		for _, v := range g.Activations {
			gr.Activations = append(gr.Activations, valueReport(v))
		}
		r.Graph = gr
	}
	return r
}

func valueReport(v *Value) ValueReport {
	vr := ValueReport{Name: v.Name, Dtype: v.Dtype.String(), Shape: v.Shape}
	if e := v.Encoding; e != nil {
		vr.Encoding = e.Describe()
		if len(e.Scale) == 1 && len(e.Offset) == 1 {
			vr.Scale, vr.Offset = e.Scale[0], e.Offset[0]
		}
	}
	return vr
}

// Describe names an encoding briefly, e.g. "int8 sym per-channel (f32 scales)",
// "int4 LPBQ b64 (f32 channel scales, 8-bit decompressed)", "uint16 per-tensor".
func (e *Encoding) Describe() string {
	if e == nil {
		return ""
	}
	dt := strings.ToLower(e.Dtype.String())
	if e.Dtype.IsCode() && e.Bits != uint32(e.Dtype.Bits()) {
		dt = fmt.Sprintf("%s(%d-bit)", dt, e.Bits)
	}
	sym := "asym"
	if e.Symmetric {
		sym = "sym"
	}
	st := strings.ToLower(e.ScaleType.String())
	switch e.Granularity {
	case Granularity_FLOAT:
		return dt
	case Granularity_PER_TENSOR:
		return dt + " per-tensor"
	case Granularity_PER_CHANNEL:
		return fmt.Sprintf("%s %s per-channel (%s scales)", dt, sym, st)
	case Granularity_PER_BLOCK:
		return fmt.Sprintf("%s %s block %d (%s scales)", dt, sym, e.BlockSize, st)
	case Granularity_LPBQ:
		return fmt.Sprintf("%s LPBQ block %d (%s channel scales, %d-bit decompressed)", dt, e.BlockSize, st, e.DecompressedBits)
	case Granularity_PER_TOKEN:
		return fmt.Sprintf("%s %s per-token (dynamic)", dt, sym)
	}
	return e.Granularity.String()
}

// String renders the report as text: a summary, the tensor table and the graph.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "file: %s\nformat: gqf v%d (manifest v%d)\nscheme: %s\narchitecture: %s (%s)\n",
		r.File, r.FormatVersion, r.ManifestVersion, r.Scheme, r.Family, r.HFArchitecture)
	fmt.Fprintf(&b, "tokenizer: %d metadata keys, tokenizer.json %d bytes\n", r.TokenizerKeys, r.TokenizerJSON)
	if p := r.Provenance; p != nil {
		for _, s := range p.Sources {
			fmt.Fprintf(&b, "source: %s sha256 %s\n", s.Path, s.Sha256)
		}
		if p.StatsPath != "" {
			fmt.Fprintf(&b, "stats: %s sha256 %s\n", p.StatsPath, p.StatsSha256)
		}
		fmt.Fprintf(&b, "calibration: %s\ngquant: %s\ncommand: %s\n", p.Calibration, p.GquantVersion, p.Command)
	}
	if r.LinearInputs != "" {
		fmt.Fprintf(&b, "linear inputs: %s\n", r.LinearInputs)
	}
	fmt.Fprintf(&b, "tensors: %d, %d parameters, %d bytes, %.3f bpw\n", len(r.Tensors), r.Params, r.Bytes, r.BPW)
	for _, t := range r.Tensors {
		fmt.Fprintf(&b, "  %-32s %-14s %-48s %10d\n", problemlist.Printable(t.Name), ShapeString(t.Shape), t.Encoding, t.Bytes)
	}
	if g := r.Graph; g != nil {
		fmt.Fprintf(&b, "graph: %d nodes, %d activations, max_len %d, outputs %s\n", len(g.Nodes), len(g.Activations), g.MaxLen, strings.Join(g.Outputs, ", "))
		enc := map[string]ValueReport{}
		for _, a := range g.Activations {
			enc[a.Name] = a
		}
		for _, n := range g.Nodes {
			var outs []string
			for _, o := range n.Outputs {
				a := enc[o]
				s := fmt.Sprintf("%s %s", problemlist.Printable(o), ShapeString(a.Shape))
				if a.Encoding != "" {
					s += fmt.Sprintf(" %s scale=%g offset=%d", a.Encoding, a.Scale, a.Offset)
				}
				outs = append(outs, s)
			}
			fmt.Fprintf(&b, "  %s(%s) -> %s\n", n.Op, strings.Join(n.Inputs, ", "), strings.Join(outs, ", "))
		}
	}
	return b.String()
}

// ShapeString renders a shape outermost dimension first, as numpy, safetensors and gqf store
// it: "151936x1024" (a scalar: "scalar"). gquant inspect prints every format's shapes so.
func ShapeString(shape []int64) string {
	if len(shape) == 0 {
		return "scalar"
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	return strings.Join(dims, "x")
}
