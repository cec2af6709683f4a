package convert

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/atomicfile"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// GQFOptions are the inputs of a conversion to gqf besides the folder and the output path.
type GQFOptions struct {
	// Scheme is "w4a16", "w4a16-lpbq", "w4a8", "w8a16" or "f16" (see GQFSchemes).
	Scheme string
	// Method rounds the weights of the linear layers: "rtn" (min-max), "imatrix"
	// (importance-weighted range search from Stats' Σx²), "gptq" (needs Hessians in Stats) or
	// "awq" (activation-aware scales folded into the preceding norm or projection, searched on
	// the output error from Stats' Hessians, or their diagonal). "": imatrix with Stats, else rtn.
	Method string
	// Stats are calibration statistics (stats.Read), checked against the model before
	// any weight is read; StatsPath is the file they came from (hashed into the provenance).
	Stats     *stats.Stats
	StatsPath string
	// GroupSize is the int4 group of w4a16 and w4a8 (0: 128); rows that are not a whole number
	// of groups take the largest smaller group that fits (down to 16), else 8-bit per channel.
	GroupSize int
	// Sym makes w4a16's int4 groups symmetric (w4a8's always are).
	Sym bool
	// Keep is a regular expression over GGUF tensor names whose matrices stay at 8 bits
	// (int8 per channel) in the 4-bit schemes; "" keeps token_embd and output, as peers do;
	// "none" keeps nothing.
	Keep string
	// Range sets the activation ranges taken from Stats (w8a16, w4a16-lpbq): minmax,
	// percentile or sqnr (the default).
	Range quantize.RangeOptions
	// Smooth is SmoothQuant's migration strength α for w4a8 (0: none): input channels of the
	// layers after each RMSNorm are scaled by max|x|^α / max|w|^(1−α), from Stats.
	Smooth float64
	// GPTQ and AWQ tune those methods (zero values: the references' defaults, 1 % damping
	// and no act-order; an AWQ grid of 20). Act-order always comes with static groups here, as
	// gqf stores contiguous groups.
	GPTQ quantize.GPTQOptions
	AWQ  quantize.AWQOptions
	// Threads bounds the tensors encoded at once (0: one per CPU).
	Threads int
	// MaxLen is the graph's fixed sequence length (0: the model's context, at most 128).
	MaxLen int
	// BlockSize is the LPBQ block of w4a16-lpbq (0: 64).
	BlockSize int
	// Encodings is an AIMET encodings JSON (1.0.0 or 0.6.1) holding an encoding for every
	// activation of the graph. Without it, activation encodings come from Stats (the
	// activations the runtime observes) and from a min-max run of the graph on Corpus (the
	// others; left in float when there is no corpus).
	Encodings string
	// Corpus is the calibration text (one sample per line); CalibLines lines are read (0: 64)
	// and cut into at most CalibWindows windows of MaxLen tokens (0: 8).
	Corpus       string
	CalibLines   int
	CalibWindows int
	Force        bool // overwrite an existing output
	DryRun       bool // plan only
	// Command and Version are recorded in the provenance.
	Command string
	Version string
}

// GQFPlan is what a gqf conversion does (or, with DryRun, would do).
type GQFPlan struct {
	Model       string          `json:"model"`
	Arch        string          `json:"architecture"`
	Scheme      string          `json:"scheme"`
	Method      string          `json:"method"`
	MaxLen      int             `json:"max_len"`
	Activations string          `json:"activations"`
	Calibration string          `json:"calibration,omitempty"`
	Tensors     []GQFPlanTensor `json:"tensors"`
	Nodes       int             `json:"graph_nodes"`
	ActCount    int             `json:"graph_activations"`
	Params      uint64          `json:"parameters"`
	Bytes       uint64          `json:"tensor_bytes"`
	// BPW is over every stored tensor (graph constants excluded); BPWLinear over the linear
	// layers of the blocks only (q, k, v, o, gate, up, down), as llama.cpp's tables count.
	BPW       float64 `json:"bpw"`
	BPWLinear float64 `json:"bpw_linear"`
	// Fallbacks counts matrices whose rows do not fit the scheme's group and took a smaller
	// group or 8 bits.
	Fallbacks int `json:"fallbacks"`
	// Seconds is the time spent encoding weights (quantization, all methods included).
	Seconds float64 `json:"quantize_seconds"`
	// Folds lists the AWQ or SmoothQuant scalings applied ("blk.0.attn_norm: α 0.35, loss −41 %").
	Folds []string `json:"folds,omitempty"`

	linParams, linBytes uint64
}

