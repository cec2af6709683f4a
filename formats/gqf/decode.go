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
// scale c and block int scale k (LPBQScales).
func (f *File) Decode(t *Tensor) ([]float32, error) {
	n, err := elements(t.Shape)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", t.Name, err)
	}
	out := make([]float32, n)
	rows, _ := rowsCols(t.Shape, int(n))
	if err := f.DecodeRows(t, 0, rows, out); err != nil {
		return nil, err
	}
	return out, nil
}

// rowsCols splits n elements of shape into rows of the last dimension; a vector (or a
// scalar) is rows of one element.
func rowsCols(shape []int64, n int) (rows, cols int) {
	if len(shape) <= 1 {
		return n, 1
	}
	cols = int(shape[len(shape)-1])
	return n / cols, cols
}

// DecodeRows writes rows [r0, r1) of a matrix (or, for a vector, elements [r0, r1)) of f as
// float32 into dst, with the decoding rules of Decode, reading only those rows' bytes.
func (f *File) DecodeRows(t *Tensor, r0, r1 int, dst []float32) error {
	return DecodeRows(t, [4][]byte{f.Bytes(t.Data), f.Bytes(t.Scales), f.Bytes(t.Zeros), f.Bytes(t.BlockScales)}, r0, r1, dst)
}

// DecodeRows is File.DecodeRows over a tensor's buffers held elsewhere (a writer's, before
// the file exists): bufs are its data, scales, zeros and block scales (nil for absent ones).
func DecodeRows(t *Tensor, bufs [4][]byte, r0, r1 int, dst []float32) error {
	n, err := elements(t.Shape)
	if err != nil {
		return fmt.Errorf("%s: %v", t.Name, err)
	}
	rows, cols := rowsCols(t.Shape, int(n))
	if r0 < 0 || r1 > rows || r0 > r1 || len(dst) < (r1-r0)*cols {
		return fmt.Errorf("%s: rows [%d, %d) of %d into %d values", t.Name, r0, r1, rows, len(dst))
	}
	e := t.Encoding
	data := bufs[0]
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
	if !e.Dtype.IsCode() {
		return fmt.Errorf("%s: dtype %v is not an integer code type", t.Name, e.Dtype)
	}
	// The codes first, exact in float32 (at most 16 bits), then the scales: group by group of
	// bs elements for the grouped granularities (matrices, whose groups never cross rows: bs
	// divides cols).
	codesInto(out, data, lo, e.Dtype)
	switch e.Granularity {
	case Granularity_PER_TENSOR:
		s, z := e.Scale[0], -e.Offset[0]
		for i, q := range out {
			out[i] = float32(float32(int32(q)-z) * s)
		}
	case Granularity_PER_CHANNEL, Granularity_PER_BLOCK:
		bs := cols
		if e.Granularity == Granularity_PER_BLOCK {
			bs = int(e.BlockSize)
		}
		sb, zb := bufs[1], bufs[2]
		for g := lo / bs; g < hi/bs; g++ {
			s, z := scaleAt(sb, g, e.ScaleType), zeroAt(zb, g, e.ZeroType)
			x := out[g*bs-lo : (g+1)*bs-lo]
			for i, q := range x {
				x[i] = float32(float32(int32(q)-z) * s)
			}
		}
	case Granularity_LPBQ:
		bs := int(e.BlockSize)
		sb, k := bufs[1], bufs[3]
		for b := lo / bs; b < hi/bs; b++ {
			s := lpbqScale(scaleAt(sb, b*bs/cols, e.ScaleType), k[b])
			x := out[b*bs-lo : (b+1)*bs-lo]
			for i, q := range x {
				x[i] = float32(q * s)
			}
		}
	default:
		return fmt.Errorf("%s: granularity %v is unknown", t.Name, e.Granularity)
	}
	return nil
}

// codesInto writes the codes of elements [lo, lo+len(dst)) of data, stored as dt (an integer
// code type), into dst, signed or not as dt says.
func codesInto[T int32 | float32](dst []T, data []byte, lo int, dt DataType) {
	switch dt {
	case DataType_INT4:
		for i := range dst {
			j := lo + i
			dst[i] = T(int8(data[j/2]>>(4*(j%2))<<4) >> 4)
		}
	case DataType_UINT4:
		for i := range dst {
			j := lo + i
			dst[i] = T(data[j/2] >> (4 * (j % 2)) & 0xF)
		}
	case DataType_INT8:
		for i := range dst {
			dst[i] = T(int8(data[lo+i]))
		}
	case DataType_UINT8:
		for i := range dst {
			dst[i] = T(data[lo+i])
		}
	case DataType_INT16:
		for i := range dst {
			dst[i] = T(int16(binary.LittleEndian.Uint16(data[2*(lo+i):])))
		}
	case DataType_UINT16:
		for i := range dst {
			dst[i] = T(binary.LittleEndian.Uint16(data[2*(lo+i):]))
		}
	}
}

