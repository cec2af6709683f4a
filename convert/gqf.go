package convert

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/half"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// GQFOptions are the inputs of a conversion to gqf besides the folder and the output path.
type GQFOptions struct {
	// Scheme is "w4a16", "w4a8", "w8a16" or "f16".
	Scheme string
	// MaxLen is the graph's fixed sequence length (0: the model's context, at most 128).
	MaxLen int
	// BlockSize is the LPBQ block of 4-bit weights (0: 64).
	BlockSize int
	// Encodings is an AIMET encodings JSON (1.0.0 or 0.6.1) holding an encoding for every
	// activation of the graph; when empty, activation encodings are calibrated on Corpus.
	Encodings string
	// Corpus is the calibration text (one sample per line); CalibLines lines are read (0: 64)
	// and cut into at most CalibWindows windows of MaxLen tokens (0: 8).
	Corpus       string
	CalibLines   int
	CalibWindows int
	// Imatrix maps GGUF tensor names to per-column importance for the 8-bit weight codec;
	// StatsPath is the file it came from (hashed into the provenance).
	Imatrix   map[string][]float32
	StatsPath string
	Force     bool // overwrite an existing output
	DryRun    bool // plan only
	// Command and Version are recorded in the provenance.
	Command string
	Version string
}

// GQFPlan is what a gqf conversion does (or, with DryRun, would do).
type GQFPlan struct {
	Model       string          `json:"model"`
	Arch        string          `json:"architecture"`
	Scheme      string          `json:"scheme"`
	MaxLen      int             `json:"max_len"`
	Activations string          `json:"activations"`
	Calibration string          `json:"calibration,omitempty"`
	Tensors     []GQFPlanTensor `json:"tensors"`
	Nodes       int             `json:"graph_nodes"`
	ActCount    int             `json:"graph_activations"`
	Params      uint64          `json:"parameters"`
	Bytes       uint64          `json:"tensor_bytes"`
	BPW         float64         `json:"bpw"`
}

// GQFPlanTensor is one stored tensor.
type GQFPlanTensor struct {
	Name     string `json:"name"`
	Source   string `json:"source,omitempty"`
	Shape    []int  `json:"shape"`
	Encoding string `json:"encoding"`
	Bytes    uint64 `json:"bytes"`
}

// Text renders the plan.
func (p *GQFPlan) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model:  %s\narch:   %s\nscheme: %s (gqf, graph length %d, activations %s)\n", p.Model, p.Arch, p.Scheme, p.MaxLen, p.Activations)
	if p.Calibration != "" {
		fmt.Fprintf(&b, "calibration: %s\n", p.Calibration)
	}
	for _, t := range p.Tensors {
		src := t.Source
		if src == "" {
			src = "(generated)"
		}
		fmt.Fprintf(&b, "%-28s %-14s %-50s %-10d %s\n", t.Name, fmt.Sprint(t.Shape), t.Encoding, t.Bytes, src)
	}
	fmt.Fprintf(&b, "%d tensors, %d parameters, %d bytes, %.4f bpw; graph: %d nodes, %d activations\n",
		len(p.Tensors), p.Params, p.Bytes, p.BPW, p.Nodes, p.ActCount)
	return b.String()
}

// gqfScheme is a preset: the codec of the linear layers, of the embedding and output, and
// the activation bit width (0: float activations).
type gqfScheme struct {
	name          string
	linear, embed string // "f16", "int8", "lpbq4"
	actBits       int
}

