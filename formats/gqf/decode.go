package gqf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/half"
)

// Decode returns the values of a tensor of f as float32, row-major. Quantized values are
// (q + offset)·scale in float32 with QNN's offset, computed as float32(float32(q − z)·s)
// where z = −offset is the zero point; an LPBQ block's scale is float32(c·k) for channel
// scale c and block int scale k.
func (f *File) Decode(t *Tensor) ([]float32, error) {
	n, err := elements(t.Shape)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", t.Name, err)
	}
	e := t.Encoding
	out := make([]float32, n)
	data := f.Bytes(t.Data)
	if e.Granularity == Granularity_FLOAT {
		switch e.Dtype {
		case DataType_F32:
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		case DataType_F16:
			for i := range out {
				out[i] = half.F16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
			}
		case DataType_BF16:
			for i := range out {
				out[i] = half.BF16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
			}
		default:
			return nil, fmt.Errorf("%s: dtype %v is not a float type", t.Name, e.Dtype)
		}
		return out, nil
	}
	codes := f.Codes(t)
	scales, zeros := f.Scales(t), f.Zeros(t)
	cols := int(t.Shape[len(t.Shape)-1])
	switch e.Granularity {
	case Granularity_PER_TENSOR:
		s, z := e.Scale[0], -e.Offset[0]
		for i, q := range codes {
			out[i] = float32(float32(q-z) * s)
		}
	case Granularity_PER_CHANNEL, Granularity_PER_BLOCK:
		bs := cols
		if e.Granularity == Granularity_PER_BLOCK {
			bs = int(e.BlockSize)
		}
		for i, q := range codes {
			g := i / bs // blocks never cross rows: bs divides cols
			var z int32
			if zeros != nil {
				z = zeros[g]
			}
			out[i] = float32(float32(q-z) * scales[g])
		}
	case Granularity_LPBQ:
		bs := int(e.BlockSize)
		k := f.Bytes(t.BlockScales)
		for i, q := range codes {
			s := float32(scales[i/cols] * float32(k[i/bs]))
			out[i] = float32(float32(q) * s)
		}
	default:
		return nil, fmt.Errorf("%s: granularity %v is unknown", t.Name, e.Granularity)
	}
	return out, nil
}

// DecodeRows writes rows [r0, r1) of a matrix (or, for a vector, elements [r0, r1)) of f as
// float32 into dst, with the decoding rules of Decode, reading only those rows' bytes.
func (f *File) DecodeRows(t *Tensor, r0, r1 int, dst []float32) error {
	n, err := elements(t.Shape)
	if err != nil {
		return fmt.Errorf("%s: %v", t.Name, err)
	}
	cols := int(t.Shape[len(t.Shape)-1])
	rows := int(n) / cols
	if len(t.Shape) == 1 {
		rows, cols = int(n), 1
	}
	if r0 < 0 || r1 > rows || r0 > r1 || len(dst) < (r1-r0)*cols {
		return fmt.Errorf("%s: rows [%d, %d) of %d into %d values", t.Name, r0, r1, rows, len(dst))
	}
	e := t.Encoding
	data := f.Bytes(t.Data)
	lo, hi := r0*cols, r1*cols
	out := dst[:hi-lo]
	if e.Granularity == Granularity_FLOAT {
		switch e.Dtype {
		case DataType_F32:
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*(lo+i):]))
			}
		case DataType_F16:
			for i := range out {
				out[i] = half.F16ToF32(binary.LittleEndian.Uint16(data[2*(lo+i):]))
			}
		case DataType_BF16:
			for i := range out {
				out[i] = half.BF16ToF32(binary.LittleEndian.Uint16(data[2*(lo+i):]))
			}
		default:
			return fmt.Errorf("%s: dtype %v is not a float type", t.Name, e.Dtype)
		}
		return nil
	}
	code := func(i int) int32 {
		switch e.Dtype {
		case DataType_INT4:
			return int32(int8(data[i/2]>>(4*(i%2))<<4) >> 4)
		case DataType_UINT4:
			return int32(data[i/2] >> (4 * (i % 2)) & 0xF)
		case DataType_INT8:
			return int32(int8(data[i]))
		case DataType_UINT8:
			return int32(data[i])
		case DataType_INT16:
			return int32(int16(binary.LittleEndian.Uint16(data[2*i:])))
		default: // UINT16
			return int32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	}
	scale := func(g int) float32 {
		b := f.Bytes(t.Scales)
		if e.ScaleType == DataType_F16 {
			return half.F16ToF32(binary.LittleEndian.Uint16(b[2*g:]))
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(b[4*g:]))
	}
	zero := func(g int) int32 {
		b := f.Bytes(t.Zeros)
		if b == nil {
			return 0
		}
		if e.ZeroType == DataType_UINT16 {
			return int32(binary.LittleEndian.Uint16(b[2*g:]))
		}
		return int32(b[g])
	}
	switch e.Granularity {
	case Granularity_PER_TENSOR:
		s, z := e.Scale[0], -e.Offset[0]
		for i := range out {
			out[i] = float32(float32(code(lo+i)-z) * s)
		}
	case Granularity_PER_CHANNEL, Granularity_PER_BLOCK:
		bs := cols
		if e.Granularity == Granularity_PER_BLOCK {
			bs = int(e.BlockSize)
		}
		for i := range out {
			g := (lo + i) / bs
			out[i] = float32(float32(code(lo+i)-zero(g)) * scale(g))
		}
	case Granularity_LPBQ:
		bs := int(e.BlockSize)
		k := f.Bytes(t.BlockScales)
		for i := range out {
			s := float32(scale((lo+i)/cols) * float32(k[(lo+i)/bs]))
			out[i] = float32(float32(code(lo+i)) * s)
		}
	default:
		return fmt.Errorf("%s: granularity %v is unknown", t.Name, e.Granularity)
	}
	return nil
}

