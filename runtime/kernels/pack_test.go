package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// ilIndex returns the byte offset, inside a group's interleaved values, of element e of the
// group (lane width w).
func ilIndex(e, w int) int {
	j, s, b := e/w, e%w/4, e%4
	return 64*s + 4*j + b
}

// packValuesRef places a group's codes at ilIndex one element at a time (the layout's
// definition in pack.go's comment; the code packValues replaced): the reference of
// TestPackValues and the baseline of BenchmarkPackValues. out must be zero.
func packValuesRef(t WType, out, v []uint8, lane int) {
	steps := lane / 4
	for e, c := range v {
		i := ilIndex(e, lane)
		if t == Q8_0 {
			out[i] = c
			continue
		}
		s, pos := i/64, i%64
		out[64*(s/2)+pos] |= (c & 15) << (4 * (s % 2))
		switch t {
		case Q5_0, Q5_1, Q5_K:
			if c&16 != 0 {
				out[32*steps+8*s+pos/8] |= 1 << (pos % 8)
			}
		case Q6_K:
			out[32*steps+pos] |= (c >> 4 & 3) << (2 * s)
		}
	}
}

// packedTypes are the types whose codes packValues places (the others: packIQRow), with the
// bound of their codes.
func packedTypes() map[WType]int {
	out := map[WType]int{}
	for _, t := range Types {
		if gb, _ := groupBytes(t); gb == 0 || iqPacked(t) {
			continue
		}
		switch t {
		case Q8_0:
			out[t] = 256
		case Q5_0, Q5_1, Q5_K:
			out[t] = 32
		case Q6_K:
			out[t] = 64
		default:
			out[t] = 16
		}
	}
	return out
}

// randomGroup returns a group of random codes below bound and the bytes packValuesRef makes
// of it.
func randomGroup(rng *rand.Rand, t WType, bound int) (v, want []uint8) {
	gb, lane := groupBytes(t)
	v = make([]uint8, 16*lane)
	for i := range v {
		v[i] = uint8(rng.IntN(bound))
	}
	want = make([]uint8, gb)
	packValuesRef(t, want, v, lane)
	return v, want
}

// TestPackValues: packValues places random codes of every type as packValuesRef does, and
// writes the bytes that hold them whatever out held before (packRow clears it anyway).
func TestPackValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for wt, bound := range packedTypes() {
		gb, lane := groupBytes(wt)
		for range 4 {
			v, want := randomGroup(rng, wt, bound)
			got := make([]uint8, gb)
			packValues(wt, got, v, lane)
			if !bytes.Equal(got, want) {
				t.Fatalf("%v: packed values differ from their placing at ilIndex", wt)
			}
		}
	}
}

// BenchmarkPackValues places a group's codes of each type with packValues and, in the same
// run, with packValuesRef (element by element at ilIndex, the former code): ns a group each,
// and the speedup.
func BenchmarkPackValues(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	for wt, bound := range packedTypes() {
		b.Run(fmt.Sprint(wt), func(b *testing.B) {
			gb, lane := groupBytes(wt)
			v, _ := randomGroup(rng, wt, bound)
			out := make([]uint8, gb)
			benchBoth(b, "group", func() { packValues(wt, out, v, lane) }, func() {
				clear(out) // packValuesRef ORs into zeros (a memclr of 146–544 bytes)
				packValuesRef(wt, out, v, lane)
			})
		})
	}
}

