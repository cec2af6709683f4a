package calibrate

import (
	"math"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/stats"
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

// W8A16 builds the encodings of Qualcomm's w8a16 for the model at path with this spec: 16-bit
// asymmetric activation encodings from the statistics (checked against the spec first) with
// ranges set by r, and 8-bit symmetric per-channel weight encodings (ParamEncodings).
func W8A16(s *stats.Stats, path string, spec *arch.Spec, r quantize.RangeOptions) (*encodings.File, error) {
	if err := arch.ValidateStats(s, spec, WeightsDigest(path, spec)); err != nil {
		return nil, err
	}
	// ActivationEncodings normalizes r (and reports its errors); quantScheme names the
	// default mode "" as it names RangeSQNR.
	r.Bits = 16
	acts, err := quantize.ActivationEncodings(s, r)
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