// GQFPlanTensor is one stored tensor.
type GQFPlanTensor struct {
	Name     string `json:"name"`
	Source   string `json:"source,omitempty"`
	Shape    []int  `json:"shape"`
	Encoding string `json:"encoding"`
	Bytes    uint64 `json:"bytes"`
	Note     string `json:"note,omitempty"`
}

// Text renders the plan.
func (p *GQFPlan) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model:  %s\narch:   %s\nscheme: %s (gqf, method %s, graph length %d, activations %s)\n", p.Model, p.Arch, p.Scheme, p.Method, p.MaxLen, p.Activations)
	if p.Calibration != "" {
		fmt.Fprintf(&b, "calibration: %s\n", p.Calibration)
	}
	for _, f := range p.Folds {
		fmt.Fprintf(&b, "fold: %s\n", f)
	}
	for _, t := range p.Tensors {
		src := t.Source
		if src == "" {
			src = "(generated)"
		}
		if t.Note != "" {
			src += " (" + t.Note + ")"
		}
		fmt.Fprintf(&b, "%-28s %-14s %-50s %-10d %s\n", t.Name, fmt.Sprint(t.Shape), t.Encoding, t.Bytes, src)
	}
	fmt.Fprintf(&b, "%d tensors, %d parameters, %d bytes, %.4f bpw (linear layers %.4f), %d fallbacks; graph: %d nodes, %d activations\n",
		len(p.Tensors), p.Params, p.Bytes, p.BPW, p.BPWLinear, p.Fallbacks, p.Nodes, p.ActCount)
	return b.String()
}

// gqfScheme is a preset: the codec of the linear layers and of the tensors kept at 8 bits,
// the static activation bit width (0: float activations) and whether linear inputs are
// quantized per token at run time.
type gqfScheme struct {
	name     string
	manifest string // the scheme recorded in the file
	linear   string // "int4" (groups), "lpbq4", "int8", "f16"
	kept     string // codec of token_embd, output and --keep matches
	actBits  int
	dynamic  bool // int8 per-token linear inputs (w4a8)
	sym      bool // int4 groups always symmetric
	doc      string
}

var gqfSchemes = []gqfScheme{
	{name: "w4a16", manifest: "w4a16", linear: "int4", kept: "int8",
		doc: "int4 groups (asymmetric, fp16 scale, uint8 zero; --sym: symmetric), float activations"},
	{name: "w4a16-lpbq", manifest: "w4a16", linear: "lpbq4", kept: "int8", actBits: 16,
		doc: "int4 LPBQ (Qualcomm), uint16 activations"},
	{name: "w4a8", manifest: "w4a8", linear: "int4", kept: "int8", dynamic: true, sym: true,
		doc: "symmetric int4 groups, linear inputs int8 per token at run time"},
	{name: "w8a16", manifest: "w8a16", linear: "int8", kept: "int8", actBits: 16,
		doc: "int8 per-channel weights, uint16 static activation encodings"},
	{name: "f16", manifest: "f16", linear: "f16", kept: "f16", doc: "fp16 weights"},
}

// GQFSchemes lists the gqf scheme names.
func GQFSchemes() []string {
	var out []string
	for _, s := range gqfSchemes {
		out = append(out, s.name)
	}
	return out
}

func gqfSchemeByName(name string) (gqfScheme, error) {
	for _, s := range gqfSchemes {
		if s.name == name {
			return s, nil
		}
	}
	return gqfScheme{}, fmt.Errorf("scheme: %q is not a gqf scheme (want %s)", name, strings.Join(GQFSchemes(), ", "))
}

// defaultKeep is the --keep pattern when none is given: the embedding and the output head.
const defaultKeep = `^(token_embd|output)\.weight$`