// scaleAt is stored scale g of b (F16 or F32 as st says).
func scaleAt(b []byte, g int, st DataType) float32 {
	if st == DataType_F16 {
		return half.F16ToF32(binary.LittleEndian.Uint16(b[2*g:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*g:]))
}

// zeroAt is stored zero point g of b (UINT16 or UINT8 as zt says; 0 when b is nil: symmetric).
func zeroAt(b []byte, g int, zt DataType) int32 {
	switch {
	case b == nil:
		return 0
	case zt == DataType_UINT16:
		return int32(binary.LittleEndian.Uint16(b[2*g:]))
	}
	return int32(b[g])
}

// lpbqScale is the scale of an LPBQ block: float32(c·k) for channel scale c and the block's
// integer scale k.
func lpbqScale(c float32, k uint8) float32 { return float32(c * float32(k)) }

// Codes returns the integer codes of a quantized tensor, one per element, signed or not as
// its dtype says (nil for a float tensor).
func (f *File) Codes(t *Tensor) []int32 {
	e := t.Encoding
	if !e.Dtype.IsCode() {
		return nil
	}
	data := f.Bytes(t.Data)
	out := make([]int32, len(data)*8/e.Dtype.Bits())
	codesInto(out, data, 0, e.Dtype)
	return out
}

// Scales returns the stored per-channel or per-block scales of a tensor (nil when it has
// none).
func (f *File) Scales(t *Tensor) []float32 {
	b := f.Bytes(t.Scales)
	if b == nil {
		return nil
	}
	n := len(b) / 4
	if t.Encoding.ScaleType == DataType_F16 {
		n = len(b) / 2
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = scaleAt(b, i, t.Encoding.ScaleType)
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
	n := len(b)
	if t.Encoding.ZeroType == DataType_UINT16 {
		n = len(b) / 2
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = zeroAt(b, i, t.Encoding.ZeroType)
	}
	return out
}

// BlockScales returns the LPBQ per-block integer scales (nil for other encodings).
func (f *File) BlockScales(t *Tensor) []uint8 { return f.Bytes(t.BlockScales) }

// LPBQScales returns the scales of an LPBQ tensor's blocks, row by row: float32(c·k) for the
// row's channel scale c and the block's integer scale k (nil for other encodings).
func (f *File) LPBQScales(t *Tensor) []float32 {
	if t.Encoding.Granularity != Granularity_LPBQ || len(t.Shape) != 2 {
		return nil
	}
	k, sb := f.Bytes(t.BlockScales), f.Bytes(t.Scales)
	nb := int(t.Shape[1]) / int(t.Encoding.BlockSize)
	out := make([]float32, len(k))
	for b := range out {
		out[b] = lpbqScale(scaleAt(sb, b/nb, t.Encoding.ScaleType), k[b])
	}
	return out
}

// QDQ quantizes x in place to a per-tensor encoding and dequantizes it back, as ONNX's
// QuantizeLinear then DequantizeLinear do with zero point −offset: q = clamp(round(x/scale)
// − offset) (half to even), x = (q + offset)·scale, all in float32. The encoding must have
// passed validation (Parse or CheckActivation).
func QDQ(e *Encoding, x []float32) {
	q := NewQuantizer(e)
	q.QDQ(x)
}

// Quantizer is QDQ for one encoding, with the encoding's code range, scale and offset taken
// once.
type Quantizer struct {
	s             float32
	off, flo, fhi float64
}

// NewQuantizer takes the constants of a per-tensor encoding (validated as for QDQ).
func NewQuantizer(e *Encoding) Quantizer {
	lo, hi := e.Dtype.CodeRange()
	if e.Bits < uint32(e.Dtype.Bits()) {
		if e.Dtype.Signed() {
			lo, hi = -(1 << (e.Bits - 1)), 1<<(e.Bits-1)-1
		} else {
			hi = 1<<e.Bits - 1
		}
	}
	return Quantizer{s: e.Scale[0], off: float64(e.Offset[0]), flo: float64(lo), fhi: float64(hi)}
}

// QDQ quantizes x in place and dequantizes it back (see the function QDQ).
func (qz *Quantizer) QDQ(x []float32) {
	s, off, flo, fhi := qz.s, qz.off, qz.flo, qz.fhi
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
