package calibrate

import (
	"fmt"
	"math"
	"strings"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// weightEncoding returns the encoding of a parameter: matrices (rows × cols) get a symmetric
// per-channel (per-row) encoding of matBits bits, vectors (cols = 0) a symmetric per-tensor
// one of vecBits bits.
func weightEncoding(name string, w []float32, rows, cols, matBits, vecBits int) encodings.Encoding {
	if cols == 0 {
		var m float64
		for _, v := range w {
			m = math.Max(m, math.Abs(float64(v)))
		}
		sc, off := encodings.Symmetric(m, vecBits)
		return encodings.Encoding{Name: name, Type: encodings.PerTensor, Dtype: encodings.Int, Bitwidth: vecBits, Symmetric: true, Scale: []float32{sc}, Offset: []int32{off}}
	}
	e := encodings.Encoding{Name: name, Type: encodings.PerChannel, Dtype: encodings.Int, Bitwidth: matBits, Symmetric: true, Scale: make([]float32, rows), Offset: make([]int32, rows)}
	for r := 0; r < rows; r++ {
		var m float64
		for _, v := range w[r*cols : (r+1)*cols] {
			m = math.Max(m, math.Abs(float64(v)))
		}
		e.Scale[r], e.Offset[r] = encodings.Symmetric(m, matBits)
	}
	return e
}

// lpbqEncoding returns the LPBQ encoding of a matrix (quantize.EncodeLPBQ with int4 codes and
// 8-bit decompressed products, blocks of bs input channels): the channel scales, the blocks'
// integer scales, offsets −2^7 as AIMET writes a symmetric 8-bit encoding.
func lpbqEncoding(name string, w []float32, rows, cols, bs int) encodings.Encoding {
	lt := quantize.EncodeLPBQ(w, rows, cols, bs, 4, 8)
	e := encodings.Encoding{Name: name, Type: encodings.LPBQ, Dtype: encodings.Int, Bitwidth: 8, Symmetric: true,
		Scale: lt.Scales, Offset: make([]int32, rows), BlockSize: bs, CompressedBitwidth: 4,
		PerBlockIntScale: make([]uint16, len(lt.Blocks))}
	for i := range e.Offset {
		e.Offset[i] = -128
	}
	for i, k := range lt.Blocks {
		e.PerBlockIntScale[i] = uint16(k)
	}
	return e
}

// outputWeight is the output head's GGUF name: a matrix gquant's 4-bit schemes keep at 8 bits
// per channel, with the embedding.
const outputWeight = "output.weight"

// DefaultLPBQBlock is the LPBQ block of the 4-bit QNN schemes (gquant convert's default).
const DefaultLPBQBlock = 64

// QNNScheme is a Qualcomm QNN scheme whose AIMET encodings calibrate writes: static
// activation encodings of ActBits bits and the weight encodings of gquant convert's scheme of
// the same name.
type QNNScheme struct {
	Name string
	// ActBits is the width of the (asymmetric, per-tensor) activation encodings.
	ActBits int
	// ParamBits is the width of the linear layers' weights: 8 (symmetric per channel) or 4
	// (LPBQ in blocks of DefaultLPBQBlock; the embedding and the output stay 8-bit per
	// channel, as gquant convert keeps them by default).
	ParamBits int
}

// qnnSchemes are the schemes of QNN (gquant convert --format gqf --scheme NAME writes files
// with the same activation widths).
var qnnSchemes = []QNNScheme{
	{Name: "w8a16", ActBits: 16, ParamBits: 8},
	{Name: "w4a16-qnn", ActBits: 16, ParamBits: 4},
	{Name: "w4a16-lpbq", ActBits: 16, ParamBits: 4},
	{Name: "w4a8-qnn", ActBits: 8, ParamBits: 4},
}

// QNNSchemes lists the names QNN accepts.
func QNNSchemes() []string {
	var out []string
	for _, s := range qnnSchemes {
		out = append(out, s.Name)
	}
	return out
}

// QNNSchemeByName returns the scheme named name.
func QNNSchemeByName(name string) (QNNScheme, error) {
	for _, s := range qnnSchemes {
		if s.Name == name {
			return s, nil
		}
	}
	return QNNScheme{}, fmt.Errorf("scheme: %q is not a QNN scheme (want %s)", name, strings.Join(QNNSchemes(), ", "))
}

// W8A16 is QNN with the scheme w8a16.
func W8A16(s *stats.Stats, path string, spec *arch.Spec, r quantize.RangeOptions) (*encodings.File, error) {
	return QNN(s, path, spec, "w8a16", r)
}

// QNN builds the encodings of a Qualcomm QNN scheme (QNNScheme) for the model at path with
// this spec: asymmetric activation encodings of the scheme's width for every point of the
// graph, from the statistics (checked against the spec first), with ranges set by r, and the
// scheme's weight encodings (ParamEncodings). gquant convert --encodings takes the file for
// the scheme of the same name.
func QNN(s *stats.Stats, path string, spec *arch.Spec, scheme string, r quantize.RangeOptions) (*encodings.File, error) {
	sch, err := QNNSchemeByName(scheme)
	if err != nil {
		return nil, err
	}
	if err := arch.ValidateStats(s, spec, WeightsDigest(path, spec)); err != nil {
		return nil, err
	}
	// ActivationEncodings normalizes r (and reports its errors); quantScheme names the
	// default mode "" as it names RangeSQNR.
	r.Bits = sch.ActBits
	acts, err := quantize.ActivationEncodings(s, r)
	if err != nil {
		return nil, err
	}
	if acts, err = graphEncodings(s, spec, acts, r); err != nil {
		return nil, err
	}
	po := ParamOptions{MatrixBits: 8}
	if sch.ParamBits == 4 {
		po.LPBQBlock = DefaultLPBQBlock
	}
	params, err := ParamEncodings(path, spec, po)
	if err != nil {
		return nil, err
	}
	return &encodings.File{
		Activations: acts, Params: params,
		QuantizerArgs: &encodings.QuantizerArgs{
			ActivationBitwidth: sch.ActBits, Dtype: "int", IsSymmetric: true, ParamBitwidth: sch.ParamBits,
			PerChannelQuantization: true, QuantScheme: quantScheme(r.Mode),
		},
	}, nil
}

// graphEncodings completes the activation encodings of statistics for the graph gquant
// convert --encodings lowers: every point must have statistics (version 1 files lack the
// graph-only points: the file would be refused), and the masked attention scores (kq_masked)
// are encoded as convert encodes them from statistics, for the mask that convert chooses from
// these encodings (EncodingsMask): kq_scaled's range widened down by that mask, whatever mask
// the calibration run observed. The file and the converted graph then agree, and masked
// positions stay masked after quantization.
func graphEncodings(s *stats.Stats, spec *arch.Spec, acts []encodings.Encoding, r quantize.RangeOptions) ([]encodings.Encoding, error) {
	r, err := r.Normalize()
	if err != nil {
		return nil, err
	}
	points := arch.ModelGraph(spec).Points()
	var missing []string
	for _, pt := range points {
		if s.Act(pt) == nil {
			missing = append(missing, pt)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: statistics (version %d) lack %d of the graph's %d activations (%s): calibrate again on a corpus (gquant calibrate MODEL --corpus FILE)",
			s.Source, s.Version, len(missing), len(points), strings.Join(problems.First(missing, 5), ", "))
	}
	f := &encodings.File{Activations: acts}
	mask, ok := EncodingsMask(f, spec)
	if !ok {
		return acts, nil
	}
	for i := range acts {
		base, ok := strings.CutSuffix(acts[i].Name, "kq_masked")
		if !ok {
			continue
		}
		lo, hi := quantize.ActRange(s.Act(base+"kq_scaled"), r)
		acts[i].Scale[0], acts[i].Offset[0] = encodings.Asymmetric(lo+float64(mask), hi, r.Bits)
	}
	return acts, nil
}

// EncodingsMask is the attention mask (arch.Graph.Mask) of a graph with these activation
// encodings: arch.MaskFor over the range that the scaled attention scores' encodings
// (blk.L.kq_scaled) of every layer represent, [scale·offset, scale·(offset + 2^bw − 1)], so
// that every masked score stays below every visible one as the graph computes them. ok is
// false when a layer has no such encoding.
func EncodingsMask(f *encodings.File, spec *arch.Spec) (mask float32, ok bool) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for l := 0; l < spec.Layers; l++ {
		e, found := f.Activation(fmt.Sprintf("blk.%d.kq_scaled", l))
		if !found || e.Dtype != encodings.Int || len(e.Scale) != 1 || len(e.Offset) != 1 {
			return 0, false
		}
		sc, off := float64(e.Scale[0]), float64(e.Offset[0])
		lo = math.Min(lo, sc*off)
		hi = math.Max(hi, sc*(off+math.Ldexp(1, e.Bitwidth)-1))
	}
	if spec.Layers == 0 {
		return 0, false
	}
	return arch.MaskFor(lo, hi), true
}