// codesRef writes the unsigned codes of one row of type t, one at a time (the code codes
// replaced; the reference of TestCodes and the baseline of BenchmarkCodes): Q4_0/Q4_1/IQ4_NL/Q4_K 0..15, Q5_* 0..31,
// Q6_K 0..63, Q8_0 the int8 value plus 128.
func codesRef(t WType, vals []uint8, src []byte, cols int) {
	switch t {
	case Q4_0, IQ4_NL, Q4_1:
		bs, off := 18, 2
		if t == Q4_1 {
			bs, off = 20, 4
		}
		for b := 0; b < cols/32; b++ {
			qs := src[b*bs+off:]
			for j := 0; j < 16; j++ {
				vals[32*b+j], vals[32*b+j+16] = qs[j]&15, qs[j]>>4
			}
		}
	case Q5_0, Q5_1:
		bs, off := 22, 2
		if t == Q5_1 {
			bs, off = 24, 4
		}
		for b := 0; b < cols/32; b++ {
			blk := src[b*bs:]
			qh := binary.LittleEndian.Uint32(blk[off:])
			qs := blk[off+4:]
			for j := 0; j < 16; j++ {
				vals[32*b+j] = qs[j]&15 | uint8(qh>>j&1)<<4
				vals[32*b+j+16] = qs[j]>>4 | uint8(qh>>(j+16)&1)<<4
			}
		}
	case Q8_0:
		for b := 0; b < cols/32; b++ {
			for j := 0; j < 32; j++ {
				vals[32*b+j] = src[34*b+2+j] ^ 0x80
			}
		}
	case Q4_K, Q5_K:
		bs := 144
		if t == Q5_K {
			bs = 176
		}
		for b := 0; b < cols/256; b++ {
			blk := src[b*bs:]
			qs, qh := blk[16:], []byte(nil)
			if t == Q5_K {
				qh, qs = blk[16:48], blk[48:]
			}
			v := vals[256*b:]
			for j := 0; j < 4; j++ {
				for l := 0; l < 32; l++ {
					c0, c1 := qs[32*j+l]&15, qs[32*j+l]>>4
					if qh != nil {
						c0 |= (qh[l] >> (2 * j) & 1) << 4
						c1 |= (qh[l] >> (2*j + 1) & 1) << 4
					}
					v[64*j+l], v[64*j+32+l] = c0, c1
				}
			}
		}
	case Q2_K, Q3_K:
		bs, off := 84, 16
		if t == Q3_K {
			bs, off = 110, 32
		}
		for b := 0; b < cols/256; b++ {
			blk := src[b*bs:]
			v := vals[256*b : 256*b+256]
			for e := range v {
				c := blk[off+32*(e/128)+e%32] >> (2 * (e % 128 / 32)) & 3
				if t == Q3_K && blk[e%32]>>(e/32)&1 != 0 {
					c += 4
				}
				v[e] = c
			}
		}
	case IQ4_XS:
		for b := 0; b < cols/256; b++ {
			blk := src[b*136:]
			v := vals[256*b : 256*b+256]
			for e := range v {
				v[e] = blk[8+16*(e/32)+e%16] >> (4 * (e % 32 / 16)) & 15
			}
		}
	case Q6_K:
		for b := 0; b < cols/256; b++ {
			blk := src[b*210:]
			v := vals[256*b:]
			for n := 0; n < 2; n++ {
				ql, qh := blk[64*n:], blk[128+32*n:]
				for l := 0; l < 32; l++ {
					v[128*n+l] = ql[l]&15 | (qh[l]&3)<<4
					v[128*n+l+32] = ql[l+32]&15 | (qh[l]>>2&3)<<4
					v[128*n+l+64] = ql[l]>>4 | (qh[l]>>4&3)<<4
					v[128*n+l+96] = ql[l+32]>>4 | (qh[l]>>6&3)<<4
				}
			}
		}
	}
}

// randomRow returns a row of cols random bytes in t's layout (codes reads any bytes).
func randomRow(rng *rand.Rand, t WType, cols int) []byte {
	rb, err := t.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	row := make([]byte, rb)
	for i := range row {
		row[i] = uint8(rng.Uint32())
	}
	return row
}

// TestCodes: codes reads random rows of every type as codesRef does, one code at a time.
func TestCodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for wt := range packedTypes() {
		cols := 3 * 256
		src := randomRow(rng, wt, cols)
		got, want := make([]uint8, cols), make([]uint8, cols)
		codes(wt, got, src, cols)
		codesRef(wt, want, src, cols)
		if !bytes.Equal(got, want) {
			t.Errorf("%v: codes differ from codesRef's", wt)
		}
	}
}

