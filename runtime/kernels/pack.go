package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/gquant/gquant/formats/gguf"
)

// Repacked ("interleaved") layouts read by the assembly kernels.
//
// A group is 16 lanes: for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) a
// lane is one block and a group 16 consecutive blocks (512 elements; the last group of a row is
// padded with zero blocks); for the K-quants a lane is a 16-element sub-block and a group one
// 256-element super-block. With W elements per lane, step s (0 ≤ s < W/4) of a group is 64
// bytes: byte 4j+b holds element W·j + 4s + b. One VPDPBUSD per step then accumulates in 32-bit
// lane j the dot product of lane j's elements, so a group's 16 lane sums come out without any
// horizontal reduction. Activations are interleaved the same way (interleaveTokens, or the
// assembly quantizers of quant_amd64.s), group-major over the tokens of a batch: group g of
// token t is the (g·nTok + t)-th, so that the tokens of a GEMM tile sit together.
//
// 4-bit values take two steps per 64 bytes: byte 4j+b of nibble chunk c holds step 2c's value
// in its low nibble and step 2c+1's in its high one. Per group, in order:
//
//	Q4_0, IQ4_NL  nibbles[256] d[16]f16                      288 bytes (= 16 blocks of 18)
//	Q4_1          nibbles[256] d[16]f16 m[16]f16             320
//	Q5_0          nibbles[256] hi[8]u64 d[16]f16             352
//	Q5_1          nibbles[256] hi[8]u64 d[16]f16 m[16]f16    384
//	Q8_0          (q+128)[512]u8 d[16]f16                    544
//	Q4_K          nibbles[128] sc[8] m[8] d dmin f16         148 (ggml: 144)
//	Q5_K          nibbles[128] hi[4]u64 sc[8] m[8] d dmin    180 (ggml: 176)
//	Q6_K          nibbles[128] hi2[64] sc[16]i8 d            210
//	Q2_K          nibbles[128] sc[16] m[16] d dmin            164 (ggml: 84)
//	Q3_K          nibbles[128] sc[16]i8 d                    146 (ggml: 110)
//	IQ4_XS        nibbles[128] sc[16]i8 d                    146 (ggml: 136)
//
//	IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M
//	              crumbs[64] plane[4]u64 ls[16] d f32          116 (ggml: 66, 74, 82, 50, 56)
//	IQ3_XXS, IQ3_S
//	              nibbles[128] ls[16] d f32                    148 (ggml: 98, 110)
//	TQ1_0, TQ2_0  crumbs[64] d f16                              66 (ggml: 54, 66)
//
// hi[s] has bit 4j+b set when the value at step s, byte 4j+b has its bit 4 set (the fifth bit);
// hi2 byte 4j+b holds in bits 2s, 2s+1 bits 4-5 of the value at step s. Q4_0 and IQ4_NL keep
// their 0..15 codes, Q5_0 its 0..31 codes (the −8/−16 offset and IQ4_NL's table are applied in
// the kernel); Q6_K keeps its 0..63 codes (offset 32 applied with the Q8_K sums). The lanes
// of Q2_K and Q3_K are their 16-element sub-blocks, each with its own scale (Q2_K: 4-bit scale
// and min; Q3_K: the 6-bit scale minus 32); Q3_K's codes are 0..7 (the two low bits plus 4
// when the hmask bit is set; value = code − 4); IQ4_XS keeps its 0..15 codebook indices, its
// lanes 2j and 2j+1 sharing sub-block j's scale (minus 32).
//
// The i-quants on a grid and the ternary types are repacked with their grid points decoded:
// a value is a small unsigned code and, for the grid types, one more bit. crumbs byte 4j+b
// holds in bits 2s, 2s+1 the code at step s; plane[s] has bit 4j+b set when the value at step s,
// byte 4j+b has its bit. IQ2_*: the code is the grid magnitude's rank in {8, 25, 43}, the bit
// its sign; IQ1_*: the code is grid value + 1 (0..2), the bit a negative delta. IQ3_*: a nibble
// per value, the magnitude's rank among the grid's 8 values plus 8 for a minus sign. TQ*_0: the
// trit (0..2, value − 1). ls is each lane's integer sub-block scale (2s+1: lanes of 32-element
// sub-blocks repeat it), d the super-block scale as float32 with the type's constant factor
// (1/8 for IQ2_* and IQ1_*, 1/4 for IQ3_XXS) folded in: exact, a power of two (TQ*_0 keep
// their fp16 d, so that a group is as long as a TQ2_0 block). The kernels map codes to
// values + 64 (IQ1: 8·value ± 1 + 16) with one VPSHUFB table (iqLUT).

