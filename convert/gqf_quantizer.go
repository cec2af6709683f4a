package convert

import (
	"encoding/binary"
	"fmt"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/half"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// Weight methods of gqf conversion.
const (
	MethodRTN     = "rtn"
	MethodImatrix = "imatrix"
	MethodGPTQ    = "gptq"
	MethodAWQ     = "awq"
)

// gqfQuantizer encodes the tensors of one conversion: it decides each tensor's codec (scheme,
// --keep, fallbacks), applies the folded AWQ/SmoothQuant scales and rounds the weights with
// the method.
type gqfQuantizer struct {
	inv    *Inventory
	sch    gqfScheme
	o      *GQFOptions
	method string
	keep   *regexp.Regexp
	group  int
	lpbq   int
	// Folded scales (see gqf_fold.go): input columns of a weight multiplied by colScale,
	// its rows (or a norm vector) divided by rowDiv.
	colScale, rowDiv map[string][]float32
	readMu           sync.Mutex // the inventory's reader is not safe for concurrent use
}

// newGQFQuantizer checks the options against the scheme and the statistics against the
// model.
func newGQFQuantizer(inv *Inventory, sch gqfScheme, o *GQFOptions) (*gqfQuantizer, error) {
	q := &gqfQuantizer{inv: inv, sch: sch, o: o, method: o.Method, group: o.GroupSize, lpbq: o.BlockSize,
		colScale: map[string][]float32{}, rowDiv: map[string][]float32{}}
	if q.method == "" {
		q.method = MethodRTN
		if o.Stats != nil && (sch.linear == "int4" || sch.linear == "int8") {
			q.method = MethodImatrix // LPBQ and f16 take the statistics for activations only
		}
	}
	if q.group == 0 {
		q.group = 128
	}
	if q.lpbq == 0 {
		q.lpbq = 64
	}
	switch q.group {
	case 16, 32, 64, 128, 256:
	default:
		return nil, fmt.Errorf("group size: %d is not 16, 32, 64, 128 or 256", q.group)
	}
	keep := o.Keep
	switch keep {
	case "":
		keep = defaultKeep
	case "none":
		keep = "^$"
	}
	var err error
	if q.keep, err = regexp.Compile(keep); err != nil {
		return nil, fmt.Errorf("keep: %v", err)
	}
	statsName := o.StatsPath
	if statsName == "" && o.Stats != nil {
		statsName = o.Stats.Source
	}
	switch q.method {
	case MethodRTN:
	case MethodImatrix, MethodGPTQ, MethodAWQ:
		if o.Stats == nil && !o.DryRun {
			return nil, fmt.Errorf("method %s: needs --stats FILE (gquant calibrate)", q.method)
		}
	default:
		return nil, fmt.Errorf("method: %q is not rtn, imatrix, gptq or awq", q.method)
	}
	if sch.linear == "lpbq4" && q.method != MethodRTN {
		return nil, fmt.Errorf("method %s: %s weights are encoded by rtn only", q.method, sch.name)
	}
	if sch.linear == "f16" && q.method != MethodRTN {
		return nil, fmt.Errorf("method %s: scheme f16 does not quantize", q.method)
	}
	if o.Smooth != 0 {
		switch {
		case !sch.dynamic:
			return nil, fmt.Errorf("smooth: SmoothQuant migration applies to w4a8 only")
		case !(o.Smooth > 0 && o.Smooth <= 1):
			return nil, fmt.Errorf("smooth: α %g is not in (0, 1]", o.Smooth)
		case q.method == MethodAWQ:
			return nil, fmt.Errorf("smooth: --smooth and --method awq both rescale input channels; use one")
		case o.Stats == nil && !o.DryRun:
			return nil, fmt.Errorf("smooth: needs --stats FILE (activation maxima)")
		}
	}
	if o.Stats == nil {
		return q, nil
	}
	// Reject statistics of another model (or damaged ones) before reading any weight.
	model, err := arch.StatsModel("", inv.Spec)
	if err != nil {
		return nil, err
	}
	if err := o.Stats.Validate(model); err != nil {
		return nil, err
	}
	var probs []string
	for _, t := range inv.Family.Tensors(inv.Spec) {
		if !t.Ref.Role.IsLinear() {
			continue
		}
		name := t.Ref.GGUFName()
		ls := o.Stats.LinearFor(name)
		switch {
		case q.method == MethodGPTQ && q.codec(t) != "f16":
			if !o.Stats.HasHessian(name) {
				probs = append(probs, fmt.Sprintf("%s: no Hessian (gquant calibrate --hessian)", name))
			}
		case o.Smooth != 0 && ls != nil && ls.AbsMax == nil:
			probs = append(probs, fmt.Sprintf("%s: no max|x| (an imatrix has none; use gquant calibrate's stats)", name))
		}
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", statsName, strings.Join(first(probs, 5), "; "))
	}
	return q, nil
}

// codec is the encoding family of a tensor: "f32" for vectors, the kept codec for the
// embedding, the output and --keep matches, the scheme's linear codec otherwise.
func (q *gqfQuantizer) codec(t arch.Tensor) string {
	name := t.Ref.GGUFName()
	switch {
	case len(t.Shape) != 2:
		return "f32"
	case q.sch.linear == "f16":
		return "f16"
	case q.keep.MatchString(name):
		return q.sch.kept
	case t.Ref.Role.IsLinear() || t.Ref.Role == arch.TokenEmbd || t.Ref.Role == arch.Output:
		return q.sch.linear
	}
	return "f32"
}

// encodeAll encodes the tensors, up to Threads at once, in order.
func (q *gqfQuantizer) encodeAll(ts []arch.Tensor, dryRun bool) ([]*encodedTensor, error) {
	threads := q.o.Threads
	if threads <= 0 {
		threads = goruntime.NumCPU()
	}
	out := make([]*encodedTensor, len(ts))
	errs := make([]error, len(ts))
	sem := make(chan struct{}, threads)
	var wg sync.WaitGroup
	for i, t := range ts {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var w []float32
			if !dryRun {
				q.readMu.Lock()
				var err error
				w, err = readFloat(q.inv, t)
				q.readMu.Unlock()
				if err != nil {
					errs[i] = err
					return
				}
			}
			out[i], errs[i] = q.encode(t, w)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// encode encodes one tensor; w holds its values in HF layout (nil for a dry run: the buffers
// then have their sizes but no content).
func (q *gqfQuantizer) encode(t arch.Tensor, w []float32) (*encodedTensor, error) {
	name := t.Ref.GGUFName()
	shape := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int64(d)
	}
	e := &encodedTensor{tensor: &gqf.Tensor{Name: name, Role: string(t.Ref.Role), Layer: int32(t.Ref.Layer), Shape: shape, Source: t.HFName}}
	rows, cols := 1, t.Shape[len(t.Shape)-1]
	if len(t.Shape) == 2 {
		rows = t.Shape[0]
	}
	dry := w == nil
	if dry {
		w = make([]float32, rows*cols)
	}
	codec := q.codec(t)
	if !dry {
		q.applyFolds(name, w, cols)
	}
	spec := quantize.GroupSpec{Bits: 4, Group: q.group, Symmetric: q.sch.sym || q.o.Sym}
	switch codec {
	case "int4":
		g := q.group
		for g >= 16 && cols%g != 0 {
			g /= 2
		}
		if g < 16 {
			codec, e.fallback = "int8", true
			e.note = fmt.Sprintf("row %d fits no int4 group: int8", cols)
		} else if g != q.group {
			spec.Group, e.fallback = g, true
			e.note = fmt.Sprintf("row %d: group %d", cols, g)
		}
	case "lpbq4":
		if cols%q.lpbq != 0 {
			codec, e.fallback = "int8", true // the row is not a whole number of blocks
			e.note = fmt.Sprintf("row %d fits no LPBQ block: int8", cols)
		}
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
		if dry {
			e.data, e.scales = make([]byte, rows*cols), make([]byte, 4*rows)
			break
		}
		gt, how, err := q.round(t, w, rows, cols, quantize.GroupSpec{Bits: 8, Group: 0, Symmetric: true})
		if err != nil {
			return nil, err
		}
		e.note = joinNote(e.note, how)
		for i, s := range gt.Scales {
			if s == 0 {
				gt.Scales[i] = 1 // an all-zero row: any positive scale (QNN wants one), codes 0
			}
		}
		e.data, e.scales = gt.Q, f32Bytes(gt.Scales)
	case "int4":
		e.tensor.Encoding = &gqf.Encoding{Dtype: gqf.DataType_UINT4, Bits: 4, Granularity: gqf.Granularity_PER_BLOCK,
			Axis: 0, BlockSize: uint32(spec.Group), ScaleType: gqf.DataType_F16, ZeroType: gqf.DataType_UINT8}
		if spec.Symmetric {
			e.tensor.Encoding.Dtype, e.tensor.Encoding.Symmetric, e.tensor.Encoding.ZeroType = gqf.DataType_INT4, true, gqf.DataType_DATA_TYPE_UNSPECIFIED
		}
		nb := rows * cols / spec.Group
		if dry {
			e.data, e.scales = make([]byte, rows*cols/2), make([]byte, 2*nb)
			if !spec.Symmetric {
				e.zeros = make([]byte, nb)
			}
			break
		}
		gt, how, err := q.round(t, w, rows, cols, spec)
		if err != nil {
			return nil, err
		}
		e.note = joinNote(e.note, how)
		e.data, e.scales, e.zeros = int4Buffers(gt)
	case "lpbq4":
		e.tensor.Encoding = &gqf.Encoding{Dtype: gqf.DataType_INT4, Bits: 4, Granularity: gqf.Granularity_LPBQ,
			Symmetric: true, Axis: 0, BlockSize: uint32(q.lpbq), ScaleType: gqf.DataType_F32, DecompressedBits: 8}
		lt := encodeLPBQ(w, rows, cols, q.lpbq, 4, 8)
		e.data = make([]byte, rows*cols/2)
		for i, c := range lt.codes {
			e.data[i/2] |= byte(c&0xF) << (4 * (i % 2))
		}
		e.scales, e.blocks = f32Bytes(lt.scales), lt.blocks
	}
	return e, nil
}

// applyFolds applies the folded scales of a tensor to its values w (rows of cols; a vector
// is one row of cols): input columns multiplied by colScale, rows (or a vector's entries)
// divided by rowDiv.
func (q *gqfQuantizer) applyFolds(name string, w []float32, cols int) {
	if s := q.colScale[name]; s != nil {
		for i := range w {
			w[i] *= s[i%cols]
		}
	}
	if s := q.rowDiv[name]; s != nil {
		vector := len(w) == cols
		for i := range w {
			if vector {
				w[i] /= s[i]
			} else {
				w[i] /= s[i/cols]
			}
		}
	}
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// int4Buffers converts a GroupTensor of 4-bit groups into gqf's buffers: symmetric codes
// u ∈ [0, 15] become signed q = u − 8 (INT4, low nibble first, as the GroupTensor packs
// them), asymmetric ones stay unsigned (UINT4) with their zero points as uint8; scales are
// fp16.
func int4Buffers(gt *quantize.GroupTensor) (data, scales, zeros []byte) {
	data = append([]byte(nil), gt.Q...)
	if gt.Spec.Symmetric {
		for i, b := range data {
			lo, hi := (b&0xF)-8, (b>>4)-8 // two's complement nibbles of u − 8
			data[i] = lo&0xF | hi<<4
		}
	}
	scales = make([]byte, 2*len(gt.Scales))
	for i, s := range gt.ScalesF16() {
		binary.LittleEndian.PutUint16(scales[2*i:], s)
	}
	if !gt.Spec.Symmetric {
		zeros = append([]byte(nil), gt.Zeros...)
	}
	return data, scales, zeros
}

// round quantizes the weight matrix of t (already scaled by any fold) with spec by the method,
// and says how (for the plan).
func (q *gqfQuantizer) round(t arch.Tensor, w []float32, rows, cols int, spec quantize.GroupSpec) (*quantize.GroupTensor, string, error) {
	name := t.Ref.GGUFName()
	st := q.o.Stats
	method := q.method
	if t.Ref.Role == arch.TokenEmbd || st == nil || st.LinearFor(name) == nil {
		method = MethodRTN // the embedding is a lookup; the output may have no statistics
	}
	wrap := func(gt *quantize.GroupTensor, err error) (*quantize.GroupTensor, string, error) {
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", name, err)
		}
		if method == q.method {
			return gt, "", nil
		}
		return gt, method, nil
	}
	fold := q.colScale[name]
	switch method {
	case MethodRTN:
		return wrap(quantize.QuantizeGroups(spec, w, rows, cols, nil))
	case MethodImatrix:
		return wrap(quantize.QuantizeGroups(spec, w, rows, cols, foldImportance(st.Importance(name), fold)))
	case MethodGPTQ:
		H, _, err := st.Hessian(name)
		if err != nil {
			return nil, "", err
		}
		if H == nil {
			method = MethodImatrix
			return wrap(quantize.QuantizeGroups(spec, w, rows, cols, foldImportance(st.Importance(name), fold)))
		}
		if fold != nil {
			H = quantize.ScaleHessian(H, fold)
		}
		opts := q.o.GPTQ
		// gqf stores contiguous groups: act-order always comes with static groups.
		opts.StaticGroups = opts.StaticGroups || opts.ActOrder
		return wrap(quantize.GPTQ(w, rows, cols, H, spec, opts))
	case MethodAWQ:
		H, _, err := st.Hessian(name)
		if err != nil {
			return nil, "", err
		}
		if H != nil && spec.Bits == 4 {
			if fold != nil {
				H = quantize.ScaleHessian(H, fold)
			}
			return wrap(quantize.QuantizeGroupsHessian(spec, w, rows, cols, H))
		}
		return wrap(quantize.QuantizeGroups(spec, w, rows, cols, foldImportance(st.Importance(name), fold)))
	}
	return nil, "", fmt.Errorf("%s: method %q", name, method)
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
