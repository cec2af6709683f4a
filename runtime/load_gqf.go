package runtime

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// loadGQF loads a gqf file. Float tensors (F32, F16, BF16) are used from the mapping. Integer
// weight matrices (int4 groups, LPBQ, int8 per channel) are packed for the kernels'
// gqf formats (kernels.NewGroupMatrix), their mapped pages released once copied: W4A16 and
// W8A16 files run in the kernels' a16 mode, W4A8 files (int8 per-token linear inputs) in a8;
// a shape the packed layout does not take is widened to float32, and the embedding's rows
// are decoded as they are looked up. Every activation encoding of the file's graph is placed on a
// point of the model's graph (placeEncodings) and applied as the point is produced — the
// simulation of the NPU's static activation quantization — before any hook of opts sees it.
// When the manifest quantizes linear layer inputs at run time (w4a8: int8 per token), the
// inputs of every linear layer are quantized that way.
func loadGQF(path string, opts Options) (*Model, error) {
	src, encs, bpw, err := openGQF(path)
	if err != nil {
		return nil, err
	}
	if opts.Widen {
		src.matrix = nil
	}
	quant, err := placeEncodings(src.spec, encs)
	if err != nil {
		src.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := build(src, opts, quant)
	if err != nil {
		src.close()
		return nil, err
	}
	m.bpwAll, m.bpwLinear = bpw[0], bpw[1]
	m.encTotal = len(encs)
	return m, nil
}

// placeEncodings maps a gqf graph's activation encodings (by activation name) to the points
// of the model's graph: an activation is a point, or a data-movement tensor of one
// (arch.Lowered.Point), and all the activations of a point must carry the same encoding.
// It refuses, naming them, encodings it cannot place: on success every one is placed.
func placeEncodings(spec *arch.Spec, encs map[string]*gqf.Encoding) (map[string]*qdq, error) {
	if len(encs) == 0 {
		return nil, nil
	}
	low, err := arch.ModelGraph(spec).Lower(1)
	if err != nil {
		return nil, err
	}
	quant := map[string]*qdq{}
	from := map[string]string{}
	var unknown, conflict []string
	names := make([]string, 0, len(encs))
	for name := range encs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e := encs[name]
		pt, ok := low.Point[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		if q := quant[pt]; q != nil {
			if !proto.Equal(q.e, e) {
				conflict = append(conflict, fmt.Sprintf("%s and %s", from[pt], name))
			}
			continue
		}
		quant[pt], from[pt] = newQDQ(e), name
	}
	var probs []string
	if len(unknown) > 0 {
		probs = append(probs, fmt.Sprintf("graph: %d activation encodings name no tensor of the %s graph: %s", len(unknown), spec.Family, strings.Join(problems.First(unknown, 5), ", ")))
	}
	if len(conflict) > 0 {
		probs = append(probs, fmt.Sprintf("graph: %d data-movement tensors carry another encoding than the tensor they move (the runtime cannot requantize them): %s", len(conflict), strings.Join(problems.First(conflict, 5), "; ")))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return quant, nil
}

// storedBPW is the storage cost of a gqf file's weights (codes, scales, zero points and block
// scales; graph constants excluded), over every weight and over the linear layers only.
func storedBPW(man *gqf.Manifest) (all, linear float64) {
	var bits, n, linBits, linN float64
	for _, t := range man.GetTensors() {
		if t.GetRole() == "constant" {
			continue
		}
		e := 1.0
		for _, d := range t.GetShape() {
			e *= float64(d)
		}
		var b float64
		for _, buf := range t.Buffers() {
			b += 8 * float64(buf.GetSize())
		}
		bits, n = bits+b, n+e
		if arch.Role(t.GetRole()).IsLinear() {
			linBits, linN = linBits+b, linN+e
		}
	}
	if n > 0 {
		all = bits / n
	}
	if linN > 0 {
		linear = linBits / linN
	}
	return all, linear
}

// openGQF opens a gqf file as a source (with its run-time encoding of linear inputs, if any)
// and returns its activation encodings by name and its stored bits per weight (all, linear).
func openGQF(path string) (*source, map[string]*gqf.Encoding, [2]float64, error) {
	f, err := gqf.Open(path)
	if err != nil {
		return nil, nil, [2]float64{}, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	man := f.Manifest
	fam, spec, err := arch.SpecFromGQF(man)
	if err == nil {
		err = arch.CheckGQF(spec)
	}
	if err != nil {
		return nil, nil, [2]float64{}, fmt.Errorf("%s: %w", path, err)
	}
	stored := make([]arch.Stored, len(man.GetTensors()))
	for i, t := range man.GetTensors() {
		shape := make([]int, len(t.GetShape()))
		for j, d := range t.GetShape() {
			shape[j] = int(d)
		}
		stored[i] = arch.Stored{Name: t.GetName(), Shape: shape}
	}
	if err := arch.CheckStored(spec, fam, "gqf", "the file", stored); err != nil {
		return nil, nil, [2]float64{}, fmt.Errorf("%s: config: %w", path, err)
	}
	tok, err := tokenizer.FromGGUF(man.Tokenizer.Getter())
	if err != nil {
		return nil, nil, [2]float64{}, fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	encs := map[string]*gqf.Encoding{}
	if g := man.Graph; g != nil {
		for _, a := range g.Activations {
			if a.Encoding != nil {
				encs[a.Name] = a.Encoding
			}
		}
	}
	src := &source{
		file: path, format: "hf", ggufNames: true, family: fam, spec: spec, tok: tok, close: f.Close,
		tensor: func(t arch.Tensor) (rawTensor, bool, error) {
			gt, found := f.Tensor(t.Ref.GGUFName())
			if !found {
				return rawTensor{}, false, nil
			}
			rt, err := gqfRaw(f, gt)
			if err != nil {
				return rawTensor{}, true, fmt.Errorf("%s: %w", path, err)
			}
			return rt, true, nil
		},
	}
	src.dyn = man.LinearInputs
	if g := man.Graph; g != nil {
		src.graphLen = int(g.MaxLen)
	}
	if src.mask, err = causalMask(f); err != nil {
		return nil, nil, [2]float64{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := slidingMask(f, src.mask, arch.ModelGraph(spec).Window()); err != nil {
		return nil, nil, [2]float64{}, fmt.Errorf("%s: %w", path, err)
	}
	src.matrix = func(name string, _ rawTensor, mode kernels.ActMode) (*kernels.Matrix, bool, error) {
		gt, found := f.Tensor(name)
		if !found {
			return nil, false, nil
		}
		w, err := groupMatrix(f, gt)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		if w == nil {
			return nil, false, nil // not a packed format: widened by newLinear
		}
		// Run-time int8 activations (w4a8) are the kernels' a8 mode, which quantizes each
		// token's input exactly as the file says; otherwise a16.
		a8 := mode == kernels.ActQuant || (mode == kernels.ActDefault && isInt8PerToken(src.dyn))
		w.Mode = kernels.ActFloat
		if a8 {
			w.Mode = kernels.ActQuant
		}
		// The kernels copied what they need: the mapped pages can go now (an embedding
		// tied to this matrix reads its rows again when it looks them up).
		f.Release(gt)
		return w, a8 && isInt8PerToken(src.dyn), nil
	}
	ok = true
	all, linear := storedBPW(man)
	return src, encs, [2]float64{all, linear}, nil
}

// gqfRaw turns a gqf tensor into the runtime's stored-tensor view: float data as they are,
// quantized data as a row decoder (rawTensor.rows) over the mapped bytes.
func gqfRaw(f *gqf.File, t *gqf.Tensor) (rawTensor, error) {
	shape := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int(d)
	}
	rt := rawTensor{name: t.Name, shape: shape}
	if e := t.Encoding; e.Granularity == gqf.Granularity_FLOAT {
		switch e.Dtype {
		case gqf.DataType_F32:
			rt.typ = gguf.F32
		case gqf.DataType_F16:
			rt.typ = gguf.F16
		case gqf.DataType_BF16:
			rt.typ = gguf.BF16
		default:
			return rt, fmt.Errorf("%s: dtype %v is not a weight type", t.Name, e.Dtype)
		}
		rt.data = f.Bytes(t.Data)
		return rt, nil
	}
	rt.typ = gguf.F32
	for _, b := range t.Buffers() {
		rt.size += int(b.GetSize())
	}
	rt.rows = func(dst []float32, r0, r1 int) error { return f.DecodeRows(t, r0, r1, dst) }
	return rt, nil
}

// causalMask returns the value above the diagonal of a file's attn.mask constant (0 when the
// file has none), checking that it is the causal mask the runtime applies: 0 on and below the
// diagonal, one negative value above.
func causalMask(f *gqf.File) (float32, error) {
	t, ok := f.Tensor(arch.ConstMask)
	if !ok {
		return 0, nil
	}
	vals, err := f.Decode(t)
	if err != nil {
		return 0, err
	}
	if len(t.Shape) != 2 || t.Shape[0] != t.Shape[1] || t.Shape[0] < 2 {
		return 0, fmt.Errorf("graph: %s: shape %v is not a square of at least 2", arch.ConstMask, t.Shape)
	}
	L := int(t.Shape[0])
	m := vals[1]
	for i := 0; i < L; i++ {
		for j := 0; j < L; j++ {
			want := float32(0)
			if j > i {
				want = m
			}
			if vals[i*L+j] != want || !(m < 0) {
				return 0, fmt.Errorf("graph: %s: [%d, %d] = %g is not a causal mask (0 on and below the diagonal, one negative value above)", arch.ConstMask, i, j, vals[i*L+j])
			}
		}
	}
	return m, nil
}

// slidingMask checks a file's attn.mask_swa, when it has one: the sliding layers' mask the
// runtime applies, arch.CausalMask with the model's window and the file's mask value m.
func slidingMask(f *gqf.File, m float32, window int) error {
	t, ok := f.Tensor(arch.ConstMaskSWA)
	if !ok {
		return nil
	}
	vals, err := f.Decode(t)
	if err != nil {
		return err
	}
	L := int(t.Shape[0])
	if len(t.Shape) != 2 || t.Shape[0] != t.Shape[1] || window <= 0 || m == 0 {
		return fmt.Errorf("graph: %s: shape %v: not the sliding-window mask of a model with window %d and a causal mask", arch.ConstMaskSWA, t.Shape, window)
	}
	want := arch.CausalMask(L, window, m)
	for i, v := range vals {
		if v != want[i] {
			return fmt.Errorf("graph: %s: [%d, %d] = %g is not the sliding-window mask (window %d, mask %g)", arch.ConstMaskSWA, i/L, i%L, v, window, m)
		}
	}
	return nil
}

// isInt8PerToken reports whether a run-time encoding of linear inputs is the one the kernels'
// a8 mode applies: signed 8-bit codes, one symmetric scale per token.
func isInt8PerToken(e *gqf.Encoding) bool {
	return e != nil && e.Granularity == gqf.Granularity_PER_TOKEN && e.Bits == 8 && e.Dtype == gqf.DataType_INT8 && e.Symmetric
}

// groupMatrix packs a gqf weight matrix for the kernels (kernels.NewGroupMatrix): int4 groups
// (asymmetric with uint8 zero points, or symmetric), LPBQ (symmetric int4 whose block scales
// are the channel scale times the block's integer scale: gqf's LPBQScales, Decode's rule)
// and int8 per channel. It returns nil for other encodings and for shapes the packed layout
// does not take (the runtime widens those to float32).
func groupMatrix(f *gqf.File, t *gqf.Tensor) (*kernels.Matrix, error) {
	e := t.Encoding
	if len(t.Shape) != 2 {
		return nil, nil
	}
	rows, cols := int(t.Shape[0]), int(t.Shape[1])
	var gf kernels.GroupFormat
	scales := f.Scales(t)
	var zeros []uint8
	switch {
	case e.Granularity == gqf.Granularity_PER_BLOCK && e.Bits == 4 && e.Dtype == gqf.DataType_UINT4 && e.ZeroType == gqf.DataType_UINT8:
		gf = kernels.GroupFormat{Bits: 4, Group: int(e.BlockSize)}
		zeros = f.Bytes(t.Zeros)
	case e.Granularity == gqf.Granularity_PER_BLOCK && e.Bits == 4 && e.Dtype == gqf.DataType_INT4:
		gf = kernels.GroupFormat{Bits: 4, Group: int(e.BlockSize), Signed: true}
	case e.Granularity == gqf.Granularity_LPBQ && e.Bits == 4 && e.Dtype == gqf.DataType_INT4:
		gf = kernels.GroupFormat{Bits: 4, Group: int(e.BlockSize), Signed: true}
		scales = f.LPBQScales(t)
	case e.Granularity == gqf.Granularity_PER_CHANNEL && e.Bits == 8 && e.Dtype == gqf.DataType_INT8 && t.Zeros == nil:
		gf = kernels.GroupFormat{Bits: 8, Signed: true}
	default:
		return nil, nil
	}
	w, err := kernels.NewGroupMatrix(gf, rows, cols, f.Bytes(t.Data), scales, zeros)
	if err != nil {
		return nil, nil // a shape the packed layout does not take: widened instead
	}
	return w, nil
}