// packed is a repacked copy of a matrix.
type packed struct {
	data     []byte
	buf      *weightBuf // data's mapping (nil: on the heap)
	rowBytes int        // bytes per packed row
	groups   int        // groups per row
}

// groupBytes returns the bytes of one packed group of type t and its lane width in elements.
func groupBytes(t WType) (bytes, lane int) {
	switch t {
	case Q4_0, IQ4_NL:
		return 288, 32
	case Q4_1:
		return 320, 32
	case Q5_0:
		return 352, 32
	case Q5_1:
		return 384, 32
	case Q8_0:
		return 544, 32
	case Q4_K:
		return 148, 16
	case Q5_K:
		return 180, 16
	case Q6_K:
		return 210, 16
	case Q2_K:
		return 164, 16
	case Q3_K, IQ4_XS:
		return 146, 16
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M:
		return 116, 16
	case IQ3_XXS, IQ3_S:
		return 148, 16
	case TQ1_0, TQ2_0:
		return 66, 16
	}
	return 0, 0
}

// packMatrix repacks every row of m.
func packMatrix(m *Matrix) *packed {
	gb, lane := groupBytes(m.Type)
	groups := (m.Cols + 16*lane - 1) / (16 * lane)
	p := &packed{rowBytes: groups * gb, groups: groups}
	p.data, p.buf = allocWeights(p, m.Rows*p.rowBytes)
	vals := make([]uint8, groups*16*lane)
	for r := 0; r < m.Rows; r++ {
		packRow(m.Type, p.data[r*p.rowBytes:(r+1)*p.rowBytes], m.Data[r*m.rowBytes:(r+1)*m.rowBytes], m.Cols, vals)
	}
	return p
}

// packRow repacks one row of cols elements from src (ggml layout) into dst; vals is scratch of
// one row's padded length.
func packRow(t WType, dst, src []byte, cols int, vals []uint8) {
	clear(dst)
	if iqPacked(t) {
		packIQRow(t, dst, src)
		return
	}
	clear(vals)
	gb, lane := groupBytes(t)
	groups := len(dst) / gb
	gElems := 16 * lane
	// Unpack the codes (unsigned, as stored) of the whole row into vals.
	codes(t, vals, src, cols)
	bs := t.TypeSize()
	for g := 0; g < groups; g++ {
		out := dst[g*gb : (g+1)*gb]
		v := vals[g*gElems : (g+1)*gElems]
		packValues(t, out, v, lane)
		steps := lane / 4
		// Scales.
		tail := out[32*steps:]
		switch t {
		case Q5_0, Q5_1, Q5_K:
			tail = tail[8*steps:]
		case Q6_K:
			tail = tail[64:]
		case Q8_0:
			tail = out[512:]
		}
		switch t {
		case Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1, Q8_0:
			for j := 0; j < 16; j++ {
				b := 16*g + j
				if b >= cols/32 {
					break
				}
				blk := src[b*bs:]
				copy(tail[2*j:], blk[:2])
				if t == Q4_1 || t == Q5_1 {
					copy(tail[32+2*j:], blk[2:4])
				}
			}
		case Q4_K, Q5_K:
			blk := src[g*bs:]
			for j := 0; j < 8; j++ {
				tail[j], tail[8+j] = scaleMinK4(j, blk[4:16])
			}
			copy(tail[16:20], blk[:4])
		case Q6_K:
			blk := src[g*bs:]
			copy(tail[:16], blk[192:208])
			copy(tail[16:18], blk[208:210])
		case Q2_K:
			blk := src[g*bs:]
			for j := 0; j < 16; j++ {
				tail[j], tail[16+j] = blk[j]&15, blk[j]>>4
			}
			copy(tail[32:36], blk[80:84])
		case Q3_K:
			blk := src[g*bs:]
			for j := 0; j < 16; j++ {
				tail[j] = byte(int8(q3KScale(blk[96:108], j) - 32))
			}
			copy(tail[16:18], blk[108:110])
		case IQ4_XS:
			blk := src[g*bs:]
			for j := 0; j < 16; j++ {
				tail[j] = byte(int8(iq4XSScale(blk, j/2) - 32))
			}
			copy(tail[16:18], blk[:2])
		}
	}
}

