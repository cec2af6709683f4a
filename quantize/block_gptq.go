package quantize

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
)

// Blocks32GPTQ is GPTQ's codec for ggml's blocks of 32 with one scale (and, for Q4_1 and
// Q5_1, a min): Q4_1, Q5_0, Q5_1, Q8_0 and IQ4_NL. Fit quantizes the block's current values
// with llama.cpp's quantizer (the importance as quant_weights where the type takes one), which
// fixes the block's fp16 scale and min; Round sets one code at a time onto that grid, as
// decoding it gives: nearest((x − m)/d) for the linear types, the nearest entry of kvalues
// for IQ4_NL. Bytes lays the blocks out for stock llama.cpp. (Q4_0 has its own GPTQ path,
// quantize's symmetric groups of 32, which are Q4_0 blocks byte for byte.)
type Blocks32GPTQ struct {
	typ        gguf.Type
	enc        Encoding
	bytes      int // per block
	rows, cols int
	nb         int // blocks per row
	out        []byte
	L          []uint8
}

// NewBlocks32GPTQ returns the codec for rows × cols weights of typ (cols a multiple of 32).
func NewBlocks32GPTQ(typ gguf.Type, rows, cols int) (*Blocks32GPTQ, error) {
	switch typ {
	case gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.IQ4_NL:
	default:
		return nil, fmt.Errorf("gptq: %v is not a block-of-32 type GPTQ writes (Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL)", typ)
	}
	if rows <= 0 || cols <= 0 || cols%32 != 0 {
		return nil, fmt.Errorf("gptq: %v rows of %d columns: want a multiple of 32", typ, cols)
	}
	enc, err := For(typ)
	if err != nil {
		return nil, err
	}
	k := &Blocks32GPTQ{typ: typ, enc: enc, bytes: typ.RowBytes(32), rows: rows, cols: cols, nb: cols / 32}
	k.out = make([]byte, rows*k.nb*k.bytes)
	k.L = make([]uint8, rows*cols)
	return k, nil
}

// GroupSize is the block.
func (k *Blocks32GPTQ) GroupSize() int { return 32 }

func (k *Blocks32GPTQ) block(r, g int) []byte { return k.out[(r*k.nb+g)*k.bytes:][:k.bytes] }

// Fit quantizes block g of row r from its values x (original column order) with llama.cpp's
// quantizer, imp its importance (nil: none).
func (k *Blocks32GPTQ) Fit(r, g int, x, imp []float32) error {
	if len(x) != 32 {
		return fmt.Errorf("gptq: %v block of %d values", k.typ, len(x))
	}
	if k.typ == gguf.Q8_0 {
		imp = nil // Q8_0 takes no importance
	}
	k.enc.Quantize(k.block(r, g), x, 1, 32, imp)
	return nil
}

// Round sets the code of row r, column c (block g) for x and returns the value it decodes to.
func (k *Blocks32GPTQ) Round(r, g, c int, x float32) float32 {
	y := k.block(r, g)
	d := getF16(y)
	var q int
	var v float32
	switch k.typ {
	case gguf.Q4_1, gguf.Q5_1:
		m := getF16(y[2:])
		nmax := 15
		if k.typ == gguf.Q5_1 {
			nmax = 31
		}
		if d != 0 {
			q = clamp(nearestInt((x-m)/d), 0, nmax)
		}
		v = float32(float32(q)*d) + m
	case gguf.Q5_0:
		q = 16
		if d != 0 {
			q = clamp(nearestInt(x/d)+16, 0, 31)
		}
		v = float32(q-16) * d
	case gguf.Q8_0:
		q = 128
		if d != 0 {
			q = clamp(nearestInt(x/d), -127, 127) + 128
		}
		v = float32(q-128) * d
	case gguf.IQ4_NL:
		q = 8
		if d != 0 {
			q = bestIndexInt8(&kvaluesIQ4NL, x/d)
		}
		v = d * float32(kvaluesIQ4NL[q])
	}
	k.L[r*k.cols+c] = uint8(q)
	return v
}

// Bytes returns the rows as ggml blocks (after every column was rounded).
func (k *Blocks32GPTQ) Bytes() []byte {
	for b := 0; b < k.rows*k.nb; b++ {
		y, L := k.out[b*k.bytes:][:k.bytes], k.L[b*32:][:32]
		switch k.typ {
		case gguf.Q4_1, gguf.IQ4_NL:
			qs := y[k.bytes-16:]
			for j := 0; j < 16; j++ {
				qs[j] = L[j] | L[j+16]<<4
			}
		case gguf.Q5_0, gguf.Q5_1:
			pack5(y[k.bytes-20:], (*[32]uint8)(L))
		case gguf.Q8_0:
			for j, q := range L {
				y[2+j] = byte(int8(int(q) - 128))
			}
		}
	}
	return k.out
}
