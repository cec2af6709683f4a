// Package gqfconv is the gqf sink of the conversion pipeline (package convert): gquant's own
// schemes (w4a16, w4a16-qnn = w4a16-lpbq, w4a8, w4a8-qnn, w8a16, f16), their per-tensor encodings (the plan's
// policy) and encoders, the decoder graph the file records (runtime/arch's Lower), and the
// activation encodings of the QNN schemes (from AIMET encodings, calibration statistics, or a
// calibration run of the converted file on a corpus). The file is streamed: weights written in
// place as execute produces them, the manifest last.
package gqfconv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/atomicfile"
	"github.com/gquant/gquant/internal/filehash"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// Options are the inputs of a conversion to gqf besides the folder and the output path.
type Options struct {
	// Scheme is "w4a16", "w4a16-qnn" (also named "w4a16-lpbq"), "w4a8", "w4a8-qnn", "w8a16"
	// or "f16" (see Schemes): the -qnn schemes and w8a16 are Qualcomm QNN's, with calibrated
	// static activation encodings; w4a16 and w4a8 are the CPU runtime's (float activations,
	// or int8 linear inputs quantized per token at run time).
	Scheme string
	// Method rounds the weights of the linear layers: "rtn" (min-max), "imatrix"
	// (importance-weighted range search from Stats' Σx²), "gptq" (needs Hessians in Stats) or
	// "awq" (activation-aware scales folded into the preceding norm or projection, searched on
	// the output error from Stats' Hessians, or their diagonal). "": imatrix with Stats, else rtn.
	Method string
	// Stats are calibration statistics (stats.Read), checked against the model before any
	// weight is read; StatsPath is the file they came from (hashed into the provenance).
	Stats     *stats.Stats
	StatsPath string
	// Sequence, with Method gptq or awq and no Stats, is layer-sequential GPTQ or AWQ
	// (convert.Options' Sequence): Stats become its statistics, filled stage by stage.
	Sequence convert.Sequence
	// GroupSize is the int4 group of w4a16 and w4a8 (0: 128); rows that are not a whole number
	// of groups take the largest smaller group that fits (down to 16), else 8-bit per channel.
	GroupSize int
	// Sym makes w4a16's int4 groups symmetric (w4a8's always are).
	Sym bool
	// Keep is a regular expression over GGUF tensor names whose matrices stay at 8 bits
	// (int8 per channel) in the 4-bit schemes; "" keeps token_embd and output, as peers do;
	// "none" keeps nothing.
	Keep string
	// Range sets the activation ranges taken from statistics (the QNN schemes): minmax,
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
	// Threads bounds the workers (0: one per CPU).
	Threads int
	// MaxLen is the graph's fixed sequence length (0: the model's context, at most 128).
	MaxLen int
	// BlockSize is the LPBQ block of w4a16-qnn and w4a8-qnn (0: 64).
	BlockSize int
	// Encodings is an AIMET encodings JSON (1.0.0 or 0.6.1) with an encoding for every
	// activation of the graph (by its name, or by the name of the point it belongs to), of the
	// scheme's width (gquant calibrate --scheme writes one); the graph's attention mask is the
	// one those encodings were made for (calibrate.EncodingsMask, from the kq_scaled ranges).
	// Without it, activation encodings come from Stats and, for the points the statistics
	// lack, from a calibration run of the converted weights on Corpus (the others are left in
	// float when there is no corpus).
	Encodings string
	// Corpus is calibration text; CalibWindows windows of MaxLen tokens are evaluated (0: 8).
	Corpus       string
	CalibWindows int
	Force        bool // overwrite an existing output
	DryRun       bool // plan only
	// Command and Version are recorded in the provenance.
	Command string
	Version string
	// Progress, when set, is called with the source bytes done so far and the total.
	Progress func(done, total int64)
}

// scheme is a preset: the codec of the linear layers and of the tensors kept at 8 bits,
// the static activation bit width (0: float activations) and whether linear inputs are
// quantized per token at run time.
type scheme struct {
	name     string
	manifest string // the scheme recorded in the file
	linear   string // "int4" (groups), "lpbq4", "int8", "f16"
	kept     string // codec of token_embd, output and --keep matches
	actBits  int
	dynamic  bool // int8 per-token linear inputs (w4a8)
	sym      bool // int4 groups always symmetric
	doc      string
}