// packValues places a group's codes v (16 lanes of lane elements) in the interleaved layout of
// out: byte 4j+b of step s holds element lane·j + 4s + b, written in output order; the nibbles,
// and the fifth bits of Q5_* or bits 4-5 of Q6_K after them (the comment above).
func packValues(t WType, out, v []uint8, lane int) {
	steps := lane / 4
	le := binary.LittleEndian
	// The four bytes 4j..4j+3 of step s are elements lane·j + 4s … + 3: one 32-bit word.
	word := func(j, s int) uint32 { return le.Uint32(v[lane*j+4*s:]) }
	if t == Q8_0 {
		for s := 0; s < steps; s++ {
			for j := 0; j < 16; j++ {
				le.PutUint32(out[64*s+4*j:], word(j, s))
			}
		}
	} else {
		// Nibble chunk c: steps 2c (low nibbles) and 2c+1 (high ones).
		for c := 0; c < steps/2; c++ {
			for j := 0; j < 16; j++ {
				le.PutUint32(out[64*c+4*j:], word(j, 2*c)&0x0f0f0f0f|(word(j, 2*c+1)&0x0f0f0f0f)<<4)
			}
		}
	}
	switch t {
	case Q5_0, Q5_1, Q5_K: // hi: the fifth bits
		placeBits(out[32*steps:], v, lane, 4)
	case Q6_K: // hi2: bits 4-5
		placeCrumbs(out[32*steps:], v, lane, 4)
	}
}

// placeBits writes bit k of the group's values v as bit planes: the 64-bit word s of out (one
// per step) has bit 4j+b set when the value at step s, byte 4j+b (element lane·j + 4s + b) has
// bit k set.
func placeBits(out, v []uint8, lane, k int) {
	le := binary.LittleEndian
	for s := 0; s < lane/4; s++ {
		var w uint64
		for j := 0; j < 16; j++ {
			// The four bytes' bit k to bits 0-3: each at bit 8b of x, gathered at 24+b.
			x := le.Uint32(v[lane*j+4*s:]) >> k & 0x01010101
			w |= uint64(x*0x01020408>>24&15) << (4 * j)
		}
		le.PutUint64(out[8*s:], w)
	}
}

// placeCrumbs writes bits k, k+1 of the group's values v as crumbs: byte 4j+b of out holds in
// bits 2s, 2s+1 those of the value at step s, byte 4j+b (element lane·j + 4s + b).
func placeCrumbs(out, v []uint8, lane, k int) {
	le := binary.LittleEndian
	for j := 0; j < 16; j++ {
		var x uint32
		for s := 0; s < lane/4; s++ {
			x |= (le.Uint32(v[lane*j+4*s:]) >> k & 0x03030303) << (2 * s)
		}
		le.PutUint32(out[4*j:], x)
	}
}

