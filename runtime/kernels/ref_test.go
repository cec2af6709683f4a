package kernels

// Independent float64 references used by the tests: block decoding written from the format
// descriptions (gguf.md, ggml-common.h) without the package's code, activation quantizers
// following ggml's x86 rules, and a generator of valid random and extreme weight rows.

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gquant/gquant/formats/gguf"
)

// refHalf decodes an IEEE binary16 in float64.
func refHalf(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 31
	m := float64(h & 1023)
	switch e {
	case 0:
		return s * m * math.Pow(2, -24)
	case 31:
		if m == 0 {
			return s * math.Inf(1)
		}
		return math.NaN()
	}
	return s * (1 + m/1024) * math.Pow(2, float64(e-15))
}

func refBF16(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

func u16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// nib returns nibble i of qs: element i < 16 the low nibble of byte i, else the high nibble of
// byte i-16 (the layout of every 32-element 4-bit block).
func nib(qs []byte, i int) int {
	if i < 16 {
		return int(qs[i] & 15)
	}
	return int(qs[i-16] >> 4)
}

// bit returns bit i of the little-endian bytes b.
func bit(b []byte, i int) int { return int(b[i/8]>>(i%8)) & 1 }

// refKScale returns the 6-bit scale and min of sub-block j (0..7) from 12 packed bytes:
// j < 4: low 6 bits of bytes j and j+4; otherwise the nibbles of byte j+4 below the top two
// bits of bytes j-4 (scale) and j (min).
func refKScale(sc []byte, j int) (float64, float64) {
	if j < 4 {
		return float64(sc[j] & 63), float64(sc[j+4] & 63)
	}
	s := int(sc[j+4]&15) + int(sc[j-4]>>6)*16
	m := int(sc[j+4]>>4) + int(sc[j]>>6)*16
	return float64(s), float64(m)
}

// refCodes decodes one row into its integer codes and per-element scale/offset so that
// value = scale·code + offset (float64): that makes integer re-computation possible.
type refElem struct {
	code     int     // signed integer the int8 path multiplies
	scale    float64 // per-element multiplier of code (d, or d·sc for K-quants)
	offset   float64 // added (Q4_1/Q5_1 m, K-quants −dmin·m)
	blockIdx int     // scale block (Q8_0 block or Q8_K super-block)
}

func refDecode(t WType, row []byte, cols int) []refElem {
	out := make([]refElem, cols)
	switch t {
	case F32:
		for i := range out {
			out[i] = refElem{scale: float64(math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:]))), code: 1}
		}
	case F16:
		for i := range out {
			out[i] = refElem{scale: refHalf(u16(row[2*i:])), code: 1}
		}
	case BF16:
		for i := range out {
			out[i] = refElem{scale: refBF16(u16(row[2*i:])), code: 1}
		}
	case Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1, Q8_0:
		bs := t.TypeSize()
		for b := 0; b < cols/32; b++ {
			blk := row[b*bs : (b+1)*bs]
			d := refHalf(u16(blk))
			for i := 0; i < 32; i++ {
				e := refElem{scale: d, blockIdx: b}
				switch t {
				case Q4_0:
					e.code = nib(blk[2:], i) - 8
				case IQ4_NL:
					e.code = []int{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}[nib(blk[2:], i)]
				case Q4_1:
					e.code, e.offset = nib(blk[4:], i), refHalf(u16(blk[2:]))
				case Q5_0:
					e.code = nib(blk[6:], i) + 16*bit(blk[2:6], i) - 16
				case Q5_1:
					e.code, e.offset = nib(blk[8:], i)+16*bit(blk[4:8], i), refHalf(u16(blk[2:]))
				case Q8_0:
					e.code = int(int8(blk[2+i]))
				}
				out[32*b+i] = e
			}
		}
	case Q4_K, Q5_K:
		bs := t.TypeSize()
		for b := 0; b < cols/256; b++ {
			blk := row[b*bs : (b+1)*bs]
			d, dmin := refHalf(u16(blk)), refHalf(u16(blk[2:]))
			qs := blk[16:]
			if t == Q5_K {
				qs = blk[48:]
			}
			for i := 0; i < 256; i++ {
				j := i / 32                           // sub-block
				byteIdx := 32*(j/2) + i%32            // 64 elements share 32 bytes
				c := int(qs[byteIdx]>>(4*(j%2))) & 15 // even sub-blocks low nibbles
				if t == Q5_K {
					c += 16 * bit(blk[16+i%32:], j) // bit j of qh[l]
				}
				s, m := refKScale(blk[4:16], j)
				out[256*b+i] = refElem{code: c, scale: d * s, offset: -dmin * m, blockIdx: b}
			}
		}
	case Q6_K:
		for b := 0; b < cols/256; b++ {
			blk := row[b*210 : (b+1)*210]
			d := refHalf(u16(blk[208:]))
			for i := 0; i < 256; i++ {
				half, r := i/128, i%128 // two halves of 128
				quarter, l := r/32, r%32
				// ql: quarters 0,1 low nibbles of ql[l], ql[l+32]; quarters 2,3 high nibbles
				ql := int(blk[64*half+l+32*(quarter%2)]>>(4*(quarter/2))) & 15
				qh := int(blk[128+32*half+l]>>(2*quarter)) & 3
				sc := float64(int8(blk[192+8*half+2*quarter+l/16]))
				out[256*b+i] = refElem{code: ql + 16*qh - 32, scale: d * sc, blockIdx: b}
			}
		}
	case Q2_K, Q3_K, IQ4_XS:
		// Written from ggml-common.h's block layouts, element by element:
		//   Q2_K   scales[16] (low nibble scale, high nibble min) qs[64] d dmin: element e of a
		//          128-half c = e/128 sits in qs[32c + e%32], bits 2·((e%128)/32); 16-group
		//          e/16 has scale d·(scales[e/16]&15), offset −dmin·(scales[e/16]>>4).
		//   Q3_K   hmask[32] qs[64] scales[12] d: 2 low bits as for Q2_K, minus 4 when bit
		//          (e/32) of hmask[e%32] is clear; 16-group scale d·(s−32), s 6 bits.
		//   IQ4_XS d scales_h scales_l[4] qs[128]: sub-block e/32, nibble (e%32)/16 of
		//          qs[16·(e/32) + e%16]; scale d·(ls−32).
		bs := t.TypeSize()
		for b := 0; b < cols/256; b++ {
			blk := row[b*bs : (b+1)*bs]
			for e := 0; e < 256; e++ {
				var el refElem
				el.blockIdx = b
				switch t {
				case Q2_K:
					d, dmin := refHalf(u16(blk[80:])), refHalf(u16(blk[82:]))
					sc := blk[e/16]
					el.code = int(blk[16+32*(e/128)+e%32]>>(2*((e%128)/32))) & 3
					el.scale, el.offset = d*float64(sc&15), -dmin*float64(sc>>4)
				case Q3_K:
					d := refHalf(u16(blk[108:]))
					el.code = int(blk[32+32*(e/128)+e%32]>>(2*((e%128)/32))) & 3
					if blk[e%32]>>(e/32)&1 == 0 {
						el.code -= 4
					}
					g := e / 16
					low := int(blk[96+g%8]) // low nibble for g < 8, high for g ≥ 8
					if g >= 8 {
						low >>= 4
					}
					s := low&15 | (int(blk[104+g%4])>>(2*(g/4))&3)<<4
					el.scale = d * float64(s-32)
				case IQ4_XS:
					d := refHalf(u16(blk))
					ib := e / 32
					nib := int(blk[8+16*ib+e%16])
					if e%32 >= 16 {
						nib >>= 4
					}
					el.code = []int{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}[nib&15]
					ls := int(blk[4+ib/2])>>(4*(ib%2))&15 | (int(u16(blk[2:]))>>(2*ib)&3)<<4
					el.scale = d * float64(ls-32)
				}
				out[256*b+e] = el
			}
		}
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0:
		bs := t.TypeSize()
		for b := 0; b < cols/256; b++ {
			blk := row[b*bs : (b+1)*bs]
			for e := 0; e < 256; e++ {
				el := refIQElem(t, blk, e)
				el.blockIdx = b
				out[256*b+e] = el
			}
		}
	}
	return out
}

