package quantize

import (
	"encoding/binary"
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
)

// KBlocksGPTQ is GPTQ's codec for the super-block types Q2_K (a 4-bit scale and min per
// sub-block of 16), Q3_K (a signed 6-bit scale per sub-block of 16), Q4_K, Q5_K (a scale and a
// min per sub-block of 32), Q6_K (an int8 scale per sub-block of 16) and IQ4_XS (6-bit scales
// of 32 on the IQ4_NL grid, codes the nearest kvalue): groups of one 256-column super-block,
// whose grid (fp16 d and dmin, the sub-block scales and mins) Fit chooses as llama.cpp's
// quantizer does (quantize_row_q2_K_impl … q6_K_impl with the importance as quant_weights, or
// the _ref searches without), and whose codes Round sets one column at a time as GPTQ
// proceeds, as ggml's final requantization does: clamp(nearest((x + dmin·m_j)/(d·sc_j)), 0,
// nmax), or clamp(nearest(x/(d·sc_j)), −4, 3) for Q3_K and −32…31 for Q6_K. Bytes lays the
// rows out as ggml blocks, so stock llama.cpp runs the GPTQ weights.
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

// NewKBlocksGPTQ returns the codec for rows × cols weights of type Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K or IQ4_XS (cols a multiple of 256).
func NewKBlocksGPTQ(typ gguf.Type, rows, cols int) (*KBlocksGPTQ, error) {
	k := &KBlocksGPTQ{typ: typ, rows: rows, cols: cols, nb: cols / 256}
	switch typ {
	case gguf.Q2_K:
		k.nmax, k.bytes = 3, 84
	case gguf.Q3_K:
		k.nmax, k.bytes = 7, 110
	case gguf.Q4_K:
		k.nmax, k.bytes = 15, 144
	case gguf.Q5_K:
		k.nmax, k.bytes = 31, 176
	case gguf.Q6_K:
		k.nmax, k.bytes = 63, 210
	case gguf.IQ4_XS:
		k.nmax, k.bytes = 15, 136
	default:
		return nil, fmt.Errorf("gptq: %v is not a super-block type GPTQ writes (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS)", typ)
	}
	if rows <= 0 || cols <= 0 || cols%256 != 0 {
		return nil, fmt.Errorf("gptq: %v rows of %d columns: want a multiple of 256", typ, cols)
	}
	k.out = make([]byte, rows*k.nb*k.bytes)
	k.L = make([]uint8, rows*cols)
	k.d, k.m = make([]float32, rows*k.nb*16), make([]float32, rows*k.nb*16)
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
	switch k.typ {
	case gguf.Q2_K:
		if imp == nil {
			quantizeBlockQ2_KRef(y, x)
		} else {
			quantizeBlockQ2_KImpl(y, x, imp)
		}
		d0, dmin0 := getF16(y[80:]), getF16(y[82:])
		for j := 0; j < 16; j++ {
			i := (r*k.nb+g)*16 + j
			k.d[i], k.m[i] = float32(d0*float32(y[j]&0xF)), float32(dmin0*float32(y[j]>>4))
		}
		return nil
	case gguf.Q3_K:
		if imp == nil {
			quantizeBlockQ3_KRef(y, x)
		} else {
			quantizeBlockQ3_KImpl(y, x, imp)
		}
		d0 := getF16(y[108:])
		for j := 0; j < 16; j++ {
			k.d[(r*k.nb+g)*16+j] = float32(d0 * float32(scaleQ3_K(y[96:108], j)))
		}
		return nil
	}
	if k.typ == gguf.IQ4_XS {
		enc, _ := For(gguf.IQ4_XS)
		enc.Quantize(y, x, 1, 256, imp)
		d0 := getF16(y)
		sh := binary.LittleEndian.Uint16(y[2:])
		for ib := 0; ib < 8; ib++ {
			ls := int(y[4+ib/2]>>(4*(ib%2))&0xf) | int(sh>>(2*ib)&3)<<4
			k.d[(r*k.nb+g)*16+ib] = d0 * float32(ls-32)
		}
		return nil
	}
	if k.typ == gguf.Q6_K {
		quantizeBlockQ6_K(y, x, imp)
		d0 := getF16(y[208:])
		for j := 0; j < 16; j++ {
			k.d[(r*k.nb+g)*16+j] = float32(d0 * float32(int8(y[192+j])))
		}
		return nil
	}
	quantizeKMin(y, x, imp, k.nmax)
	d0, dmin0 := getF16(y), getF16(y[2:])
	for j := 0; j < 8; j++ {
		sc, m := getScaleMinK4(j, y[4:16])
		i := (r*k.nb+g)*16 + j
		k.d[i], k.m[i] = float32(d0*float32(sc)), float32(dmin0*float32(m))
	}
	return nil
}

