package export

import (
	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
)

// aimetActivation is the AIMET entry of an activation: its per-tensor integer encoding, or
// a 16-bit float entry when the scheme keeps activations in float.
func aimetActivation(a *gqf.Value) encodings.Encoding {
	e := a.Encoding
	if e == nil {
		return encodings.Encoding{Name: a.Name, Type: encodings.PerTensor, Dtype: encodings.Float, Bitwidth: 16}
	}
	return encodings.Encoding{Name: a.Name, Type: encodings.PerTensor, Dtype: encodings.Int, Bitwidth: int(e.Bits),
		Symmetric: e.Symmetric, Scale: []float32{e.Scale[0]}, Offset: []int32{e.Offset[0]}}
}

// aimetParam is the AIMET entry of a quantized weight. AIMET's offsets refer to unsigned
// codes: a symmetric signed encoding of bw bits has offset −2^(bw−1); an asymmetric one −z.
func (e *exporter) aimetParam(name string, t *gqf.Tensor) encodings.Encoding {
	enc := t.Encoding
	out := encodings.Encoding{Name: name, Dtype: encodings.Int, Bitwidth: int(enc.Bits), Symmetric: enc.Symmetric}
	out.Scale = e.f.Scales(t)
	n := len(out.Scale)
	out.Offset = make([]int32, n)
	zeros := e.f.Zeros(t)
	for i := range out.Offset {
		switch {
		case zeros != nil:
			out.Offset[i] = -zeros[i]
		case enc.Dtype.Signed():
			out.Offset[i] = -(1 << (out.Bitwidth - 1))
		}
	}
	switch enc.Granularity {
	case gqf.Granularity_PER_CHANNEL:
		out.Type = encodings.PerChannel
	case gqf.Granularity_PER_BLOCK:
		out.Type = encodings.PerBlock
		out.BlockSize = int(enc.BlockSize)
	case gqf.Granularity_LPBQ:
		out.Type = encodings.LPBQ
		out.BlockSize = int(enc.BlockSize)
		out.CompressedBitwidth = int(enc.Bits)
		out.Bitwidth = int(enc.DecompressedBits)
		for i := range out.Offset {
			out.Offset[i] = -(1 << (out.Bitwidth - 1))
		}
		for _, k := range e.f.BlockScales(t) {
			out.PerBlockIntScale = append(out.PerBlockIntScale, uint16(k))
		}
	}
	return out
}

// quantizerArgs summarises the scheme for AIMET's quantizer_args: the weights' width from
// the scheme, the activations' from their encodings (w4a8-qnn's 8 bits, the CPU w4a8's float
// activations 16-bit float).
func quantizerArgs(m *gqf.Manifest) *encodings.QuantizerArgs {
	q := &encodings.QuantizerArgs{Dtype: "int", IsSymmetric: true, PerChannelQuantization: true, QuantScheme: "post_training_tf"}
	switch m.Scheme {
	case "w4a16", "w4a8":
		q.ParamBitwidth = 4
	case "w8a16":
		q.ParamBitwidth = 8
	default:
		q.Dtype, q.ParamBitwidth, q.ActivationBitwidth = "float", 16, 16
		return q
	}
	q.ActivationBitwidth = 16
	for _, a := range m.GetGraph().GetActivations() {
		if a.Encoding != nil {
			q.ActivationBitwidth = int(a.Encoding.Bits)
			break
		}
	}
	return q
}
