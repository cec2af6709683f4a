package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/onnx"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/internal/atomicfile"
	"github.com/gquant/gquant/runtime/arch"
)

// The deployment export (onnx-kv): a folder with a prompt graph (AR new positions per run)
// and a token graph (one), each over a KV cache of a fixed context, in runtime/arch's
// LowerKV form (Qualcomm AI Hub's LLM I/O), optionally split into parts of consecutive
// layers; the weights in ONNX external data files that the prompt and token graphs of a part
// share; metadata.json, what a host needs to drive the graphs; and, for a file with
// activation encodings, encodings.json, the AIMET encodings of the graphs' tensors.

// KVOptions tune the deployment export.
type KVOptions struct {
	// QDQ writes the quantized form (see Options.QDQ).
	QDQ bool
	// AR is the prompt graph's number of new positions, Ctx the context (AR < Ctx).
	AR, Ctx int
	// Parts splits the layers into this many consecutive ranges (0 or 1: one part).
	Parts int
	// Version is the producer version recorded in the models.
	Version string
	// Force replaces an existing folder.
	Force bool
}

// DefaultAR and DefaultCtx are the prompt graph's length and the context when none is given.
const (
	DefaultAR  = 128
	DefaultCtx = 4096
)

// Metadata is metadata.json.
type Metadata struct {
	Format              string    `json:"format"`
	Producer            string    `json:"producer"`
	Source              string    `json:"source"`
	Scheme              string    `json:"scheme"`
	QDQ                 bool      `json:"qdq"`
	ContextLength       int       `json:"context_length"`
	Layers              int       `json:"layers"`
	Heads               int       `json:"heads"`
	KVHeads             int       `json:"kv_heads"`
	HeadDim             int       `json:"head_dim"`
	Hidden              int       `json:"hidden"`
	Vocab               int       `json:"vocab"`
	RopeInvFreq         []float32 `json:"rope_inv_freq"`
	RopeAttentionFactor float64   `json:"rope_attention_factor"`
	// RopeInvFreqLocal is the sliding layers' own table (Gemma 3: position_ids_cos_local and
	// _sin_local, factor 1); SlidingWindow the span of attention_mask_sliding's layers, when
	// shorter than the context. Absent for models without them.
	RopeInvFreqLocal   []float32   `json:"rope_inv_freq_local,omitempty"`
	SlidingWindow      int         `json:"sliding_window,omitempty"`
	AttentionMaskValue float32     `json:"attention_mask_value"`
	BOSID              int         `json:"bos_id"`
	AddBOS             bool        `json:"add_bos"`
	EOSIDs             []int       `json:"eos_ids"`
	Encodings          string      `json:"encodings,omitempty"`
	Graphs             []GraphInfo `json:"graphs"`
}

// GraphInfo is one graph of the export: File when in one part, else Files; Parts has the
// I/O of each file.
type GraphInfo struct {
	Name  string     `json:"name"`
	AR    int        `json:"ar"`
	File  string     `json:"file,omitempty"`
	Files []string   `json:"files,omitempty"`
	Parts []PartInfo `json:"parts"`
}

// PartInfo is one file of a graph: its layers [first, last), inputs, outputs and data file.
type PartInfo struct {
	File    string   `json:"file"`
	Data    string   `json:"data"`
	Layers  [2]int   `json:"layers"`
	Inputs  []IOInfo `json:"inputs"`
	Outputs []IOInfo `json:"outputs"`
}

// IOInfo is one input or output: name, shape, dtype and, in QDQ form, its encoding.
type IOInfo struct {
	Name     string      `json:"name"`
	Shape    []int64     `json:"shape"`
	Dtype    string      `json:"dtype"`
	Encoding *IOEncoding `json:"encoding,omitempty"`
}

// IOEncoding is a per-tensor integer encoding: value = scale · (code + offset).
type IOEncoding struct {
	Dtype    string  `json:"dtype"`
	Bitwidth int     `json:"bitwidth"`
	Scale    float32 `json:"scale"`
	Offset   int32   `json:"offset"`
}