// refIQElem decodes element e of one block of an i-quant or ternary type, written from
// ggml-common.h's block layouts and ggml-quants.c's dequantizers, element by element (the
// grids are formats/gguf's tables). The codes are integers with a scale constant over 16
// elements: the grid value with its sign, the IQ1 ones as 8·grid ± 1 (their delta is ±1/8).
// Sub-block ib = e/32, group of 8 l = (e%32)/8, position j = e%8.
//
//	IQ2_XXS d qs[64]: group ib is 8 bytes: grid indices in bytes 0-3, then a u32 of four
//	        7-bit sign fields (the eighth sign makes the count of minus signs even) and the
//	        4-bit scale s in its top bits: value d·(2s+1)/8·grid.
//	IQ2_XS  d qs[32]u16 (9-bit index, 7-bit sign field) scales[8] (a nibble per 16).
//	IQ2_S   d qs[32] signs[32] qh[8] (2 index bits per group) scales[8] (a nibble per 16).
//	IQ3_XXS d qs[64] (4-byte grid points, 2 per group) then 8 u32 as IQ2_XXS's: d·(2s+1)/4.
//	IQ3_S   d qs[64] qh[8] (one index bit per grid point) signs[32] scales[4] (a nibble per
//	        32): d·(2s+1).
//	IQ1_S   d qs[32] qh[8]u16 (3 index bits per group, 3-bit scale s, delta sign in bit 15):
//	        d·(2s+1)·(grid ± 1/8).
//	IQ1_M   qs[32] qh[16] (a nibble per group: 3 index bits, delta sign) scales[4]u16 (3-bit
//	        scales per 16 in bits 0-11, the fp16 d in their top nibbles, low word first).
//	TQ1_0   qs[48] qh[4] d: base-3 digits, digit n of byte q = ((q·3^n mod 256)·3) >> 8;
//	        elements 0-159 digit e/32 of qs[e%32], 160-239 digit (e-160)/16 of
//	        qs[32+(e-160)%16], 240-255 digit (e-240)/4 of qh[(e-240)%4]; value d·(digit−1).
//	TQ2_0   qs[64] d: element e in bits 2·((e%128)/32) of qs[32·(e/128) + e%32], d·(q−1).
func refIQElem(t WType, blk []byte, e int) refElem {
	ib, l, j := e/32, e%32/8, e%8
	sign7 := func(field uint32, j int) bool { // bit j of a 7-bit sign field, bit 7 its parity
		if j < 7 {
			return field>>j&1 != 0
		}
		n := 0
		for k := 0; k < 7; k++ {
			n += int(field >> k & 1)
		}
		return n%2 == 1
	}
	u32 := func(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
	apply := func(v int, neg bool) int {
		if neg {
			return -v
		}
		return v
	}
	var code int
	var scale float64
	switch t {
	case IQ2_XXS:
		w := u32(blk[2+8*ib+4:])
		g := int(byte(gguf.IQ2XXSGrid[blk[2+8*ib+l]] >> (8 * j)))
		code, scale = apply(g, sign7(w>>(7*l)&127, j)), refHalf(u16(blk))*float64(2*(w>>28)+1)/8
	case IQ2_XS:
		v := u16(blk[2+2*(4*ib+l):])
		g := int(byte(gguf.IQ2XSGrid[v&511] >> (8 * j)))
		s := blk[66+ib] >> (4 * (l / 2)) & 15
		code, scale = apply(g, sign7(uint32(v>>9), j)), refHalf(u16(blk))*float64(2*s+1)/8
	case IQ2_S:
		idx := int(blk[2+4*ib+l]) + 256*int(blk[66+ib]>>(2*l)&3)
		g := int(byte(gguf.IQ2SGrid[idx] >> (8 * j)))
		s := blk[74+ib] >> (4 * (l / 2)) & 15
		code, scale = apply(g, blk[34+4*ib+l]>>j&1 != 0), refHalf(u16(blk))*float64(2*s+1)/8
	case IQ3_XXS:
		w := u32(blk[66+4*ib:])
		g := int(byte(gguf.IQ3XXSGrid[blk[2+8*ib+2*l+j/4]] >> (8 * (j % 4))))
		code, scale = apply(g, sign7(w>>(7*l)&127, j)), refHalf(u16(blk))*float64(2*(w>>28)+1)/4
	case IQ3_S:
		idx := int(blk[2+8*ib+2*l+j/4]) + 256*int(blk[66+ib]>>(2*l+j/4)&1)
		g := int(byte(gguf.IQ3SGrid[idx] >> (8 * (j % 4))))
		s := blk[106+ib/2] >> (4 * (ib % 2)) & 15
		code, scale = apply(g, blk[74+4*ib+l]>>j&1 != 0), refHalf(u16(blk))*float64(2*s+1)
	case IQ1_S:
		qh := u16(blk[34+2*ib:])
		g := int(int8(gguf.IQ1SGrid[int(blk[2+4*ib+l])+256*int(qh>>(3*l)&7)] >> (8 * j)))
		code, scale = 8*g+apply(1, qh>>15 != 0), refHalf(u16(blk))*float64(2*(qh>>12&7)+1)/8
	case IQ1_M:
		nib := blk[32+2*ib+l/2] >> (4 * (l % 2))
		g := int(int8(gguf.IQ1SGrid[int(blk[4*ib+l])+256*int(nib&7)] >> (8 * j)))
		var dbits uint16
		for k := 0; k < 4; k++ {
			dbits |= u16(blk[48+2*k:]) >> 12 << (4 * k)
		}
		s := u16(blk[48+2*(ib/2):]) >> (6*(ib%2) + 3*(l/2)) & 7
		code, scale = 8*g+apply(1, nib&8 != 0), refHalf(dbits)*float64(2*s+1)/8
	case TQ1_0:
		digit := func(q byte, n int) int { return int(uint16(q*byte(math.Pow(3, float64(n))))*3) >> 8 }
		var q int
		switch {
		case e < 160:
			q = digit(blk[e%32], e/32)
		case e < 240:
			q = digit(blk[32+(e-160)%16], (e-160)/16)
		default:
			q = digit(blk[48+(e-240)%4], (e-240)/4)
		}
		code, scale = q-1, refHalf(u16(blk[52:]))
	case TQ2_0:
		code, scale = int(blk[32*(e/128)+e%32]>>(2*(e%128/32))&3)-1, refHalf(u16(blk[64:]))
	}
	return refElem{code: code, scale: scale}
}

// refIQScaleOffsets lists, for the i-quant and ternary types, the offsets of their fp16 d in
// a block (IQ1_M has none: its d is spread over the top nibbles of its scales).
var refIQScaleOffsets = map[WType]int{IQ2_XXS: 0, IQ2_XS: 0, IQ2_S: 0, IQ3_XXS: 0, IQ3_S: 0, IQ1_S: 0, TQ1_0: 52, TQ2_0: 64}

// refValues returns the float64 weights of one row.
func refValues(t WType, row []byte, cols int) []float64 {
	el := refDecode(t, row, cols)
	v := make([]float64, cols)
	for i, e := range el {
		v[i] = e.scale*float64(e.code) + e.offset
	}
	return v
}

// Row generators. kind: 0 random, 1 zeros, 2 extremes (largest fp16 scales, extreme codes),
// 3 random with a few extreme blocks.
func genRow(t WType, cols int, rng *rand.Rand, kind int) []byte {
	rb, err := t.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	row := make([]byte, rb)
	if kind == 1 {
		return row
	}
	for i := range row {
		row[i] = byte(rng.IntN(256))
	}
	put16 := func(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }
	f16 := func(f float64) uint16 { return f32ToF16Test(float32(f)) }
	scale := func() uint16 {
		if kind == 2 {
			return []uint16{0x7bff, 0xfbff}[rng.IntN(2)] // ±65504
		}
		return f16((rng.Float64()*2 - 1) * 0.02)
	}
	extremeCodes := func(b []byte) {
		for i := range b {
			b[i] = []byte{0x00, 0xff, 0x0f, 0xf0}[rng.IntN(4)]
		}
	}
	switch t {
	case F32:
		for i := 0; i < cols; i++ {
			v := float32(rng.NormFloat64())
			if kind == 2 {
				v = []float32{3e38, -3e38, 1e-38, 0}[rng.IntN(4)] / 1e30
			}
			binary.LittleEndian.PutUint32(row[4*i:], math.Float32bits(v))
		}
	case F16:
		for i := 0; i < cols; i++ {
			v := f16(rng.NormFloat64())
			if kind == 2 {
				v = []uint16{0x7bff, 0xfbff, 0x0001, 0x8001, 0x0400}[rng.IntN(5)]
			}
			put16(row[2*i:], v)
		}
	case BF16:
		for i := 0; i < cols; i++ {
			v := f32ToBF16(float32(rng.NormFloat64()))
			if kind == 2 {
				v = []uint16{0x7149, 0xf149, 0x0080, 0x3f80}[rng.IntN(4)] // ±1e30, min normal, 1
			}
			put16(row[2*i:], v)
		}
	case Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1, Q8_0:
		bs := t.TypeSize()
		for b := 0; b < cols/32; b++ {
			blk := row[b*bs : (b+1)*bs]
			k := kind
			if kind == 3 && rng.IntN(4) == 0 {
				k = 2
			}
			if k == 2 {
				put16(blk, []uint16{0x7bff, 0xfbff}[rng.IntN(2)])
				extremeCodes(blk[2:])
				if t == Q8_0 {
					for i := 2; i < 34; i++ {
						blk[i] = []byte{0x80, 0x7f, 0x81}[rng.IntN(3)]
					}
				}
			} else {
				put16(blk, scale())
			}
			if t == Q4_1 || t == Q5_1 {
				if k == 2 {
					put16(blk[2:], []uint16{0x7bff, 0xfbff}[rng.IntN(2)])
				} else {
					put16(blk[2:], f16((rng.Float64()*2-1)*0.1))
				}
			}
		}
	case Q4_K, Q5_K, Q6_K:
		bs := t.TypeSize()
		for b := 0; b < cols/256; b++ {
			blk := row[b*bs : (b+1)*bs]
			k := kind
			if kind == 3 && rng.IntN(2) == 0 {
				k = 2
			}
			if t == Q6_K {
				if k == 2 {
					put16(blk[208:], []uint16{0x7bff, 0xfbff}[rng.IntN(2)])
					for i := 192; i < 208; i++ {
						blk[i] = []byte{0x80, 0x7f}[rng.IntN(2)]
					}
					extremeCodes(blk[:192])
				} else {
					put16(blk[208:], f16(rng.Float64()*0.001))
				}
				continue
			}
			if k == 2 {
				put16(blk, 0x7bff)
				put16(blk[2:], []uint16{0x7bff, 0xfbff}[rng.IntN(2)])
				for i := 4; i < 16; i++ {
					blk[i] = 0xff // every scale and min 63
				}
				extremeCodes(blk[16:])
			} else {
				put16(blk, f16(rng.Float64()*0.001))
				put16(blk[2:], f16(rng.Float64()*0.001))
			}
		}
	case Q2_K, Q3_K, IQ4_XS:
		// The fp16 scales: d (and Q2_K's dmin) at these offsets of the block.
		offs := map[WType][]int{Q2_K: {80, 82}, Q3_K: {108}, IQ4_XS: {0}}[t]
		bs := t.TypeSize()
		for b := 0; b < cols/256; b++ {
			blk := row[b*bs : (b+1)*bs]
			k := kind
			if kind == 3 && rng.IntN(2) == 0 {
				k = 2
			}
			for _, o := range offs {
				if k == 2 {
					put16(blk[o:], []uint16{0x7bff, 0xfbff}[rng.IntN(2)])
				} else {
					put16(blk[o:], f16(rng.Float64()*0.001))
				}
			}
			if k == 2 {
				for i := range blk {
					if !slices.Contains(offs, i) && !slices.Contains(offs, i-1) {
						blk[i] = []byte{0x00, 0xff}[rng.IntN(2)] // codes and scales at their ends
					}
				}
			}
		}
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0:
		// Any index, sign and scale bits are valid: random bytes (kind 2: every byte 0x00 or
		// 0xff), then a finite d.
		bs := t.TypeSize()
		for b := 0; b < cols/256; b++ {
			blk := row[b*bs : (b+1)*bs]
			k := kind
			if kind == 3 && rng.IntN(2) == 0 {
				k = 2
			}
			var d uint16
			if k == 2 {
				for i := range blk {
					blk[i] = []byte{0x00, 0xff}[rng.IntN(2)]
				}
				d = []uint16{0x7bff, 0xfbff}[rng.IntN(2)]
			} else {
				d = f16((rng.Float64()*2 - 1) * 0.002)
			}
			if o, ok := refIQScaleOffsets[t]; ok {
				put16(blk[o:], d)
				continue
			}
			for k := 0; k < 4; k++ { // IQ1_M: nibble k of d in the top of scale word k
				w := u16(blk[48+2*k:])&0x0fff | (d>>(4*k)&15)<<12
				put16(blk[48+2*k:], w)
			}
		}
	}
	return row
}

// f32ToF16Test rounds to binary16 through float64 arithmetic (nearest, ties to even), as an
// independent check of the package's conversion.
func f32ToF16Test(f float32) uint16 {
	x := float64(f)
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if math.IsNaN(x) {
		return 0x7e00
	}
	if x >= 65520 { // halfway between 65504 and 65536 rounds up to infinity
		return sign | 0x7c00
	}
	if x < math.Pow(2, -14) { // subnormal: multiples of 2^-24
		return sign | uint16(math.RoundToEven(x*math.Pow(2, 24)))
	}
	e := math.Floor(math.Log2(x))
	if math.Pow(2, e) > x { // guard against Log2 rounding
		e--
	}
	m := math.RoundToEven((x/math.Pow(2, e) - 1) * 1024)
	if m == 1024 {
		m, e = 0, e+1
	}
	if e > 15 {
		return sign | 0x7c00
	}
	return sign | uint16(e+15)<<10 | uint16(m)
}
