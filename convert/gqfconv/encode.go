package gqfconv

import (
	"encoding/binary"
	"fmt"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"

	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// policy decides each tensor's gqf encoding (scheme, --keep, fallbacks) and method.
type policy struct {
	inv     *convert.Inventory
	sch     scheme
	o       *Options
	method  string
	keep    *regexp.Regexp
	group   int
	lpbq    int
	threads int
}

// newPolicy checks the options against the scheme and the statistics against the model.
func newPolicy(inv *convert.Inventory, sch scheme, o *Options) (*policy, error) {
	if o.Sequence != nil {
		if o.Method != convert.MethodGPTQ && o.Method != convert.MethodAWQ || o.Stats != nil {
			return nil, problems.Usage(fmt.Errorf("layer-sequential calibration is for --method gptq or awq without --stats"))
		}
		o.Stats = o.Sequence.Statistics()
	}
	p := &policy{inv: inv, sch: sch, o: o, method: o.Method, group: o.GroupSize, lpbq: o.BlockSize, threads: o.Threads}
	if p.threads <= 0 {
		p.threads = goruntime.NumCPU()
	}
	if p.method == "" {
		p.method = convert.MethodRTN
		if o.Stats != nil && (sch.linear == "int4" || sch.linear == "int8") {
			p.method = convert.MethodImatrix // LPBQ and f16 take the statistics for activations only
		}
	}
	if p.group == 0 {
		p.group = 128
	}
	if p.lpbq == 0 {
		p.lpbq = 64
	}
	switch p.group {
	case 16, 32, 64, 128, 256:
	default:
		return nil, problems.Usage(fmt.Errorf("--group-size: %d is not 16, 32, 64, 128 or 256", p.group))
	}
	var err error
	if p.keep, err = keepPattern(o.Keep); err != nil {
		return nil, problems.Usage(err)
	}
	statsName := o.StatsPath
	if statsName == "" && o.Stats != nil {
		statsName = o.Stats.Source
	}
	switch p.method {
	case convert.MethodRTN:
	case convert.MethodImatrix, convert.MethodGPTQ, convert.MethodAWQ:
		if o.Stats == nil && !o.DryRun {
			return nil, fmt.Errorf("method %s: needs --stats FILE (gquant calibrate)", p.method)
		}
	default:
		return nil, fmt.Errorf("method: %q is not rtn, imatrix, gptq or awq", p.method)
	}
	if sch.linear == "lpbq4" && p.method != convert.MethodRTN {
		return nil, fmt.Errorf("method %s: %s weights are encoded by rtn only", p.method, sch.name)
	}
	if sch.linear == "f16" && p.method != convert.MethodRTN {
		return nil, fmt.Errorf("method %s: scheme f16 does not quantize", p.method)
	}
	if o.Smooth != 0 {
		switch {
		case !sch.dynamic:
			return nil, fmt.Errorf("smooth: SmoothQuant migration applies to w4a8 only")
		case !(o.Smooth > 0 && o.Smooth <= 1):
			return nil, problems.Usage(fmt.Errorf("--smooth: α %g is not in (0, 1]", o.Smooth))
		case p.method == convert.MethodAWQ:
			return nil, fmt.Errorf("smooth: --smooth and --method awq both rescale input channels; use one")
		case o.Stats == nil && !o.DryRun:
			return nil, fmt.Errorf("smooth: needs --stats FILE (activation maxima)")
		}
	}
	if o.Stats == nil || o.Sequence != nil {
		return p, nil // none, or the model's own, collected block by block
	}
	// Reject statistics of another model (or damaged ones) before reading any weight.
	if err := arch.ValidateStats(o.Stats, inv.Spec, inv.WeightsDigest()); err != nil {
		return nil, err
	}
	var gptq, probs []string
	for _, t := range inv.Family.Tensors(inv.Spec) {
		if !t.Ref.Role.IsLinear() {
			continue
		}
		name := t.Ref.GGUFName()
		ls := o.Stats.LinearFor(name)
		switch {
		case p.method == convert.MethodGPTQ && p.codec(t) != "f16":
			gptq = append(gptq, name)
		case o.Smooth != 0 && ls != nil && ls.AbsMax == nil:
			probs = append(probs, fmt.Sprintf("%s: no max|x| (an imatrix has none; use gquant calibrate's stats)", name))
		}
	}
	if err := convert.MissingHessians(o.Stats, statsName, gptq); err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", statsName, strings.Join(problems.First(probs, 5), "; "))
	}
	return p, nil
}