// ConvertGQF converts a HuggingFace folder into a gqf file: weights encoded by the scheme and
// method, the decoder graph over MaxLen positions and, for quantized activations, their
// encodings (from Encodings, or Stats and a calibration run on Corpus). Statistics are
// checked against the model before any weight is read; the output appears only when
// complete.
func ConvertGQF(dir, out string, o GQFOptions) (*GQFPlan, error) {
	sch, err := gqfSchemeByName(o.Scheme)
	if err != nil {
		return nil, err
	}
	if !o.DryRun {
		if err := atomicfile.CheckNew(out, o.Force); err != nil {
			return nil, err
		}
	}
	if sch.actBits > 0 && o.Encodings == "" && o.Corpus == "" && o.Stats == nil && !o.DryRun {
		return nil, fmt.Errorf("scheme %s: activation encodings need --encodings FILE, --stats FILE or --corpus FILE", sch.name)
	}
	inv, err := Open(dir, InventoryOptions{})
	if err != nil {
		return nil, err
	}
	defer inv.Close()
	spec := inv.Spec
	q, err := newGQFQuantizer(inv, sch, &o)
	if err != nil {
		return nil, err
	}
	L := o.MaxLen
	if L <= 0 {
		L = min(spec.Context, 128)
	}
	if L <= 0 {
		L = 128
	}
	if spec.RopeScaling != nil && spec.RopeScaling.Type == "yarn" {
		return nil, fmt.Errorf("%s: rope_scaling: yarn is not supported by the gqf graph", dir)
	}
	graph, consts := buildGraph(spec, L)
	plan := &GQFPlan{Model: dir, Arch: spec.HFArch, Scheme: sch.name, Method: q.method, MaxLen: L, Activations: "float",
		Nodes: len(graph.Nodes), ActCount: len(graph.Activations)}
	switch {
	case sch.actBits > 0:
		plan.Activations = fmt.Sprintf("uint%d per-tensor", sch.actBits)
	case sch.dynamic:
		plan.Activations = "float; linear inputs int8 per token (dynamic)"
	}
	expected, err := gqfTensors(inv)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if !o.DryRun {
		if plan.Folds, err = q.prepare(expected); err != nil {
			return nil, err
		}
	}
	encoded, err := q.encodeAll(expected, o.DryRun)
	if err != nil {
		return nil, err
	}
	plan.Seconds = time.Since(start).Seconds()
	m := &gqf.Manifest{Scheme: sch.manifest}
	if sch.dynamic {
		m.LinearInputs = &gqf.Encoding{Dtype: gqf.DataType_INT8, Bits: 8, Granularity: gqf.Granularity_PER_TOKEN, Symmetric: true}
	}
	b := gqf.NewBuilder(m)
	for i, enc := range encoded {
		b.AddTensor(enc.tensor, enc.data, enc.scales, enc.zeros, enc.blocks)
		plan.add(enc, expected[i].HFName, expected[i].Ref.Role.IsLinear())
		if enc.fallback {
			plan.Fallbacks++
		}
	}
	for _, c := range consts {
		enc := encodeConst(c)
		b.AddTensor(enc.tensor, enc.data, nil, nil, nil)
		plan.addConst(enc)
	}
	if plan.Params > 0 {
		plan.BPW = 8 * float64(plan.Bytes) / float64(plan.Params)
	}
	if plan.linParams > 0 {
		plan.BPWLinear = 8 * float64(plan.linBytes) / float64(plan.linParams)
	}
	if o.DryRun {
		return plan, nil
	}
	if err := fillManifest(m, inv, dir, o); err != nil {
		return nil, err
	}
	m.Graph = graph
	if sch.actBits > 0 {
		// Encode once without activation encodings, read the file back and calibrate on
		// exactly the weights the runtime will see.
		raw, err := b.Bytes()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", out, err)
		}
		f, err := gqf.Parse(out, raw)
		if err != nil {
			return nil, err
		}
		how, err := activationEncodings(f, graph, inv, o, sch.actBits)
		if err != nil {
			return nil, err
		}
		plan.Calibration = how
		m.Provenance.Calibration = how
	}
	if err := b.WriteFile(out, o.Force); err != nil {
		return nil, err
	}
	return plan, nil
}

func (p *GQFPlan) add(e *encodedTensor, source string, linear bool) {
	t := e.tensor
	size := e.size()
	n := uint64(1)
	shape := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		n *= uint64(d)
		shape[i] = int(d)
	}
	p.Tensors = append(p.Tensors, GQFPlanTensor{Name: t.Name, Source: source, Shape: shape, Encoding: t.Encoding.Describe(), Bytes: size, Note: e.note})
	p.Params += n
	p.Bytes += size
	if linear {
		p.linParams += n
		p.linBytes += size
	}
}

// addConst lists a graph constant; constants are not weights and do not count in the bpw.
func (p *GQFPlan) addConst(e *encodedTensor) {
	shape := make([]int, len(e.tensor.Shape))
	for i, d := range e.tensor.Shape {
		shape[i] = int(d)
	}
	p.Tensors = append(p.Tensors, GQFPlanTensor{Name: e.tensor.Name, Shape: shape, Encoding: e.tensor.Encoding.Describe(), Bytes: e.size()})
}