var gqfSchemes = []gqfScheme{
	{"w4a16", "lpbq4", "int8", 16},
	{"w4a8", "lpbq4", "int8", 8},
	{"w8a16", "int8", "int8", 16},
	{"f16", "f16", "f16", 0},
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

// ConvertGQF converts a HuggingFace folder into a gqf file: weights encoded by the scheme,
// the decoder graph over MaxLen positions and, for quantized activations, an encoding for
// every activation (from Encodings, or calibrated on Corpus). The output appears only when
// complete.
func ConvertGQF(dir, out string, o GQFOptions) (*GQFPlan, error) {
	sch, err := gqfSchemeByName(o.Scheme)
	if err != nil {
		return nil, err
	}
	if !o.DryRun && !o.Force {
		if _, err := os.Stat(out); err == nil {
			return nil, fmt.Errorf("%s: output exists (use --force to overwrite)", out)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	if sch.actBits > 0 && o.Encodings == "" && o.Corpus == "" && !o.DryRun {
		return nil, fmt.Errorf("scheme %s: activation encodings need --encodings FILE or --corpus FILE", sch.name)
	}
	inv, err := Open(dir, InventoryOptions{})
	if err != nil {
		return nil, err
	}
	defer inv.Close()
	spec := inv.Spec
	L := o.MaxLen
	if L <= 0 {
		L = min(spec.Context, 128)
	}
	if L <= 0 {
		L = 128
	}
	bs := o.BlockSize
	if bs <= 0 {
		bs = 64
	}
	if spec.RopeScaling != nil && spec.RopeScaling.Type == "yarn" {
		return nil, fmt.Errorf("%s: rope_scaling: yarn is not supported by the gqf graph", dir)
	}
	graph, consts := buildGraph(spec, L)
	plan := &GQFPlan{Model: dir, Arch: spec.HFArch, Scheme: sch.name, MaxLen: L, Activations: "float",
		Nodes: len(graph.Nodes), ActCount: len(graph.Activations)}
	if sch.actBits > 0 {
		plan.Activations = fmt.Sprintf("uint%d per-tensor", sch.actBits)
	}
	expected, err := gqfTensors(inv)
	if err != nil {
		return nil, err
	}
	m := &gqf.Manifest{Scheme: sch.name}
	b := gqf.NewBuilder(m)
	for _, t := range expected {
		enc, err := encodeGQFTensor(inv, t, sch, bs, o.DryRun, o.Imatrix[t.Ref.GGUFName()])
		if err != nil {
			return nil, err
		}
		b.AddTensor(enc.tensor, enc.data, enc.scales, enc.zeros, enc.blocks)
		plan.add(enc, t.HFName)
	}
	for _, c := range consts {
		enc := encodeConst(c)
		b.AddTensor(enc.tensor, enc.data, nil, nil, nil)
		plan.add(enc, "")
	}
	if plan.Params > 0 {
		plan.BPW = 8 * float64(plan.Bytes) / float64(plan.Params)
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

func (p *GQFPlan) add(e *encodedTensor, source string) {
	t := e.tensor
	var size uint64
	for _, b := range [][]byte{e.data, e.scales, e.zeros, e.blocks} {
		size += uint64(len(b))
	}
	n := uint64(1)
	shape := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		n *= uint64(d)
		shape[i] = int(d)
	}
	p.Tensors = append(p.Tensors, GQFPlanTensor{Name: t.Name, Source: source, Shape: shape, Encoding: t.Encoding.Describe(), Bytes: size})
	p.Params += n
	p.Bytes += size
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

// encodeGQFTensor reads one checkpoint tensor and encodes it as the scheme says: linear
// layers with the scheme's linear codec, the embedding and output with its embedding codec,
// vectors (norms, biases) as float32. With dryRun no weight is read: the buffers have the
// right sizes but no content.
func encodeGQFTensor(inv *Inventory, t arch.Tensor, sch gqfScheme, bs int, dryRun bool, imp []float32) (*encodedTensor, error) {
	name := t.Ref.GGUFName()
	shape := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int64(d)
	}
	e := &encodedTensor{tensor: &gqf.Tensor{Name: name, Role: string(t.Ref.Role), Layer: int32(t.Ref.Layer), Shape: shape, Source: t.HFName}}
	codec := "f32"
	switch {
	case t.Ref.Role.IsLinear():
		codec = sch.linear
	case t.Ref.Role == arch.TokenEmbd || t.Ref.Role == arch.Output:
		codec = sch.embed
	}
	rows, cols := t.Shape[0], 1
	if len(t.Shape) == 2 {
		cols = t.Shape[1]
	} else {
		rows, cols = 1, t.Shape[0]
	}
	if codec == "lpbq4" && cols%bs != 0 {
		codec = "int8" // the row is not a whole number of blocks: llama.cpp-style fallback
	}
	var w []float32
	if !dryRun {
		var err error
		if w, err = readFloat(inv, t); err != nil {
			return nil, err
		}
	} else {
		w = make([]float32, rows*cols)
	}
	switch codec {
	case "f32":
		e.tensor.Encoding = &gqf.Encoding{Dtype: gqf.DataType_F32, Bits: 32, Granularity: gqf.Granularity_FLOAT}
		e.data = f32Bytes(w)
	case "f16":
		e.tensor.Encoding = &gqf.Encoding{Dtype: gqf.DataType_F16, Bits: 16, Granularity: gqf.Granularity_FLOAT}
		e.data = make([]byte, 2*len(w))
		for i, v := range w {
			binary.LittleEndian.PutUint16(e.data[2*i:], half.F32ToF16(v))
		}
	case "int8":
		e.tensor.Encoding = &gqf.Encoding{Dtype: gqf.DataType_INT8, Bits: 8, Granularity: gqf.Granularity_PER_CHANNEL,
			Symmetric: true, Axis: 0, ScaleType: gqf.DataType_F32}
		if dryRun {
			e.data, e.scales = make([]byte, rows*cols), make([]byte, 4*rows)
			break
		}
		if imp != nil && len(imp) != cols {
			return nil, fmt.Errorf("%s: importance has %d values, rows have %d", name, len(imp), cols)
		}
		gt, err := quantize.QuantizeGroups(quantize.GroupSpec{Bits: 8, Group: 0, Symmetric: true}, w, rows, cols, imp)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		for i, s := range gt.Scales {
			if s == 0 {
				gt.Scales[i] = 1 // an all-zero row: any positive scale (QNN wants one), codes 0
			}
		}
		e.data, e.scales = gt.Q, f32Bytes(gt.Scales)
	case "lpbq4":
		e.tensor.Encoding = &gqf.Encoding{Dtype: gqf.DataType_INT4, Bits: 4, Granularity: gqf.Granularity_LPBQ,
			Symmetric: true, Axis: 0, BlockSize: uint32(bs), ScaleType: gqf.DataType_F32, DecompressedBits: 8}
		lt := encodeLPBQ(w, rows, cols, bs, 4, 8)
		e.data = make([]byte, rows*cols/2)
		for i, q := range lt.codes {
			e.data[i/2] |= byte(q&0xF) << (4 * (i % 2))
		}
		e.scales, e.blocks = f32Bytes(lt.scales), lt.blocks
	}
	return e, nil
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