// codec is the encoding family of a tensor: "f32" for vectors, the kept codec for the
// embedding, the output and --keep matches, the scheme's linear codec otherwise.
func (p *policy) codec(t arch.Tensor) string {
	name := t.Ref.GGUFName()
	switch {
	case len(t.Shape) != 2:
		return "f32"
	case p.sch.linear == "f16":
		return "f16"
	case p.keep.MatchString(name):
		return p.sch.kept
	case t.Ref.Role.IsLinear() || t.Ref.Role == arch.TokenEmbd || t.Ref.Role == arch.Output:
		return p.sch.linear
	}
	return "f32"
}

// searchSpec is the grid AWQ searches with for rows of cols: the scheme's int4 group (or
// the largest that fits), else int8 per channel.
func (p *policy) searchSpec(cols int) quantize.GroupSpec {
	if p.sch.linear == "int4" {
		for g := p.group; g >= 16; g /= 2 {
			if cols%g == 0 {
				return quantize.GroupSpec{Bits: 4, Group: g, Symmetric: p.sch.sym || p.o.Sym}
			}
		}
	}
	return quantize.GroupSpec{Bits: 8, Symmetric: true}
}

// choose is the plan's policy (convert.Choose): the encoding, its size and encoder.
func (p *policy) choose(t arch.Tensor, _ []uint64) (convert.PlannedTensor, bool, error) {
	if t.Generated {
		return convert.PlannedTensor{}, true, nil // rope_freqs: the graph's tables hold it
	}
	name := t.Ref.GGUFName()
	shape := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int64(d)
	}
	gt := &gqf.Tensor{Name: name, Role: string(t.Ref.Role), Layer: int32(t.Ref.Layer), Shape: shape, Source: t.HFName}
	rows, cols := 1, t.Shape[len(t.Shape)-1]
	if len(t.Shape) == 2 {
		rows = t.Shape[0]
	}
	var pt convert.PlannedTensor
	codec := p.codec(t)
	spec := quantize.GroupSpec{Bits: 4, Group: p.group, Symmetric: p.sch.sym || p.o.Sym}
	switch codec {
	case "int4":
		g := p.group
		for g >= 16 && cols%g != 0 {
			g /= 2
		}
		if g < 16 {
			codec = "int8"
			pt.Fallback = fmt.Sprintf("row %d fits no int4 group: int8", cols)
		} else if g != p.group {
			spec.Group = g
			pt.Fallback = fmt.Sprintf("row %d: group %d", cols, g)
		}
	case "lpbq4":
		if cols%p.lpbq != 0 {
			codec = "int8" // the row is not a whole number of blocks
			pt.Fallback = fmt.Sprintf("row %d fits no LPBQ block: int8", cols)
		}
	}
	var rounder *convert.Rounder
	if codec == "int4" || codec == "int8" {
		method := p.method
		if t.Ref.Role == arch.TokenEmbd {
			method = convert.MethodRTN // the embedding is a lookup
		}
		rounder = &convert.Rounder{Method: method, Stats: p.o.Stats, Weight: name, GPTQ: p.o.GPTQ}
		pt.Method = method
	}
	var e encoder
	switch codec {
	case "f32":
		gt.Encoding = &gqf.Encoding{Dtype: gqf.DataType_F32, Bits: 32, Granularity: gqf.Granularity_FLOAT}
		e = &floatEnc{t: gt, n: rows * cols, f16: false}
	case "f16":
		gt.Encoding = &gqf.Encoding{Dtype: gqf.DataType_F16, Bits: 16, Granularity: gqf.Granularity_FLOAT}
		e = &floatEnc{t: gt, n: rows * cols, f16: true}
	case "int8":
		gt.Encoding = &gqf.Encoding{Dtype: gqf.DataType_INT8, Bits: 8, Granularity: gqf.Granularity_PER_CHANNEL,
			Symmetric: true, Axis: 0, ScaleType: gqf.DataType_F32}
		e = &groupEnc{t: gt, rows: rows, cols: cols, spec: quantize.GroupSpec{Bits: 8, Symmetric: true}, r: rounder, method: p.method}
	case "int4":
		gt.Encoding = &gqf.Encoding{Dtype: gqf.DataType_UINT4, Bits: 4, Granularity: gqf.Granularity_PER_BLOCK,
			Axis: 0, BlockSize: uint32(spec.Group), ScaleType: gqf.DataType_F16, ZeroType: gqf.DataType_UINT8}
		if spec.Symmetric {
			gt.Encoding.Dtype, gt.Encoding.Symmetric, gt.Encoding.ZeroType = gqf.DataType_INT4, true, gqf.DataType_DATA_TYPE_UNSPECIFIED
		}
		e = &groupEnc{t: gt, rows: rows, cols: cols, spec: spec, r: rounder, method: p.method}
	case "lpbq4":
		gt.Encoding = &gqf.Encoding{Dtype: gqf.DataType_INT4, Bits: 4, Granularity: gqf.Granularity_LPBQ,
			Symmetric: true, Axis: 0, BlockSize: uint32(p.lpbq), ScaleType: gqf.DataType_F32, DecompressedBits: 8}
		e = &lpbqEnc{t: gt, rows: rows, cols: cols, bs: p.lpbq}
	}
	pt.Type = gt.Encoding.Describe()
	for _, b := range e.Buffers() {
		pt.Bytes += b
	}
	pt.SetEncoder(e)
	return pt, false, nil
}