// codes writes the unsigned codes of one row of type t: Q4_0/Q4_1/IQ4_NL/Q4_K 0..15, Q5_* 0..31,
// Q6_K 0..63, Q8_0 the int8 value plus 128. Eight codes at a time, as 64-bit words: ggml's
// blocks hold each run of 8 consecutive values in 8 consecutive bytes (nibbles and bit planes
// apart).
func codes(t WType, vals []uint8, src []byte, cols int) {
	le := binary.LittleEndian
	const nib, bit, two = 0x0f0f0f0f0f0f0f0f, 0x0101010101010101, 0x0303030303030303
	switch t {
	case Q4_0, IQ4_NL, Q4_1:
		bs, off := 18, 2
		if t == Q4_1 {
			bs, off = 20, 4
		}
		for b := 0; b < cols/32; b++ {
			qs, v := src[b*bs+off:b*bs+off+16], vals[32*b:32*b+32]
			for k := 0; k < 16; k += 8 {
				w := le.Uint64(qs[k:])
				le.PutUint64(v[k:], w&nib)
				le.PutUint64(v[16+k:], w>>4&nib)
			}
		}
	case Q5_0, Q5_1:
		bs, off := 22, 2
		if t == Q5_1 {
			bs, off = 24, 4
		}
		for b := 0; b < cols/32; b++ {
			blk, v := src[b*bs:], vals[32*b:32*b+32]
			qh := le.Uint32(blk[off:])
			qs := blk[off+4 : off+20]
			for k := 0; k < 16; k += 8 {
				w := le.Uint64(qs[k:])
				le.PutUint64(v[k:], w&nib|spreadBits[qh>>k&0xff]<<4)
				le.PutUint64(v[16+k:], w>>4&nib|spreadBits[qh>>(16+k)&0xff]<<4)
			}
		}
	case Q8_0:
		for b := 0; b < cols/32; b++ {
			qs, v := src[34*b+2:34*b+34], vals[32*b:32*b+32]
			for k := 0; k < 32; k += 8 {
				le.PutUint64(v[k:], le.Uint64(qs[k:])^0x8080808080808080)
			}
		}
	case Q4_K, Q5_K:
		bs := 144
		if t == Q5_K {
			bs = 176
		}
		for b := 0; b < cols/256; b++ {
			blk := src[b*bs:]
			qs, qh := blk[16:144], []byte(nil)
			if t == Q5_K {
				qh, qs = blk[16:48], blk[48:176]
			}
			v := vals[256*b : 256*b+256]
			for j := 0; j < 4; j++ {
				for k := 0; k < 32; k += 8 {
					w := le.Uint64(qs[32*j+k:])
					c0, c1 := w&nib, w>>4&nib
					if qh != nil {
						h := le.Uint64(qh[k:])
						c0 |= (h >> (2 * j) & bit) << 4
						c1 |= (h >> (2*j + 1) & bit) << 4
					}
					le.PutUint64(v[64*j+k:], c0)
					le.PutUint64(v[64*j+32+k:], c1)
				}
			}
		}
	case Q2_K, Q3_K:
		// Element 128n + 32s + l: bits 2s, 2s+1 of q[32n + l]; Q3_K adds 4 when bit 4n+s of
		// hmask[l] is set.
		bs, off := 84, 16
		if t == Q3_K {
			bs, off = 110, 32
		}
		for b := 0; b < cols/256; b++ {
			blk := src[b*bs:]
			v := vals[256*b : 256*b+256]
			for n := 0; n < 2; n++ {
				for k := 0; k < 32; k += 8 {
					q := le.Uint64(blk[off+32*n+k:])
					var hm uint64
					if t == Q3_K {
						hm = le.Uint64(blk[k:])
					}
					for s := 0; s < 4; s++ {
						c := q >> (2 * s) & two
						if t == Q3_K {
							c |= (hm >> (4*n + s) & bit) << 2
						}
						le.PutUint64(v[128*n+32*s+k:], c)
					}
				}
			}
		}
	case IQ4_XS:
		// Element 32sb + 16h + l: nibble h of byte 8 + 16sb + l.
		for b := 0; b < cols/256; b++ {
			blk := src[b*136:]
			v := vals[256*b : 256*b+256]
			for sb := 0; sb < 8; sb++ {
				for k := 0; k < 16; k += 8 {
					w := le.Uint64(blk[8+16*sb+k:])
					le.PutUint64(v[32*sb+k:], w&nib)
					le.PutUint64(v[32*sb+16+k:], w>>4&nib)
				}
			}
		}
	case Q6_K:
		for b := 0; b < cols/256; b++ {
			blk := src[b*210:]
			v := vals[256*b : 256*b+256]
			for n := 0; n < 2; n++ {
				ql, qh := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32]
				for l := 0; l < 32; l += 8 {
					lo, hi, h := le.Uint64(ql[l:]), le.Uint64(ql[l+32:]), le.Uint64(qh[l:])
					le.PutUint64(v[128*n+l:], lo&nib|(h&two)<<4)
					le.PutUint64(v[128*n+l+32:], hi&nib|(h>>2&two)<<4)
					le.PutUint64(v[128*n+l+64:], lo>>4&nib|(h>>4&two)<<4)
					le.PutUint64(v[128*n+l+96:], hi>>4&nib|(h>>6&two)<<4)
				}
			}
		}
	}
}