// Written is one file an export wrote.
type Written struct {
	Path string
	Size int64
}

// kvModel is what the export of a gqf file as deployment graphs needs to know of the model.
type kvModel struct {
	f     *gqf.File
	spec  *arch.Spec
	graph *arch.Graph
	// encs are the file's activation encodings by point (nil: float activations); bits
	// their width.
	encs map[string]*gqf.Encoding
	bits uint32
	mask float32
}

func openKV(f *gqf.File) (*kvModel, error) {
	_, spec, err := arch.SpecFromGQF(f.Manifest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	if f.Manifest.Graph == nil {
		return nil, fmt.Errorf("%s: graph: missing", f.Path)
	}
	m := &kvModel{f: f, spec: spec, graph: arch.ModelGraph(spec), mask: arch.MaskValue}
	for _, a := range f.Manifest.Graph.Activations {
		if a.Encoding == nil {
			continue
		}
		if m.encs == nil {
			m.encs = map[string]*gqf.Encoding{}
		}
		m.encs[a.Name] = a.Encoding
		m.bits = a.Encoding.Bits
	}
	if t, ok := f.Tensor(arch.ConstMask); ok {
		v, err := f.Decode(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", f.Path, arch.ConstMask, err)
		}
		lo, _ := rangeOf(v)
		if lo < 0 {
			m.mask = float32(lo)
		}
	}
	m.graph.Mask = m.mask
	return m, nil
}

// source lowers the layers [first, last) over ar new positions and gives every activation
// and float input its point's encoding from the file; the rotation tables (inputs
// position_ids_cos and _sin and what is computed from them) get a 16-bit encoding of [−1, 1]
// and attention_mask one of [mask, 0].
func (m *kvModel) source(ar, ctx, first, last int) (*source, error) {
	low, err := m.graph.LowerKV(arch.KVOptions{AR: ar, Ctx: ctx, First: first, Last: last})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.f.Path, err)
	}
	src := &source{g: low.Graph, consts: map[string]arch.Const{}, static: true}
	for _, c := range low.Consts {
		src.consts[c.Name] = c
	}
	if m.encs == nil {
		return src, nil
	}
	// 16 bits whatever the activations' width, as the full graph's QDQ form stores its float
	// constants: the host computes these tables exactly, and the simulation of the file's
	// encodings takes them as exact.
	unit := gqf.RangeEncoding(-1, 1, 16)
	mask := gqf.RangeEncoding(float64(m.mask), 0, 16)
	enc := func(v *gqf.Value) error {
		pt := low.Point[v.Name]
		switch e := m.encs[pt]; {
		case e != nil:
			v.Encoding = proto.Clone(e).(*gqf.Encoding)
		case pt == arch.InputCos || pt == arch.InputSin || pt == "rope.sin_signed",
			pt == arch.InputCosLocal || pt == arch.InputSinLocal || pt == "rope_local.sin_signed":
			v.Encoding = proto.Clone(unit).(*gqf.Encoding)
		case pt == arch.InputAttentionMask || pt == arch.InputAttentionMaskSWA:
			v.Encoding = proto.Clone(mask).(*gqf.Encoding)
		default:
			return fmt.Errorf("%s: graph: %s (of %s) has no encoding in the file", m.f.Path, v.Name, pt)
		}
		return nil
	}
	for _, v := range low.Graph.Inputs {
		if v.Dtype == gqf.DataType_F32 {
			if err := enc(v); err != nil {
				return nil, err
			}
		}
	}
	for _, v := range low.Graph.Activations {
		if err := enc(v); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// partRanges splits n layers into k consecutive ranges, the first ones a layer longer.
func partRanges(n, k int) [][2]int {
	var out [][2]int
	at := 0
	for i := 0; i < k; i++ {
		size := n / k
		if i < n%k {
			size++
		}
		out = append(out, [2]int{at, at + size})
		at += size
	}
	return out
}

// WriteKV exports f as deployment graphs into the folder dir (written beside it and renamed
// into place when complete) and returns the files written.
func WriteKV(dir string, f *gqf.File, o KVOptions) ([]Written, error) {
	m, err := openKV(f)
	if err != nil {
		return nil, err
	}
	s := m.spec
	if o.AR == 0 {
		o.AR = DefaultAR
	}
	if o.Ctx == 0 {
		o.Ctx = min(s.Context, DefaultCtx)
	}
	parts := max(o.Parts, 1)
	switch {
	case parts > s.Layers:
		return nil, fmt.Errorf("%s: --parts %d: the model has %d layers", f.Path, parts, s.Layers)
	case o.QDQ && m.encs == nil:
		return nil, fmt.Errorf("%s: scheme %s has float activations: there is no QDQ form (export the float model)", f.Path, f.Manifest.Scheme)
	}
	// Check every graph lowers before anything is written.
	for _, ar := range []int{o.AR, 1} {
		if _, err := m.graph.LowerKV(arch.KVOptions{AR: ar, Ctx: o.Ctx}); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	if err := atomicfile.CheckNewDir(dir, o.Force, f.Path); err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f.Manifest.Tokenizer.Getter())
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer: %w", f.Path, err)
	}
	out, err := atomicfile.CreateDir(dir)
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	meta := &Metadata{Format: "gquant-onnx-kv/1", Producer: "gquant " + o.Version, Source: filepath.Base(f.Path),
		Scheme: f.Manifest.Scheme, QDQ: o.QDQ, ContextLength: o.Ctx, Layers: s.Layers, Heads: s.Heads,
		KVHeads: s.KVHeads, HeadDim: s.HeadDim, Hidden: s.Hidden, Vocab: s.Vocab,
		RopeInvFreq: arch.RopeInvFreq(arch.Ropes(s)[0], arch.RopeFreqFactors(s)), RopeAttentionFactor: 1,
		AttentionMaskValue: m.mask, BOSID: tok.BOS(), AddBOS: tok.AddBOS(), EOSIDs: tok.EOSIDs()}
	if sc := s.RopeScaling; sc != nil && sc.Type == "longrope" { // the factors of a context of ctx
		f, a := arch.LongRopeFactors(s, o.Ctx)
		meta.RopeInvFreq, meta.RopeAttentionFactor = arch.RopeInvFreq(arch.Ropes(s)[0], f), float64(a)
	}
	if rs := arch.Ropes(s); len(rs) > 1 {
		meta.RopeInvFreqLocal = arch.RopeInvFreq(rs[1], nil)
	}
	if w := m.graph.Window(); w > 0 && w < o.Ctx {
		meta.SlidingWindow = w
	}
	if meta.EOSIDs == nil {
		meta.EOSIDs = []int{}
	}
	modes := []GraphInfo{{Name: "prompt", AR: o.AR}, {Name: "token", AR: 1}}
	var written []string
	aimet := newUnion()
	for i, lr := range partRanges(s.Layers, parts) {
		data := "weights.data"
		if parts > 1 {
			data = fmt.Sprintf("weights_part%d_of_%d.data", i+1, parts)
		}
		df, err := os.Create(filepath.Join(out.Path(), data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		bw := bufio.NewWriterSize(df, 1<<20)
		ext := onnx.NewExternal(bw, data)
		for k := range modes {
			g := &modes[k]
			name := g.Name + ".onnx"
			if parts > 1 {
				name = fmt.Sprintf("%s_part%d_of_%d.onnx", g.Name, i+1, parts)
			}
			src, err := m.source(g.AR, o.Ctx, lr[0], lr[1])
			if err != nil {
				df.Close()
				return nil, err
			}
			e, err := run(f, o.QDQ, src, ext)
			if err != nil {
				df.Close()
				return nil, err
			}
			gname := fmt.Sprintf("%s_part%d_of_%d", g.Name, i+1, parts)
			e.g.Name = &gname
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(onnx.NewModel(e.g, o.Version))
			if err != nil {
				df.Close()
				return nil, fmt.Errorf("%s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join(out.Path(), name), b, atomicfile.Mode); err != nil {
				df.Close()
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
			written = append(written, name)
			if parts > 1 {
				g.Files = append(g.Files, name)
			} else {
				g.File = name
			}
			g.Parts = append(g.Parts, PartInfo{File: name, Data: data, Layers: lr,
				Inputs: ioInfos(src.g.Inputs, o.QDQ), Outputs: ioInfos(outputs(src.g), o.QDQ)})
			aimet.merge(e.enc)
		}
		if err := bw.Flush(); err != nil {
			df.Close()
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		if err := df.Close(); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		written = append(written, data)
	}
	meta.Graphs = modes
	if m.encs != nil {
		meta.Encodings = "encodings.json"
		if err := aimet.f.WriteFile(filepath.Join(out.Path(), meta.Encodings), encodings.V1, false); err != nil {
			return nil, err
		}
		written = append(written, meta.Encodings)
	}
	js, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out.Path(), "metadata.json"), append(js, '\n'), atomicfile.Mode); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	written = append([]string{"metadata.json"}, written...)
	var res []Written
	for _, name := range written {
		fi, err := os.Stat(filepath.Join(out.Path(), name))
		if err != nil {
			return nil, err
		}
		res = append(res, Written{Path: filepath.Join(dir, name), Size: fi.Size()})
	}
	if err := out.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

// outputs returns the graph's outputs as values.
func outputs(g *gqf.Graph) []*gqf.Value {
	byName := map[string]*gqf.Value{}
	for _, a := range g.Activations {
		byName[a.Name] = a
	}
	var out []*gqf.Value
	for _, o := range g.Outputs {
		out = append(out, byName[o])
	}
	return out
}

func ioInfos(vs []*gqf.Value, qdq bool) []IOInfo {
	var out []IOInfo
	for _, v := range vs {
		io := IOInfo{Name: v.Name, Shape: v.Shape, Dtype: "float32"}
		switch v.Dtype {
		case gqf.DataType_INT32:
			io.Dtype = "int32"
		case gqf.DataType_INT64:
			io.Dtype = "int64"
		}
		if e := v.Encoding; e != nil && qdq {
			dt := "uint16"
			if e.Dtype == gqf.DataType_UINT8 {
				dt = "uint8"
			}
			io.Encoding = &IOEncoding{Dtype: dt, Bitwidth: int(e.Bits), Scale: e.Scale[0], Offset: e.Offset[0]}
		}
		out = append(out, io)
	}
	return out
}

// union gathers the encodings of several graphs, each name once.
type union struct {
	f          *encodings.File
	acts, pars map[string]bool
}

func newUnion() *union {
	return &union{f: &encodings.File{Version: encodings.V1}, acts: map[string]bool{}, pars: map[string]bool{}}
}

func (u *union) merge(e *encodings.File) {
	for _, en := range e.Activations {
		if !u.acts[en.Name] {
			u.acts[en.Name] = true
			u.f.Activations = append(u.f.Activations, en)
		}
	}
	for _, en := range e.Params {
		if !u.pars[en.Name] {
			u.pars[en.Name] = true
			u.f.Params = append(u.f.Params, en)
		}
	}
	u.f.QuantizerArgs = e.QuantizerArgs
}

// AIMETKV returns the encodings of the deployment graphs of f (prompt over ar positions and
// token, one part, context ctx) keyed by their ONNX tensor names.
func AIMETKV(f *gqf.File, ar, ctx int) (*encodings.File, error) {
	m, err := openKV(f)
	if err != nil {
		return nil, err
	}
	if ar == 0 {
		ar = DefaultAR
	}
	if ctx == 0 {
		ctx = min(m.spec.Context, DefaultCtx)
	}
	u := newUnion()
	for _, n := range []int{ar, 1} {
		src, err := m.source(n, ctx, 0, 0)
		if err != nil {
			return nil, err
		}
		e, err := run(f, false, src, onnx.NewExternal(io.Discard, "-"))
		if err != nil {
			return nil, err
		}
		u.merge(e.enc)
	}
	return u.f, nil
}