// gqfTensors lists the checkpoint tensors a gqf file stores (rope_freqs is generated into the
// graph's tables instead), checking that each exists with the shape the config implies.
func gqfTensors(inv *Inventory) ([]arch.Tensor, error) {
	var out []arch.Tensor
	var probs []string
	used := map[string]bool{}
	for _, t := range inv.Family.Tensors(inv.Spec) {
		if t.Generated {
			continue
		}
		src, ok := inv.Tensors[t.HFName]
		switch {
		case !ok:
			probs = append(probs, fmt.Sprintf("%s: missing", t.HFName))
		case !equalShape(src.Shape, t.Shape):
			probs = append(probs, fmt.Sprintf("%s: shape %v, config implies %v", t.HFName, src.Shape, t.Shape))
		default:
			out = append(out, t)
		}
		used[t.HFName] = true
	}
	for _, name := range inv.Names() {
		if used[name] {
			continue
		}
		if _, ok := inv.Family.IgnoredHF(name); ok || (inv.Spec.Tied && name == "lm_head.weight") {
			continue
		}
		probs = append(probs, fmt.Sprintf("%s: unmapped", name))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", inv.Dir, strings.Join(probs, "; "))
	}
	return out, nil
}

// encodedTensor is a tensor's manifest entry and buffers.
type encodedTensor struct {
	tensor                      *gqf.Tensor
	data, scales, zeros, blocks []byte
	note                        string // plan remark (fallback, method)
	fallback                    bool
}

// size is the number of bytes the tensor stores.
func (e *encodedTensor) size() uint64 {
	var n uint64
	for _, b := range [][]byte{e.data, e.scales, e.zeros, e.blocks} {
		n += uint64(len(b))
	}
	return n
}

// readFloat reads a checkpoint tensor as float32 in HF layout (no transform).
func readFloat(inv *Inventory, t arch.Tensor) ([]float32, error) {
	pt := &PlannedTensor{Name: t.Ref.GGUFName(), Source: t.HFName, ref: t.Ref, trans: arch.NoTransform}
	for i := len(t.Shape) - 1; i >= 0; i-- {
		pt.Shape = append(pt.Shape, uint64(t.Shape[i]))
	}
	rows, n := rowsOf(pt)
	dst := make([]float32, rows*n)
	if err := inv.readRows(pt, inv.Spec, 0, rows, dst); err != nil {
		return nil, err
	}
	inv.release(t.HFName)
	return dst, nil
}

// encodeConst stores a graph constant (float32, or int64 indices).
func encodeConst(c graphConst) *encodedTensor {
	e := &encodedTensor{tensor: &gqf.Tensor{Name: c.name, Role: roleConstant, Layer: -1, Shape: c.shape}}
	if c.i != nil {
		e.tensor.Encoding = &gqf.Encoding{Dtype: gqf.DataType_INT64, Bits: 64, Granularity: gqf.Granularity_FLOAT}
		e.data = make([]byte, 8*len(c.i))
		for i, v := range c.i {
			binary.LittleEndian.PutUint64(e.data[8*i:], uint64(v))
		}
		return e
	}
	e.tensor.Encoding = &gqf.Encoding{Dtype: gqf.DataType_F32, Bits: 32, Granularity: gqf.Granularity_FLOAT}
	e.data = f32Bytes(c.f)
	return e
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// fillManifest sets the config, tokenizer and provenance.
func fillManifest(m *gqf.Manifest, inv *Inventory, dir string, o GQFOptions) error {
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return err
	}
	m.Config = &gqf.ModelConfig{Family: inv.Family.Name(), HfArchitecture: inv.Spec.HFArch, ConfigJson: cfg}
	tok := &gqf.Tokenizer{}
	if b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json")); err == nil {
		tok.TokenizerJson = b
	}
	if b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		tok.TokenizerConfigJson = b
	}
	for _, kv := range inv.TokenizerKVs {
		e, err := gqf.MetaEntryOf(kv.Key, kv.Value)
		if err != nil {
			return fmt.Errorf("%s: %v", dir, err)
		}
		tok.Metadata = append(tok.Metadata, e)
	}
	m.Tokenizer = tok
	prov := &gqf.Provenance{GquantVersion: o.Version, Command: o.Command}
	files := append([]string{filepath.Join(dir, "config.json")}, inv.SourceFiles()...)
	if tok.TokenizerJson != nil {
		files = append(files, filepath.Join(dir, "tokenizer.json"))
	}
	for _, p := range files {
		sum, err := sha256File(p)
		if err != nil {
			return err
		}
		prov.Sources = append(prov.Sources, &gqf.Provenance_File{Path: filepath.Base(p), Sha256: sum})
	}
	if o.StatsPath != "" {
		sum, err := sha256File(o.StatsPath)
		if err != nil {
			return err
		}
		prov.StatsPath, prov.StatsSha256 = o.StatsPath, sum
	}
	if o.Encodings != "" {
		sum, err := sha256File(o.Encodings)
		if err != nil {
			return err
		}
		prov.StatsPath, prov.StatsSha256 = o.Encodings, sum
	}
	m.Provenance = prov
	return nil
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
