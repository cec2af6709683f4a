// Package quantize holds gquant's block codecs: encoders and reference decoders for every
// supported ggml tensor type. The encoders are ports of ggml's reference quantizers
// (ggml/src/ggml-quants.c, reached through ggml_quantize_chunk) and produce the same bytes,
// with and without an importance matrix.
//
// All floating-point code here is written to be bit-exact with ggml's C compiled without FMA:
// every product that is added to something is wrapped in an explicit float32 conversion so that
// the Go compiler cannot fuse it into a fused multiply-add (it may under GOAMD64=v3).
package quantize

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
)

// Encoding is one block codec. Implementations hold no mutable state: Quantize and Dequantize
// may be called concurrently on disjoint rows.
type Encoding interface {
	// Type is the ggml type id written into GGUF tensor infos.
	Type() gguf.Type
	// BlockSize is the number of elements in one block.
	BlockSize() int
	// BlockBytes is the size of one encoded block in bytes.
	BlockBytes() int
	// Quantize encodes nrows rows of nPerRow floats (nPerRow a multiple of BlockSize) from src
	// into dst (len nrows*RowBytes(Type(), nPerRow)). imatrix is nil or holds nPerRow importance
	// weights, one per column, with the same semantics as ggml_quantize_chunk (types that ignore
	// it: F32, F16, BF16, Q8_0, TQ1_0, TQ2_0; types that require it, RequiresImatrix, panic
	// without it). Wrong lengths are a programming error and panic.
	Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32)
	// Dequantize decodes whole blocks: len(dst) = number of blocks × BlockSize, and src holds
	// exactly that many blocks. It gives the same floats as ggml's to_float.
	Dequantize(dst []float32, src []byte)
}

// codecs maps each supported type to its codec.
var codecs = map[gguf.Type]Encoding{}

// register is called by each encoding's file at init time.
func register(e Encoding) { codecs[e.Type()] = e }

// For returns the codec of t, or an error when gquant has no codec for that type.
func For(t gguf.Type) (Encoding, error) {
	if e, ok := codecs[t]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("no codec for tensor type %s", t)
}

// Types lists the types that have a codec, in ggml id order.
func Types() []gguf.Type {
	var ts []gguf.Type
	for id := gguf.Type(0); id < 64; id++ {
		if _, ok := codecs[id]; ok {
			ts = append(ts, id)
		}
	}
	return ts
}

// RowBytes is the encoded size of a row of n elements of type t (n a multiple of the block
// size); 0 for unknown types.
func RowBytes(t gguf.Type, n int) int { return t.RowBytes(n) }

// checkQuantize panics when the buffers passed to Quantize do not fit the shape.
func checkQuantize(e Encoding, dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	bs := e.BlockSize()
	switch {
	case nrows < 0 || nPerRow <= 0 || nPerRow%bs != 0:
		panic(fmt.Sprintf("quantize: %s: row length %d is not a positive multiple of %d", e.Type(), nPerRow, bs))
	case len(src) != nrows*nPerRow:
		panic(fmt.Sprintf("quantize: %s: src has %d floats, want %d×%d", e.Type(), len(src), nrows, nPerRow))
	case len(dst) != nrows*(nPerRow/bs)*e.BlockBytes():
		panic(fmt.Sprintf("quantize: %s: dst has %d bytes, want %d", e.Type(), len(dst), nrows*(nPerRow/bs)*e.BlockBytes()))
	case imatrix != nil && len(imatrix) != nPerRow:
		panic(fmt.Sprintf("quantize: %s: imatrix has %d weights, want %d", e.Type(), len(imatrix), nPerRow))
	}
}

// checkDequantize panics when dst and src do not hold the same whole number of blocks.
func checkDequantize(e Encoding, dst []float32, src []byte) {
	bs, bb := e.BlockSize(), e.BlockBytes()
	if len(dst)%bs != 0 || len(src) != len(dst)/bs*bb {
		panic(fmt.Sprintf("quantize: %s: cannot decode %d bytes into %d floats", e.Type(), len(src), len(dst)))
	}
}

// blockCodec carries the fixed facts of an encoding (from ggml's type table); each encoding
// embeds it.
type blockCodec struct{ typ gguf.Type }

func (b blockCodec) Type() gguf.Type { return b.typ }
func (b blockCodec) BlockSize() int  { return b.typ.BlockSize() }
func (b blockCodec) BlockBytes() int { return b.typ.TypeSize() }

// rowFunc quantizes one row; imatrix is nil or as long as the row.
type rowFunc func(dst []byte, src []float32, imatrix []float32)

// quantizeRows checks the arguments and runs row on each row in turn.
func quantizeRows(e Encoding, dst []byte, src []float32, nrows, nPerRow int, imatrix []float32, row rowFunc) {
	checkQuantize(e, dst, src, nrows, nPerRow, imatrix)
	rb := nPerRow / e.BlockSize() * e.BlockBytes()
	for r := 0; r < nrows; r++ {
		row(dst[r*rb:(r+1)*rb], src[r*nPerRow:(r+1)*nPerRow], imatrix)
	}
}