// spreadBits[x] has byte i set to bit i of x (0 or 1).
var spreadBits = func() (t [256]uint64) {
	for x := range t {
		for i := range 8 {
			t[x] |= uint64(x>>i&1) << (8 * i)
		}
	}
	return t
}()

// ilLayout returns, for an activation kind, the lane width and the number of groups per token.
func ilLayout(k actKind, cols int) (lane, groups int) {
	if k == actQ8_K {
		return 16, cols / 256
	}
	return 32, (cols + 511) / 512
}

// ilRecord is the float32 count of one (group, token) record of Acts.ilM (128 bytes):
//
//	Q8_0  d[16] float32, Σq[16] int32 (per block of 32)
//	Q8_1  d[16] float32, s[16] float32
//	Q8_K  bsums[16] int32 (per 16 values), d float32, 15 unused
//
// Padding blocks of a row's last group have zero values, scales and sums.
const ilRecord = 32

// ilSize sizes a's interleaved buffers for its kind, token count and columns.
func ilSize(a *Acts) {
	lane, groups := ilLayout(a.kind, a.cols)
	a.il = growU8(a.il, groups*a.nTok*16*lane)
	a.ilM = growF32(a.ilM, groups*a.nTok*ilRecord)
}

// interleaveTokens fills a's interleaved copies of tokens [t0,t1) from its ggml-layout
// quantized values (ilSize must have sized the buffers).
func interleaveTokens(a *Acts, t0, t1 int) {
	lane, groups := ilLayout(a.kind, a.cols)
	gE := 16 * lane
	n := a.nTok
	for t := t0; t < t1; t++ {
		src := a.qs[t*a.cols : (t+1)*a.cols]
		for g := 0; g < groups; g++ {
			dst := a.il[(g*n+t)*gE : (g*n+t+1)*gE]
			rec := a.ilM[(g*n+t)*ilRecord : (g*n+t+1)*ilRecord]
			sums := unsafe.Slice((*int32)(unsafe.Pointer(&rec[16])), 16)
			if a.kind == actQ8_K {
				blk := src[256*g : 256*g+256]
				for j := 0; j < 16; j++ { // sub-block j: 4 words, word s to step s
					for s := 0; s < 4; s++ {
						putWord(dst, 64*s+4*j, blk, 16*j+4*s)
					}
				}
				bs := a.bsums[16*(t*groups+g):]
				for j := range 16 {
					*(*int32)(unsafe.Pointer(&rec[j])) = int32(bs[j])
				}
				rec[16] = a.d[t*groups+g]
				continue
			}
			nb := min(16, a.cols/32-16*g) // real blocks in this group
			if nb < 16 {
				clear(dst)
				clear(rec)
			}
			for j := 0; j < nb; j++ {
				b := 16*g + j
				blk := src[32*b : 32*b+32]
				var sum int32
				for _, v := range blk {
					sum += int32(v)
				}
				for s := 0; s < 8; s++ {
					putWord(dst, 64*s+4*j, blk, 4*s)
				}
				rec[j] = a.d[t*(a.cols/32)+b]
				if a.kind == actQ8_1 {
					rec[16+j] = a.s[t*(a.cols/32)+b]
				} else {
					sums[j] = sum
				}
			}
		}
	}
}

// putWord copies the 4 bytes of src at i to dst at o.
func putWord(dst []byte, o int, src []int8, i int) {
	_ = src[i+3]
	_ = dst[o+3]
	*(*uint32)(unsafe.Pointer(&dst[o])) = *(*uint32)(unsafe.Pointer(&src[i]))
}

// iqPacked reports whether t is one of the types with decoded grid points in the packed form.
func iqPacked(t WType) bool {
	switch t {
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0:
		return true
	}
	return false
}

// iqMagnitudes returns the distinct byte values of a grid (ascending): IQ2_* {8, 25, 43},
// IQ3_XXS and IQ3_S eight each. The packed codes are ranks in this list.
func iqMagnitudes[T uint32 | uint64](grid []T, width int) []int {
	var seen [256]bool
	for _, g := range grid {
		for j := 0; j < width; j++ {
			seen[uint8(g>>(8*j))] = true
		}
	}
	var v []int
	for b, ok := range seen {
		if ok {
			v = append(v, b)
		}
	}
	return v
}