// Codes returns the integer codes of a quantized tensor, one per element, signed or not as
// its dtype says (nil for a float tensor).
func (f *File) Codes(t *Tensor) []int32 {
	e := t.Encoding
	if !e.Dtype.IsCode() {
		return nil
	}
	data := f.Bytes(t.Data)
	n := len(data) * 8 / e.Dtype.Bits()
	out := make([]int32, n)
	switch e.Dtype {
	case DataType_INT4:
		for i := range out {
			out[i] = int32(int8(data[i/2]>>(4*(i%2))<<4) >> 4)
		}
	case DataType_UINT4:
		for i := range out {
			out[i] = int32(data[i/2] >> (4 * (i % 2)) & 0xF)
		}
	case DataType_INT8:
		for i := range out {
			out[i] = int32(int8(data[i]))
		}
	case DataType_UINT8:
		for i := range out {
			out[i] = int32(data[i])
		}
	case DataType_INT16:
		for i := range out {
			out[i] = int32(int16(binary.LittleEndian.Uint16(data[2*i:])))
		}
	case DataType_UINT16:
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	}
	return out
}

// Scales returns the stored per-channel or per-block scales of a tensor (nil when it has
// none).
func (f *File) Scales(t *Tensor) []float32 {
	b := f.Bytes(t.Scales)
	if b == nil {
		return nil
	}
	if t.Encoding.ScaleType == DataType_F16 {
		out := make([]float32, len(b)/2)
		for i := range out {
			out[i] = half.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return out
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Zeros returns the stored zero points (−offset) of an asymmetric tensor (nil when
// symmetric).
func (f *File) Zeros(t *Tensor) []int32 {
	b := f.Bytes(t.Zeros)
	if b == nil {
		return nil
	}
	if t.Encoding.ZeroType == DataType_UINT16 {
		out := make([]int32, len(b)/2)
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return out
	}
	out := make([]int32, len(b))
	for i, v := range b {
		out[i] = int32(v)
	}
	return out
}

// BlockScales returns the LPBQ per-block integer scales (nil for other encodings).
func (f *File) BlockScales(t *Tensor) []uint8 { return f.Bytes(t.BlockScales) }

// QDQ quantizes x in place to a per-tensor encoding and dequantizes it back, as ONNX's
// QuantizeLinear then DequantizeLinear do with zero point −offset: q = clamp(round(x/scale)
// − offset) (half to even), x = (q + offset)·scale, all in float32. The encoding must have
// passed validation (Parse or CheckActivation).
func QDQ(e *Encoding, x []float32) {
	lo, hi := e.Dtype.CodeRange()
	if e.Bits < uint32(e.Dtype.Bits()) {
		if e.Dtype.Signed() {
			lo, hi = -(1 << (e.Bits - 1)), 1<<(e.Bits-1)-1
		} else {
			hi = 1<<e.Bits - 1
		}
	}
	s, off := e.Scale[0], float64(e.Offset[0])
	flo, fhi := float64(lo), float64(hi)
	for i, v := range x {
		q := math.RoundToEven(float64(v/s)) - off
		if q < flo {
			q = flo
		} else if q > fhi {
			q = fhi
		} else if q != q { // NaN
			q = -off
		}
		x[i] = float32(float32(q+off) * s)
	}
}

// QDQRows quantizes x (rows of dim values) in place with a dynamic per-token encoding (see
// CheckDynamic) and dequantizes it back: each row's scale is s = float32(max|x|/qmax) with
// qmax = 2^(bits−1) − 1, q = clamp(round(x/s)) (half to even) in [−qmax, qmax], x = q·s, all in
// float32. A row of zeros stays zero; a NaN becomes 0.
func QDQRows(e *Encoding, x []float32, dim int) {
	qmax := float32(int32(1)<<(e.Bits-1) - 1)
	for r := 0; r+dim <= len(x); r += dim {
		row := x[r : r+dim]
		var amax float32
		for _, v := range row {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		if amax == 0 || math.IsInf(float64(amax), 0) || amax != amax {
			continue
		}
		s := amax / qmax
		for i, v := range row {
			q := float32(math.RoundToEven(float64(v / s)))
			if q > qmax {
				q = qmax
			} else if q < -qmax {
				q = -qmax
			} else if q != q {
				q = 0
			}
			row[i] = float32(q * s)
		}
	}
}

// CheckActivation validates a per-tensor encoding (as Parse does for every activation).
func CheckActivation(e *Encoding) error { return checkActivation(e) }

// RangeEncoding is the per-tensor asymmetric encoding of [lo, hi] with bits-bit unsigned
// codes in QNN's convention (encodings.Asymmetric), with lo and hi as its informational range.
func RangeEncoding(lo, hi float64, bits int) *Encoding {
	scale, off := encodings.Asymmetric(lo, hi, bits)
	dt := DataType_UINT16
	if bits <= 8 {
		dt = DataType_UINT8
	}
	return &Encoding{Dtype: dt, Bits: uint32(bits), Granularity: Granularity_PER_TENSOR,
		Scale: []float32{scale}, Offset: []int32{off}, Min: float32(min(lo, 0)), Max: float32(max(hi, 0))}
}
