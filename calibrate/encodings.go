package calibrate

import (
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/runtime/arch"
)

// minRange is QNN's smallest encoding range.
const minRange = 1e-4

// AsymmetricEncoding returns the QNN encoding of [lo, hi] on an unsigned bits-bit grid: the
// range is widened to contain 0 and to be at least 1e-4 wide, scale = (hi − lo)/(2^bits − 1) in
// float32 and offset = round(lo/scale), so that q = −offset decodes to exactly 0.
func AsymmetricEncoding(lo, hi float64, bits int) (scale float32, offset int32) {
	lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	if hi-lo < minRange {
		if hi > 0 || lo == 0 {
			hi = lo + minRange
		} else {
			lo = hi - minRange
		}
	}
	steps := math.Ldexp(1, bits) - 1
	scale = float32((hi - lo) / steps)
	off := math.Round(lo / float64(scale))
	off = math.Max(math.Min(off, 0), -steps)
	return scale, int32(off)
}

// SymmetricEncoding returns the QNN encoding of [−absMax, absMax] on a signed bits-bit grid
// stored unsigned: scale = absMax/(2^(bits−1) − 1) (absMax at least 5e-5, so that the range is
// at least 1e-4) and offset −2^(bits−1), as AIMET writes it.
func SymmetricEncoding(absMax float64, bits int) (scale float32, offset int32) {
	absMax = math.Max(absMax, minRange/2)
	half := math.Ldexp(1, bits-1)
	return float32(absMax / (half - 1)), int32(-half)
}

// ActivationEncodings returns a 16-bit (o.Bits) asymmetric per-tensor encoding for every
// activation tensor, in graph order, with ranges set by o.
func (s *Stats) ActivationEncodings(o RangeOptions) ([]encodings.Encoding, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name(), err)
	}
	if len(s.Acts) == 0 {
		return nil, fmt.Errorf("%s: no activation statistics (an imatrix holds none; run gquant calibrate)", s.name())
	}
	out := make([]encodings.Encoding, 0, len(s.Acts))
	for _, a := range s.Acts {
		lo, hi := a.Range(o)
		sc, off := AsymmetricEncoding(lo, hi, o.Bits)
		out = append(out, encodings.Encoding{Name: a.Name, Type: encodings.PerTensor, Dtype: encodings.Int, Bitwidth: o.Bits, Scale: []float32{sc}, Offset: []int32{off}})
	}
	return out, nil
}

// weightEncoding returns the encoding of a parameter: matrices (rows × cols) get a symmetric
// per-channel (per-row) encoding of matBits bits, vectors (cols = 0) a symmetric per-tensor
// one of vecBits bits.
func weightEncoding(name string, w []float32, rows, cols, matBits, vecBits int) encodings.Encoding {
	if cols == 0 {
		var m float64
		for _, v := range w {
			m = math.Max(m, math.Abs(float64(v)))
		}
		sc, off := SymmetricEncoding(m, vecBits)
		return encodings.Encoding{Name: name, Type: encodings.PerTensor, Dtype: encodings.Int, Bitwidth: vecBits, Symmetric: true, Scale: []float32{sc}, Offset: []int32{off}}
	}
	e := encodings.Encoding{Name: name, Type: encodings.PerChannel, Dtype: encodings.Int, Bitwidth: matBits, Symmetric: true, Scale: make([]float32, rows), Offset: make([]int32, rows)}
	for r := 0; r < rows; r++ {
		var m float64
		for _, v := range w[r*cols : (r+1)*cols] {
			m = math.Max(m, math.Abs(float64(v)))
		}
		e.Scale[r], e.Offset[r] = SymmetricEncoding(m, matBits)
	}
	return e
}

// W8A16 builds the encodings of Qualcomm's w8a16 for the model at path with this spec: 16-bit
// asymmetric activation encodings from the statistics (checked against the spec first) with
// ranges set by r, and 8-bit symmetric per-channel weight encodings (ParamEncodings).
func W8A16(s *Stats, path string, spec *arch.Spec, r RangeOptions) (*encodings.File, error) {
	if err := s.Validate(spec); err != nil {
		return nil, err
	}
	r.Bits = 16
	r, err := r.normalize()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name(), err)
	}
	acts, err := s.ActivationEncodings(r)
	if err != nil {
		return nil, err
	}
	params, err := ParamEncodings(path, spec, ParamOptions{MatrixBits: 8})
	if err != nil {
		return nil, err
	}
	return &encodings.File{
		Activations: acts, Params: params,
		QuantizerArgs: &encodings.QuantizerArgs{
			ActivationBitwidth: 16, Dtype: "int", IsSymmetric: true, ParamBitwidth: 8,
			PerChannelQuantization: true, QuantScheme: quantScheme(r.Mode),
		},
	}, nil
}