// encoder is a gqf tensor's encoder: its bytes, and its manifest entry.
type encoder interface {
	convert.Encoder
	tensor() *gqf.Tensor
	// note is a remark for the plan once encoded (a method the statistics forced).
	note() string
}

// floatEnc stores float32 or fp16 values.
type floatEnc struct {
	t   *gqf.Tensor
	n   int
	f16 bool
}

func (e *floatEnc) tensor() *gqf.Tensor { return e.t }
func (e *floatEnc) note() string        { return "" }
func (e *floatEnc) Buffers() []uint64 {
	size := uint64(4 * e.n)
	if e.f16 {
		size = uint64(2 * e.n)
	}
	return []uint64{size, 0, 0, 0}
}

func (e *floatEnc) Encode(src []float32, r0, r1, cols int, emit func(int, uint64, []byte) error) error {
	vals := src[:(r1-r0)*cols]
	if !e.f16 {
		return convert.EmitFloats(gguf.F32, vals, 0, uint64(4*r0*cols), emit)
	}
	if err := convert.CheckEncodable(gguf.F16, vals, nil, r0, cols); err != nil {
		return err
	}
	return convert.EmitFloats(gguf.F16, vals, 0, uint64(2*r0*cols), emit)
}

// groupEnc stores int4 groups (fp16 scales, uint8 zeros when asymmetric) or int8 per channel
// (float32 scales), rounded by the tensor's method.
type groupEnc struct {
	t          *gqf.Tensor
	rows, cols int
	spec       quantize.GroupSpec
	r          *convert.Rounder
	method     string // the plan's

	mu   sync.Mutex
	used map[string]bool // methods the rounder used
}

func (e *groupEnc) tensor() *gqf.Tensor       { return e.t }
func (e *groupEnc) Rounder() *convert.Rounder { return e.r }
func (e *groupEnc) Finish()                   { e.r.Finish() }
func (e *groupEnc) Prepares() bool            { return e.r.Prepares() }
func (e *groupEnc) Prepare(cols int) error    { return e.r.Prepare(e.spec, cols) }

func (e *groupEnc) note() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for m := range e.used {
		if m != e.r.Method {
			return m // "rtn" where the output has no statistics, "imatrix" without a Hessian
		}
	}
	return ""
}

func (e *groupEnc) Buffers() []uint64 {
	n := uint64(e.rows * e.cols)
	if e.spec.Bits == 8 {
		return []uint64{n, 4 * uint64(e.rows), 0, 0}
	}
	nb := n / uint64(e.spec.Group)
	zeros := nb
	if e.spec.Symmetric {
		zeros = 0
	}
	return []uint64{n / 2, 2 * nb, zeros, 0}
}

func (e *groupEnc) Encode(src []float32, r0, r1, cols int, emit func(int, uint64, []byte) error) error {
	nr := r1 - r0
	gt, how, err := e.r.Round(e.spec, src[:nr*cols], nr, cols)
	if err != nil {
		return err
	}
	e.mu.Lock()
	if e.used == nil {
		e.used = map[string]bool{}
	}
	e.used[how] = true
	e.mu.Unlock()
	if e.spec.Bits == 8 {
		for i, s := range gt.Scales {
			if s == 0 {
				gt.Scales[i] = 1 // an all-zero row: any positive scale (QNN wants one), codes 0
			}
		}
		if err := emit(0, uint64(r0*cols), gt.Q); err != nil {
			return err
		}
		return convert.EmitFloats(gguf.F32, gt.Scales, 1, uint64(4*r0), emit)
	}
	int4Codes(gt)
	groups := uint64(cols / e.spec.Group)
	if err := emit(0, uint64(r0*cols/2), gt.Q); err != nil {
		return err
	}
	if err := convert.EmitFloats(gguf.F16, gt.Scales, 1, 2*groups*uint64(r0), emit); err != nil {
		return err
	}
	if !gt.Spec.Symmetric {
		return emit(2, groups*uint64(r0), gt.Zeros)
	}
	return nil
}