var (
	iq2Magnitudes    = iqMagnitudes(gguf.IQ2XXSGrid[:], 8) // the same for IQ2_XS and IQ2_S
	iq3XXSMagnitudes = iqMagnitudes(gguf.IQ3XXSGrid[:], 4)
	iq3SMagnitudes   = iqMagnitudes(gguf.IQ3SGrid[:], 4)
)

// rankOf maps each byte value of mags to its rank.
func rankOf(mags []int) *[256]uint8 {
	var r [256]uint8
	for i, v := range mags {
		r[v] = uint8(i)
	}
	return &r
}

var iq2Rank, iq3XXSRank, iq3SRank = rankOf(iq2Magnitudes), rankOf(iq3XXSMagnitudes), rankOf(iq3SMagnitudes)

// rankedGrid is grid with every byte of its points (width bytes each) replaced by its rank: a
// point's codes in one word.
func rankedGrid[T uint32 | uint64](grid []T, rank *[256]uint8, width int) []T {
	out := make([]T, len(grid))
	for i, g := range grid {
		for j := 0; j < width; j++ {
			out[i] |= T(rank[uint8(g>>(8*j))]) << (8 * j)
		}
	}
	return out
}

// iq1Coded is IQ1_S's grid with every point's bytes (values −1, 0, 1) as codes, value + 1.
var iq1Coded = func() []uint64 {
	out := make([]uint64, len(gguf.IQ1SGrid))
	for i, g := range gguf.IQ1SGrid {
		for j := 0; j < 8; j++ {
			out[i] |= uint64(uint8(int8(g>>(8*j))+1)) << (8 * j)
		}
	}
	return out
}()

// The grids of iqBlockCodes, ranked (17 KiB).
var (
	iq2XXSRanked = rankedGrid(gguf.IQ2XXSGrid[:], iq2Rank, 8)
	iq2XSRanked  = rankedGrid(gguf.IQ2XSGrid[:], iq2Rank, 8)
	iq2SRanked   = rankedGrid(gguf.IQ2SGrid[:], iq2Rank, 8)
	iq3XXSRanked = rankedGrid(gguf.IQ3XXSGrid[:], iq3XXSRank, 4)
	iq3SRanked   = rankedGrid(gguf.IQ3SGrid[:], iq3SRank, 4)
)

// packIQRow repacks one row of an i-quant or ternary type (one group per super-block).
func packIQRow(t WType, dst, src []byte) {
	gb, _ := groupBytes(t)
	bs := t.TypeSize()
	var code, bit [256]uint8
	var ls [16]uint8
	for g := 0; g < len(dst)/gb; g++ {
		out := dst[g*gb : (g+1)*gb]
		d := iqBlockCodes(t, src[g*bs:(g+1)*bs], &code, &bit, &ls)
		if t == IQ3_XXS || t == IQ3_S {
			for e := range code {
				code[e] |= bit[e] << 3 // a nibble: rank, and 8 for a minus sign
			}
			packValues(t, out, code[:], 16)
		} else { // crumbs, then the bit planes (the ternary types have none)
			placeCrumbs(out, code[:], 16, 0)
			if t != TQ1_0 && t != TQ2_0 {
				placeBits(out[64:], bit[:], 16, 0)
			}
		}
		if t == TQ1_0 || t == TQ2_0 {
			binary.LittleEndian.PutUint16(out[64:], f32ToF16(d)) // exact: d came from an fp16
			continue
		}
		copy(out[gb-20:], ls[:])
		binary.LittleEndian.PutUint32(out[gb-4:], math.Float32bits(d))
	}
}