// BenchmarkCodes reads the codes of a row of 4,096 columns of each type with codes and, in the
// same run, with codesRef (one code at a time, the former code): ns a row each, and the speedup.
func BenchmarkCodes(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	const cols = 4096
	for wt := range packedTypes() {
		b.Run(fmt.Sprint(wt), func(b *testing.B) {
			src, v := randomRow(rng, wt, cols), make([]uint8, cols)
			benchBoth(b, "row", func() { codes(wt, v, src, cols) }, func() { codesRef(wt, v, src, cols) })
		})
	}
}

// benchBoth runs fast and ref one after the other in each round of b's loop and reports the
// time of each per call (ns/unit, ref_ns/unit) and ref's over fast's (speedup).
func benchBoth(b *testing.B, unit string, fast, ref func()) {
	var tf, tr float64
	for b.Loop() {
		t0 := b.Elapsed()
		fast()
		t1 := b.Elapsed()
		ref()
		tf += float64(t1 - t0)
		tr += float64(b.Elapsed() - t1)
	}
	n := float64(b.N)
	b.ReportMetric(tf/n, "ns/"+unit)
	b.ReportMetric(tr/n, "ref_ns/"+unit)
	b.ReportMetric(tr/tf, "speedup")
}

// packIQRowRef is packIQRow with the codes placed one element at a time at ilIndex (the code
// that placeCrumbs, placeBits and packValues replaced there; the decoding, iqBlockCodes, is
// shared): the reference of TestPackIQRow and the baseline of BenchmarkPackIQRow.
func packIQRowRef(t WType, dst, src []byte) {
	clear(dst)
	gb, _ := groupBytes(t)
	bs := t.TypeSize()
	var code, bit [256]uint8
	var ls [16]uint8
	for g := 0; g < len(dst)/gb; g++ {
		out := dst[g*gb : (g+1)*gb]
		d := iqBlockCodes(t, src[g*bs:(g+1)*bs], &code, &bit, &ls)
		for e := 0; e < 256; e++ {
			i := ilIndex(e, 16)
			s, pos := i/64, i%64
			switch t {
			case IQ3_XXS, IQ3_S:
				out[64*(s/2)+pos] |= (code[e] | bit[e]<<3) << (4 * (s % 2))
			default:
				out[pos] |= code[e] << (2 * s)
				if bit[e] != 0 {
					out[64+8*s+pos/8] |= 1 << (pos % 8)
				}
			}
		}
		if t == TQ1_0 || t == TQ2_0 {
			binary.LittleEndian.PutUint16(out[64:], f32ToF16(d))
			continue
		}
		copy(out[gb-20:], ls[:])
		binary.LittleEndian.PutUint32(out[gb-4:], math.Float32bits(d))
	}
}

// TestPackIQRow: packRow repacks random rows of every i-quant and ternary type as packIQRowRef
// does.
func TestPackIQRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, wt := range iqTypes {
		const cols = 3 * 256
		gb, _ := groupBytes(wt)
		src := genRow(wt, cols, rng, 0)
		got, want := make([]byte, 3*gb), make([]byte, 3*gb)
		packRow(wt, got, src, cols, nil)
		packIQRowRef(wt, want, src)
		if !bytes.Equal(got, want) {
			t.Errorf("%v: the packed row differs from packIQRowRef's", wt)
		}
	}
}

// BenchmarkPackIQRow repacks a row of 4,096 columns of each i-quant and ternary type with
// packRow and, in the same run, packIQRowRef: ns a row each, and the speedup of the placing.
func BenchmarkPackIQRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 16))
	const cols = 4096
	for _, wt := range iqTypes {
		b.Run(fmt.Sprint(wt), func(b *testing.B) {
			gb, _ := groupBytes(wt)
			src, dst := genRow(wt, cols, rng, 0), make([]byte, cols/256*gb)
			benchBoth(b, "row", func() { packRow(wt, dst, src, cols, nil) }, func() { packIQRowRef(wt, dst, src) })
		})
	}
}