// Round sets the code of row r, column c (in super-block g) nearest x and returns the value
// the block decodes to.
func (k *KBlocksGPTQ) Round(r, g, c int, x float32) float32 {
	switch k.typ {
	case gguf.Q2_K:
		i := (r*k.nb+g)*16 + (c%256)/16
		d, dm := k.d[i], k.m[i]
		l := 0
		if d != 0 {
			l = clamp(nearestInt((x+dm)/d), 0, 3)
		}
		k.L[r*k.cols+c] = uint8(l)
		return float32(d*float32(l)) - dm
	case gguf.Q3_K:
		d := k.d[(r*k.nb+g)*16+(c%256)/16]
		l := 0
		if d != 0 {
			l = clamp(nearestInt(x/d), -4, 3)
		}
		k.L[r*k.cols+c] = uint8(l + 4)
		return d * float32(l)
	}
	if k.typ == gguf.IQ4_XS {
		dl := k.d[(r*k.nb+g)*16+(c%256)/32]
		q := 8
		if dl != 0 {
			q = bestIndexInt8(&kvaluesIQ4NL, x/dl)
		}
		k.L[r*k.cols+c] = uint8(q)
		return dl * float32(kvaluesIQ4NL[q])
	}
	if k.typ == gguf.Q6_K {
		d := k.d[(r*k.nb+g)*16+(c%256)/16]
		l := 0
		if d != 0 {
			l = clamp(nearestInt(x/d), -32, 31)
		}
		k.L[r*k.cols+c] = uint8(l + 32)
		return float32(d * float32(l))
	}
	i := (r*k.nb+g)*16 + (c%256)/32
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
		y, L := k.out[b*k.bytes:][:k.bytes], k.L[b*256:][:256]
		switch k.typ {
		case gguf.Q2_K:
			pack2Bits(y[16:80], L)
			continue
		case gguf.Q3_K:
			packQ3_K(y, L)
			continue
		}
		if k.typ == gguf.IQ4_XS {
			qs := y[8:]
			for ib := 0; ib < 8; ib++ {
				for j := 0; j < 16; j++ {
					qs[16*ib+j] = L[32*ib+j] | L[32*ib+j+16]<<4
				}
			}
			continue
		}
		if k.typ == gguf.Q6_K {
			var l8 [256]int8
			for i, v := range L {
				l8[i] = int8(v)
			}
			packQ6_K(y, l8[:])
			continue
		}
		packKMin(y, L, k.nmax)
	}
	return k.out
}

// pack2Bits packs the low two bits of 256 levels as Q2_K and Q3_K store them (dequantize_row_q2_K
// reads them back): for each half of 128 elements, 32 bytes whose byte l holds elements l,
// l+32, l+64 and l+96 at shifts 0, 2, 4 and 6.
func pack2Bits(qs []byte, L []uint8) {
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l]&3 | (L[j+l+32]&3)<<2 | (L[j+l+64]&3)<<4 | (L[j+l+96]&3)<<6
		}
	}
}

// packQ3_K stores the levels L (0…7, the value's level + 4) of a Q3_K block whose scales and
// d Fit wrote: the third bit of element j in bit j/32 of hmask[j%32], the low two bits as
// pack2Bits lays them out.
func packQ3_K(y []byte, L []uint8) {
	hmask := y[0:32]
	clear(hmask)
	for j, l := range L[:256] {
		if l > 3 {
			hmask[j%32] |= 1 << (j / 32)
		}
	}
	pack2Bits(y[32:96], L)
}