// int4Codes turns the codes of a GroupTensor of 4-bit groups (the encoder's own) into gqf's
// data buffer, in place: symmetric codes u ∈ [0, 15] become signed q = u − 8 (INT4, low
// nibble first, as the GroupTensor packs them); asymmetric ones stay unsigned (UINT4), their
// zero points the uint8 zeros buffer. Scales are stored in fp16.
func int4Codes(gt *quantize.GroupTensor) {
	if gt.Spec.Symmetric {
		for i, b := range gt.Q {
			lo, hi := (b&0xF)-8, (b>>4)-8 // two's complement nibbles of u − 8
			gt.Q[i] = lo&0xF | hi<<4
		}
	}
}

// lpbqEnc stores Qualcomm's LPBQ (quantize.EncodeLPBQ): int4 codes, float32 channel scales,
// uint8 block scales.
type lpbqEnc struct {
	t              *gqf.Tensor
	rows, cols, bs int
}

func (e *lpbqEnc) tensor() *gqf.Tensor { return e.t }
func (e *lpbqEnc) note() string        { return "" }
func (e *lpbqEnc) Buffers() []uint64 {
	return []uint64{uint64(e.rows * e.cols / 2), 4 * uint64(e.rows), 0, uint64(e.rows * e.cols / e.bs)}
}

func (e *lpbqEnc) Encode(src []float32, r0, r1, cols int, emit func(int, uint64, []byte) error) error {
	nr := r1 - r0
	lt := quantize.EncodeLPBQ(src[:nr*cols], nr, cols, e.bs, 4, 8)
	data := make([]byte, nr*cols/2)
	for i, c := range lt.Codes {
		data[i/2] |= byte(c&0xF) << (4 * (i % 2))
	}
	if err := emit(0, uint64(r0*cols/2), data); err != nil {
		return err
	}
	if err := convert.EmitFloats(gguf.F32, lt.Scales, 1, uint64(4*r0), emit); err != nil {
		return err
	}
	return emit(3, uint64(r0*(cols/e.bs)), lt.Blocks)
}

// i64Enc stores a graph constant of int64 indices (held exactly as float32: they are below
// 2^24); float32 constants are a floatEnc's.
type i64Enc struct {
	t *gqf.Tensor
	n int
}

func (e *i64Enc) tensor() *gqf.Tensor { return e.t }
func (e *i64Enc) note() string        { return "" }
func (e *i64Enc) Buffers() []uint64   { return []uint64{8 * uint64(e.n), 0, 0, 0} }

func (e *i64Enc) Encode(src []float32, r0, r1, cols int, emit func(int, uint64, []byte) error) error {
	vals := src[:(r1-r0)*cols]
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(v)))
	}
	return emit(0, uint64(8*r0*cols), b)
}

// roleConstant is the tensor role of graph constants.
const roleConstant = "constant"

// addConst plans a graph constant as a tensor of the file (it does not count as a weight).
func addConst(p *convert.Plan, c arch.Const) {
	t := &gqf.Tensor{Name: c.Name, Role: roleConstant, Layer: -1, Shape: c.Shape}
	var e encoder
	var vals []float32
	if c.I != nil {
		t.Encoding = &gqf.Encoding{Dtype: gqf.DataType_INT64, Bits: 64, Granularity: gqf.Granularity_FLOAT}
		e = &i64Enc{t: t, n: len(c.I)}
		for _, v := range c.I {
			vals = append(vals, float32(v))
		}
	} else {
		t.Encoding = &gqf.Encoding{Dtype: gqf.DataType_F32, Bits: 32, Granularity: gqf.Granularity_FLOAT}
		e, vals = &floatEnc{t: t, n: len(c.F)}, c.F
	}
	// Shapes in GGUF order, like the weights'.
	shape := make([]uint64, len(c.Shape))
	for i, d := range c.Shape {
		shape[len(shape)-1-i] = uint64(d)
	}
	var bytes uint64
	for _, b := range e.Buffers() {
		bytes += b
	}
	p.AddConstant(c.Name, shape, t.Encoding.Describe(), bytes, vals, e)
}

// decodeBufs decodes a gqf tensor's buffers with the file's decoding rules (convert.Decoder).
func decodeBufs(t *gqf.Tensor, bufs [][]byte, rows int, dst []float32) error {
	var b [4][]byte
	copy(b[:], bufs)
	return gqf.DecodeRows(t, b, 0, rows, dst)
}

func (e *floatEnc) Decode(bufs [][]byte, rows, cols int, dst []float32) error {
	if len(e.t.Shape) <= 1 {
		rows *= cols // a vector (a norm layer-sequential AWQ folds into): gqf's rows are its elements
	}
	return decodeBufs(e.t, bufs, rows, dst)
}

func (e *groupEnc) Decode(bufs [][]byte, rows, _ int, dst []float32) error {
	return decodeBufs(e.t, bufs, rows, dst)
}

func (e *lpbqEnc) Decode(bufs [][]byte, rows, _ int, dst []float32) error {
	return decodeBufs(e.t, bufs, rows, dst)
}
