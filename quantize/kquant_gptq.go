package quantize

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
)

// KBlocksGPTQ is GPTQ's codec for the K-quants with a scale and a min per sub-block, Q4_K and
// Q5_K: groups of one 256-column super-block, whose grid (fp16 d and dmin, 6-bit sub-block
// scales and mins) Fit chooses as llama.cpp's quantizer does (quantize_row_q4_K_impl /
// q5_K_impl with the importance as quant_weights, or the _ref search without), and whose
// codes Round sets one column at a time as GPTQ proceeds, as ggml's final requantization does:
// clamp(nearest((x + dmin·m_j)/(d·sc_j)), 0, nmax). Bytes lays the rows out as ggml blocks, so
// stock llama.cpp runs the GPTQ weights.
type KBlocksGPTQ struct {
	typ        gguf.Type
	nmax       int
	bytes      int // per super-block
	rows, cols int
	nb         int       // super-blocks per row
	out        []byte    // rows × nb blocks, grids written by Fit
	L          []uint8   // rows × cols codes
	d, m       []float32 // rows × nb × 8: each sub-block's d·sc and dmin·m
}

// NewKBlocksGPTQ returns the codec for rows × cols weights of type Q4_K or Q5_K (cols a
// multiple of 256).
func NewKBlocksGPTQ(typ gguf.Type, rows, cols int) (*KBlocksGPTQ, error) {
	k := &KBlocksGPTQ{typ: typ, rows: rows, cols: cols, nb: cols / 256}
	switch typ {
	case gguf.Q4_K:
		k.nmax, k.bytes = 15, 144
	case gguf.Q5_K:
		k.nmax, k.bytes = 31, 176
	default:
		return nil, fmt.Errorf("gptq: %v has no scale-and-min super-blocks (Q4_K, Q5_K)", typ)
	}
	if rows <= 0 || cols <= 0 || cols%256 != 0 {
		return nil, fmt.Errorf("gptq: %v rows of %d columns: want a multiple of 256", typ, cols)
	}
	k.out = make([]byte, rows*k.nb*k.bytes)
	k.L = make([]uint8, rows*cols)
	k.d, k.m = make([]float32, rows*k.nb*8), make([]float32, rows*k.nb*8)
	return k, nil
}

// GroupSize is the super-block.
func (k *KBlocksGPTQ) GroupSize() int { return 256 }

// Fit chooses super-block g of row r's grid from its values x (original column order: static
// groups, or GPTQ without act-order) and importance imp (nil: llama.cpp's reference search).
func (k *KBlocksGPTQ) Fit(r, g int, x, imp []float32) error {
	if len(x) != 256 {
		return fmt.Errorf("gptq: %v super-block of %d values", k.typ, len(x))
	}
	y := k.out[(r*k.nb+g)*k.bytes:][:k.bytes]
	quantizeKMin(y, x, imp, k.nmax)
	d0, dmin0 := getF16(y), getF16(y[2:])
	for j := 0; j < 8; j++ {
		sc, m := getScaleMinK4(j, y[4:16])
		i := (r*k.nb+g)*8 + j
		k.d[i], k.m[i] = float32(d0*float32(sc)), float32(dmin0*float32(m))
	}
	return nil
}

// Round sets the code of row r, column c (in super-block g) nearest x and returns the value
// the block decodes to.
func (k *KBlocksGPTQ) Round(r, g, c int, x float32) float32 {
	i := (r*k.nb+g)*8 + (c%256)/32
	d, dm := k.d[i], k.m[i]
	var l int
	if d != 0 {
		l = clamp(nearestInt((x+dm)/d), 0, k.nmax)
	}
	k.L[r*k.cols+c] = uint8(l)
	return float32(d*float32(l)) - dm
}

// Bytes returns the rows as ggml blocks (after every column was rounded).
func (k *KBlocksGPTQ) Bytes() []byte {
	for b := 0; b < k.rows*k.nb; b++ {
		packKMin(k.out[b*k.bytes:][:k.bytes], k.L[b*256:][:256], k.nmax)
	}
	return k.out
}