var schemes = []scheme{
	{name: "w4a16", manifest: "w4a16", linear: "int4", kept: "int8",
		doc: "int4 groups (asymmetric, fp16 scale, uint8 zero; --sym: symmetric), float activations"},
	{name: "w4a16-qnn", manifest: "w4a16", linear: "lpbq4", kept: "int8", actBits: 16,
		doc: "QNN w4a16: int4 LPBQ weights (Qualcomm), uint16 static activation encodings"},
	{name: "w4a16-lpbq", manifest: "w4a16", linear: "lpbq4", kept: "int8", actBits: 16,
		doc: "the same as w4a16-qnn (its first name)"},
	{name: "w4a8", manifest: "w4a8", linear: "int4", kept: "int8", dynamic: true, sym: true,
		doc: "symmetric int4 groups, linear inputs int8 per token at run time"},
	{name: "w4a8-qnn", manifest: "w4a8", linear: "lpbq4", kept: "int8", actBits: 8,
		doc: "QNN w4a8: int4 LPBQ weights, uint8 static activation encodings"},
	{name: "w8a16", manifest: "w8a16", linear: "int8", kept: "int8", actBits: 16,
		doc: "QNN w8a16: int8 per-channel weights, uint16 static activation encodings"},
	{name: "f16", manifest: "f16", linear: "f16", kept: "f16", doc: "fp16 weights"},
}

// Schemes lists the gqf scheme names.
func Schemes() []string {
	var out []string
	for _, s := range schemes {
		out = append(out, s.name)
	}
	return out
}

// SchemeHelp describes the gqf schemes, one "name: description" line each.
func SchemeHelp() string {
	var b strings.Builder
	for _, s := range schemes {
		fmt.Fprintf(&b, "  %-11s %s\n", s.name, s.doc)
	}
	return b.String()
}

// ActivationBits is the width of a gqf scheme's static activation encodings (16 for w8a16,
// w4a16-qnn and w4a16-lpbq, 8 for w4a8-qnn), 0 for the schemes with float (or run-time int8)
// activations; an unknown scheme is an error.
func ActivationBits(name string) (int, error) {
	s, err := schemeByName(name)
	return s.actBits, err
}

func schemeByName(name string) (scheme, error) {
	for _, s := range schemes {
		if s.name == name {
			return s, nil
		}
	}
	return scheme{}, fmt.Errorf("scheme: %q is not a gqf scheme (want %s)", name, strings.Join(Schemes(), ", "))
}

// defaultKeep is the --keep pattern when none is given: the embedding and the output head.
const defaultKeep = `^(token_embd|output)\.weight$`