// iqBlockCodes decodes one block of t into the packed form's codes (pack.go's layout notes),
// the bit of each value (sign or delta), the 16 lane scales, and returns the float32 scale
// with the type's constant factor.
func iqBlockCodes(t WType, blk []byte, code, bit *[256]uint8, ls *[16]uint8) float32 {
	// put8 and put4 write the codes of a grid point (ranked: a word of codes) and its signs.
	le := binary.LittleEndian
	put8 := func(e0 int, ranked uint64, signs uint8) {
		le.PutUint64(code[e0:], ranked)
		le.PutUint64(bit[e0:], spreadBits[signs])
	}
	put4 := func(e0 int, ranked uint32, signs uint8) {
		le.PutUint32(code[e0:], ranked)
		le.PutUint32(bit[e0:], uint32(spreadBits[signs&15]))
	}
	switch t {
	case IQ2_XXS:
		for ib := 0; ib < 8; ib++ {
			aux1 := le32(blk[6+8*ib:])
			ls[2*ib], ls[2*ib+1] = uint8(2*(aux1>>28)+1), uint8(2*(aux1>>28)+1)
			for l := 0; l < 4; l++ {
				put8(32*ib+8*l, iq2XXSRanked[blk[2+8*ib+l]], gguf.KSignsIQ2XS[aux1>>(7*l)&127])
			}
		}
		return f16ToF32(le16(blk)) * 0.125
	case IQ2_XS, IQ2_S:
		for ib := 0; ib < 8; ib++ {
			sc := blk[66+ib]
			if t == IQ2_S {
				sc = blk[74+ib]
			}
			ls[2*ib], ls[2*ib+1] = 2*(sc&15)+1, 2*(sc>>4)+1
			for l := 0; l < 4; l++ {
				if t == IQ2_XS {
					v := le16(blk[2+8*ib+2*l:])
					put8(32*ib+8*l, iq2XSRanked[v&511], gguf.KSignsIQ2XS[v>>9])
				} else {
					put8(32*ib+8*l, iq2SRanked[iq2sIndex(blk, ib, l)], blk[34+4*ib+l])
				}
			}
		}
		return f16ToF32(le16(blk)) * 0.125
	case IQ3_XXS:
		for ib := 0; ib < 8; ib++ {
			aux := le32(blk[66+4*ib:])
			ls[2*ib], ls[2*ib+1] = uint8(2*(aux>>28)+1), uint8(2*(aux>>28)+1)
			for l := 0; l < 4; l++ {
				signs := gguf.KSignsIQ2XS[aux>>(7*l)&127]
				put4(32*ib+8*l, iq3XXSRanked[blk[2+8*ib+2*l]], signs)
				put4(32*ib+8*l+4, iq3XXSRanked[blk[2+8*ib+2*l+1]], signs>>4)
			}
		}
		return f16ToF32(le16(blk)) * 0.25
	case IQ3_S:
		for ib := 0; ib < 8; ib++ {
			s := 2*(blk[106+ib/2]>>(4*(ib%2))&15) + 1
			ls[2*ib], ls[2*ib+1] = s, s
			for l := 0; l < 4; l++ {
				signs := blk[74+4*ib+l]
				put4(32*ib+8*l, iq3SRanked[iq3sIndex(blk, ib, l, 0)], signs)
				put4(32*ib+8*l+4, iq3SRanked[iq3sIndex(blk, ib, l, 1)], signs>>4)
			}
		}
		return f16ToF32(le16(blk))
	case IQ1_S, IQ1_M:
		for ib := 0; ib < 8; ib++ {
			for l := 0; l < 4; l++ {
				var idx int
				var neg bool
				if t == IQ1_S {
					var qh uint16
					idx, qh = iq1sIndex(blk, ib, l)
					neg = qh&0x8000 != 0
					ls[2*ib+l/2] = uint8(2*(qh>>12&7) + 1)
				} else {
					idx, neg = iq1mIndex(blk, ib, l)
					ls[2*ib+l/2] = uint8(iq1mLs(blk, ib, l/2))
				}
				var signs uint8
				if neg {
					signs = 0xff
				}
				put8(32*ib+8*l, iq1Coded[idx], signs)
			}
		}
		if t == IQ1_S {
			return f16ToF32(le16(blk)) * 0.125
		}
		return f16ToF32(iq1mScale(blk)) * 0.125
	case TQ1_0:
		for e := range code {
			code[e], bit[e] = uint8(tq1Code(blk, e)), 0
		}
		return f16ToF32(le16(blk[52:]))
	case TQ2_0:
		// Element 128n + 32s + l: bits 2s, 2s+1 of byte 32n + l.
		for n := 0; n < 2; n++ {
			for k := 0; k < 32; k += 8 {
				q := le.Uint64(blk[32*n+k:])
				for s := 0; s < 4; s++ {
					le.PutUint64(code[128*n+32*s+k:], q>>(2*s)&0x0303030303030303)
				}
			}
		}
		clear(bit[:])
		return f16ToF32(le16(blk[64:]))
	}
	panic("kernels: iqBlockCodes: " + t.String())
}
