package calibrate

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/half"
	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/runtime/arch"
)

// ParamOptions set the bit widths of parameter encodings.
type ParamOptions struct {
	// MatrixBits is the width of the symmetric per-channel encodings of matrices (linear
	// weights and the embedding; 0: 8).
	MatrixBits int
	// VectorBits is the width of the symmetric per-tensor encodings of norm weights (0: 16).
	VectorBits int
	// BiasBits is the width of the symmetric per-tensor encodings of biases (0: 32, as QNN
	// converters expect).
	BiasBits int
	// LPBQBlock, when set, gives the linear layers' matrices whose rows are a whole number of
	// such blocks Qualcomm's LPBQ encoding instead (int4 codes, 8-bit decompressed: the
	// weights gquant convert's w4a16-qnn and w4a8-qnn write, quantize.EncodeLPBQ); the other
	// matrices (the embedding, the output, rows that fit no block) keep MatrixBits per channel.
	LPBQBlock int
}

// ParamEncodings returns an encoding for every weight of the model at path (a HuggingFace
// folder, or a GGUF file with F32, F16 or BF16 tensors), named by GGUF name, in model order:
// matrices symmetric per output channel, in the row order of the file; norm weights and
// biases symmetric per tensor. spec is the model's (runtime.Model.Spec).
func ParamEncodings(path string, spec *arch.Spec, o ParamOptions) ([]encodings.Encoding, error) {
	if o.MatrixBits == 0 {
		o.MatrixBits = 8
	}
	if o.VectorBits == 0 {
		o.VectorBits = 16
	}
	if o.BiasBits == 0 {
		o.BiasBits = 32
	}
	for _, b := range []int{o.MatrixBits, o.VectorBits, o.BiasBits} {
		if b < 2 || b > 32 {
			return nil, fmt.Errorf("%s: parameter bit width %d is not in [2, 32]", path, b)
		}
	}
	ts, err := arch.StoredTensors(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	read, closeFn, err := paramReader(path)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	var out []encodings.Encoding
	var buf []float32
	for _, t := range ts {
		name := t.Ref.GGUFName()
		buf, err = read(t, buf)
		if err != nil {
			return nil, err
		}
		rows, cols := t.Shape[0], 0
		if len(t.Shape) == 2 {
			cols = t.Shape[1]
		}
		if len(buf) != rows*max(cols, 1) {
			return nil, fmt.Errorf("%s: %s: %d values for shape %v", path, name, len(buf), t.Shape)
		}
		for i, v := range buf {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("%s: %s: element %d is %g", path, name, i, v)
			}
		}
		vecBits := o.VectorBits
		switch t.Ref.Role {
		case arch.AttnQBias, arch.AttnKBias, arch.AttnVBias:
			vecBits = o.BiasBits
		}
		if o.LPBQBlock > 0 && cols > 0 && cols%o.LPBQBlock == 0 && t.Ref.Role.IsLinear() && name != outputWeight {
			out = append(out, lpbqEncoding(name, buf, rows, cols, o.LPBQBlock))
			continue
		}
		out = append(out, weightEncoding(name, buf, rows, cols, o.MatrixBits, vecBits))
	}
	return out, nil
}

// paramReader opens a model's weights for reading as float32.
func paramReader(path string) (read func(t arch.Tensor, buf []float32) ([]float32, error), closeFn func() error, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if st.IsDir() {
		m, err := hf.Open(path)
		if err != nil {
			return nil, nil, err
		}
		return func(t arch.Tensor, buf []float32) ([]float32, error) {
			if _, ok := m.Checkpoint.Lookup(t.HFName); !ok {
				return nil, fmt.Errorf("%s: %s: missing", path, t.HFName)
			}
			return m.Checkpoint.ToFloat32(t.HFName, buf)
		}, m.Close, nil
	}
	f, err := gguf.OpenSplit(path)
	if err != nil {
		return nil, nil, err
	}
	return func(t arch.Tensor, buf []float32) ([]float32, error) {
		name := t.Ref.GGUFName()
		i, ok := f.TensorIndex(name)
		if !ok {
			return nil, fmt.Errorf("%s: %s: missing", path, name)
		}
		info, data := f.Tensors[i], f.TensorData(i)
		n := int(gguf.ElementCount(info.Shape))
		buf = buf[:0]
		switch info.Type {
		case gguf.F32:
			for j := 0; j < n; j++ {
				buf = append(buf, math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:])))
			}
		case gguf.F16:
			for j := 0; j < n; j++ {
				buf = append(buf, half.F16ToF32(binary.LittleEndian.Uint16(data[2*j:])))
			}
		case gguf.BF16:
			for j := 0; j < n; j++ {
				buf = append(buf, half.BF16ToF32(binary.LittleEndian.Uint16(data[2*j:])))
			}
		default:
			return nil, fmt.Errorf("%s: %s: type %v: weight encodings need F32, F16 or BF16 weights", path, name, info.Type)
		}
		return buf, nil
	}, f.Close, nil
}