// Convert converts a HuggingFace folder into a gqf file: the plan (the scheme's encoding of
// every tensor, the graph's constants), the weights streamed into place by convert.Execute,
// then the graph with its activation encodings and the manifest. Statistics are checked
// against the model before any weight is read; the output appears only when complete.
func Convert(dir, out string, o Options) (*convert.Plan, error) {
	sch, err := schemeByName(o.Scheme)
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
	inv, err := convert.Open(dir, convert.InventoryOptions{})
	if err != nil {
		return nil, err
	}
	defer inv.Close()
	if err := arch.CheckGQF(inv.Spec); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	pol, err := newPolicy(inv, sch, &o)
	if err != nil {
		return nil, err
	}
	L := o.MaxLen
	if L <= 0 {
		L = min(inv.Spec.Context, 128)
	}
	if L <= 0 {
		L = 128
	}
	graph := arch.ModelGraph(inv.Spec)
	var ef *encodings.File
	switch {
	case sch.actBits > 0 && o.Encodings != "" && !o.DryRun:
		// The mask the encodings were made for (calibrate.QNN encodes kq_masked for it).
		if ef, err = encodings.Read(o.Encodings); err != nil {
			return nil, err
		}
		if m, ok := calibrate.EncodingsMask(ef, inv.Spec); ok {
			graph.Mask = m
		}
	case sch.actBits > 0 && o.Encodings == "":
		if lo, hi, ok := scoreRange(o.Stats, inv.Spec); ok {
			graph.Mask = arch.MaskFor(lo, hi)
		}
	}
	low, err := graph.Lower(L)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	plan, err := convert.MakePlanWith(inv, "gqf", sch.name, pol.choose)
	if err != nil {
		return nil, err
	}
	for _, c := range low.Consts {
		addConst(plan, c)
	}
	plan.Method, plan.MaxLen, plan.Nodes, plan.ActCount = pol.method, L, len(low.Graph.Nodes), len(low.Graph.Activations)
	plan.Activations = "float"
	switch {
	case sch.actBits > 0:
		plan.Activations = fmt.Sprintf("uint%d per-tensor", sch.actBits)
	case sch.dynamic:
		plan.Activations = "float; linear inputs int8 per token (dynamic)"
	}
	if o.DryRun {
		return plan, nil
	}

	start := time.Now()
	if pol.method == convert.MethodAWQ || o.Smooth != 0 {
		if plan.Folds, err = convert.PrepareFolds(inv, plan, convert.FoldOptions{AWQ: pol.method == convert.MethodAWQ, Smooth: o.Smooth,
			Stats: o.Stats, AWQOpt: o.AWQ, Grid: pol.searchSpec, Threads: pol.threads, Sequential: o.Sequence != nil}); err != nil {
			return nil, err
		}
	}
	m := &gqf.Manifest{Scheme: sch.manifest}
	if sch.dynamic {
		m.LinearInputs = &gqf.Encoding{Dtype: gqf.DataType_INT8, Bits: 8, Granularity: gqf.Granularity_PER_TOKEN, Symmetric: true}
	}
	if err := fillManifest(m, inv, dir, o); err != nil {
		return nil, err
	}
	lay := gqf.NewLayout(m)
	for i := range plan.Tensors {
		pt := &plan.Tensors[i]
		e := pt.Encoder().(encoder)
		b := pt.Encoder().Buffers()
		lay.Place(e.tensor(), b[0], b[1], b[2], b[3])
	}
	m.Graph = low.Graph
	w, err := gqf.Create(out, lay)
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	tensors := m.Tensors
	sink := func(t, buf int, off uint64, data []byte) error {
		return w.WriteAt(tensors[t].Buffers()[buf], off, data)
	}
	if err := convert.Execute(inv, plan, sink, convert.ExecOptions{Threads: pol.threads, Progress: o.Progress, Sequence: o.Sequence}); err != nil {
		return nil, err
	}
	for i := range plan.Tensors {
		if n := plan.Tensors[i].Encoder().(encoder).note(); n != "" {
			plan.Tensors[i].Note = n
		}
	}
	if sch.actBits > 0 {
		how, err := activationEncodings(w, graph, low, inv, o, ef, sch.actBits, pol.threads)
		if err != nil {
			return nil, err
		}
		plan.Calibration, m.Provenance.Calibration = how, how
	}
	if err := w.Commit(); err != nil {
		return nil, err
	}
	plan.Seconds = time.Since(start).Seconds()
	return plan, nil
}

// keepPattern compiles --keep.
func keepPattern(keep string) (*regexp.Regexp, error) {
	switch keep {
	case "":
		keep = defaultKeep
	case "none":
		keep = "^$"
	}
	re, err := regexp.Compile(keep)
	if err != nil {
		return nil, fmt.Errorf("--keep: %v", err)
	}
	return re, nil
}

// fillManifest sets the config, tokenizer and provenance.
func fillManifest(m *gqf.Manifest, inv *convert.Inventory, dir string, o Options) error {
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
		sum, err := filehash.SHA256(p)
		if err != nil {
			return err
		}
		prov.Sources = append(prov.Sources, &gqf.Provenance_File{Path: filepath.Base(p), Sha256: sum})
	}
	if o.StatsPath != "" {
		sum, err := filehash.SHA256(o.StatsPath)
		if err != nil {
			return err
		}
		prov.StatsPath, prov.StatsSha256 = o.StatsPath, sum
	}
	if o.Encodings != "" {
		sum, err := filehash.SHA256(o.Encodings)
		if err != nil {
			return err
		}
		prov.StatsPath, prov.StatsSha256 = o.Encodings, sum
	}
	m.Provenance = prov
	return nil
}
