package runtime

import (
	"fmt"
	"unsafe"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/kernels"
)

// decodeVector widens a 1-D tensor (a norm weight, a bias) to float32.
func decodeVector(rt rawTensor) ([]float32, error) {
	n := 1
	for _, d := range rt.shape {
		n *= d
	}
	if rt.rows != nil {
		out := make([]float32, n)
		return out, rt.rows(out, 0, n)
	}
	codec, err := quantize.For(rt.typ)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", rt.name, err)
	}
	if n%codec.BlockSize() != 0 || len(rt.data) != rt.typ.RowBytes(n) {
		return nil, fmt.Errorf("%s: %d bytes of %s do not hold %d values", rt.name, len(rt.data), rt.typ, n)
	}
	out := make([]float32, n)
	codec.Dequantize(out, rt.data)
	if rt.offset != 0 {
		for i := range out {
			out[i] += rt.offset
		}
	}
	return out, nil
}

// newLinear wraps a 2-D tensor as a kernels matrix over its stored bytes (no copy). A type the
// kernels cannot multiply but quantize can decode is widened to F32, and so is one that has
// only generic Go kernels in this activation mode while F32 has assembly (today Q2_K, Q3_K,
// IQ4_XS and the i-quant and ternary types with float activations: generic Go Q3_K ran the
// Qwen3-0.6B shape 7× slower in decode and 80× in prefill than F32 assembly, at a fraction of
// the memory), when quantize can decode it; otherwise the kernels' generic code multiplies it.
func newLinear(rt rawTensor, mode kernels.ActMode) (*kernels.Matrix, error) {
	if len(rt.shape) != 2 {
		return nil, fmt.Errorf("%s: shape %v is not a matrix", rt.name, rt.shape)
	}
	rows, cols := rt.shape[0], rt.shape[1]
	wt := kernels.WType(rt.typ)
	data := rt.data
	widen := !wt.Supported() || (!kernels.Accelerated(wt, mode) && kernels.Accelerated(kernels.F32, mode))
	codec, err := quantize.For(rt.typ)
	if widen && err != nil && wt.Supported() {
		widen = false // no decoder to widen with: the kernels' generic code takes it as stored
	}
	if widen {
		if err != nil {
			return nil, fmt.Errorf("%s: type %s is not supported by the runtime", rt.name, rt.typ)
		}
		if cols%codec.BlockSize() != 0 || len(data) != rows*rt.typ.RowBytes(cols) {
			return nil, fmt.Errorf("%s: %d bytes of %s do not hold %dx%d values", rt.name, len(data), rt.typ, rows, cols)
		}
		f := make([]float32, rows*cols)
		codec.Dequantize(f, data)
		wt, data = kernels.F32, unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
	}
	m, err := kernels.NewMatrix(wt, rows, cols, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", rt.name, err)
	}
	m.Mode = mode
	return m, nil
}

// embedding looks rows of the token embedding up, decoding one row at a time.
type embedding struct {
	typ      gguf.Type
	codec    quantize.Encoding
	rows     int
	cols     int
	rowBytes int
	data     []byte
	// decode decodes one row of a tensor in an encoding of its own (rawTensor.rows).
	decode func(dst []float32, r0, r1 int) error
}

func newEmbedding(rt rawTensor) (*embedding, error) {
	if len(rt.shape) != 2 {
		return nil, fmt.Errorf("%s: shape %v is not a matrix", rt.name, rt.shape)
	}
	if rt.rows != nil {
		return &embedding{rows: rt.shape[0], cols: rt.shape[1], rowBytes: rt.size / rt.shape[0], decode: rt.rows}, nil
	}
	codec, err := quantize.For(rt.typ)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", rt.name, err)
	}
	e := &embedding{typ: rt.typ, codec: codec, rows: rt.shape[0], cols: rt.shape[1], data: rt.data}
	if e.cols%codec.BlockSize() != 0 || len(rt.data) != e.rows*rt.typ.RowBytes(e.cols) {
		return nil, fmt.Errorf("%s: %d bytes of %s do not hold %dx%d values", rt.name, len(rt.data), rt.typ, e.rows, e.cols)
	}
	e.rowBytes = rt.typ.RowBytes(e.cols)
	return e, nil
}

// row decodes row id into dst (len cols).
func (e *embedding) row(dst []float32, id int) {
	if e.decode != nil {
		_ = e.decode(dst, id, id+1) // the tensor was checked at load: a row always decodes
		return
	}
	e.codec.Dequantize(dst, e.data[id*e.rowBytes:(id+1)*e.rowBytes])
}
