// Package encodings reads and writes AIMET quantization encodings JSON, the file Qualcomm's
// converters take with --quantization_overrides: version 1.0.0 (lists of entries, per-tensor,
// per-channel, per-block and LPBQ encodings) and 0.6.1 (dictionaries keyed by tensor name,
// one entry per channel; also read: 0.4.0 and 0.5.0, which have the same shape).
//
// Values follow QNN's convention: float = (q + offset)·scale, with q an unsigned code of bw
// bits (so offset ≤ 0; symmetric encodings have offset −2^(bw−1)).
package encodings

// Versions this package writes.
const (
	V1   = "1.0.0"
	V061 = "0.6.1"
)

// Encoding types (1.0.0 enc_type).
const (
	PerTensor  = "PER_TENSOR"
	PerChannel = "PER_CHANNEL"
	PerBlock   = "PER_BLOCK"
	LPBQ       = "LPBQ"
)

// Data types (1.0.0 dtype).
const (
	Int   = "INT"
	Float = "FP"
)

// Encoding is the encoding of one tensor.
type Encoding struct {
	Name string
	// Type is PerTensor, PerChannel, PerBlock or LPBQ.
	Type string
	// Dtype is Int or Float (float entries carry only Bitwidth).
	Dtype string
	// Bitwidth is bw: the code width (for LPBQ, the decompressed width).
	Bitwidth int
	// Symmetric is is_sym.
	Symmetric bool
	// Scale and Offset have one value per tensor, channel or block (LPBQ: per channel).
	Scale  []float32
	Offset []int32
	// BlockSize is the input-channel block (PerBlock, LPBQ).
	BlockSize int
	// CompressedBitwidth is LPBQ's compressed_bw (the stored code width).
	CompressedBitwidth int
	// PerBlockIntScale holds LPBQ's per-block integer scales, output channel major.
	PerBlockIntScale []uint16
}

// QuantizerArgs describes how the encodings were computed (informational).
type QuantizerArgs struct {
	ActivationBitwidth     int    `json:"activation_bitwidth"`
	Dtype                  string `json:"dtype"`
	IsSymmetric            bool   `json:"is_symmetric"`
	ParamBitwidth          int    `json:"param_bitwidth"`
	PerChannelQuantization bool   `json:"per_channel_quantization"`
	QuantScheme            string `json:"quant_scheme"`
}

// File is an encodings file.
type File struct {
	// Version is the version read (empty for a file without one: 0.4.0 rules).
	Version        string
	Activations    []Encoding
	Params         []Encoding
	QuantizerArgs  *QuantizerArgs
	ExcludedLayers []string
}

// Activation returns the activation encoding of a tensor.
func (f *File) Activation(name string) (*Encoding, bool) { return find(f.Activations, name) }

// Param returns the parameter encoding of a tensor.
func (f *File) Param(name string) (*Encoding, bool) { return find(f.Params, name) }

func find(list []Encoding, name string) (*Encoding, bool) {
	for i := range list {
		if list[i].Name == name {
			return &list[i], true
		}
	}
	return nil, false
}
