package quantize

import (
	"math"

	"github.com/gquant/gquant/formats/gguf"
)

// tq1_0Codec is TQ1_0 (ternary, BitNet b1.58 and TriLMs): super-blocks of 256 trits
// t ∈ {0, 1, 2}, w = d·(t − 1). Layout (54 bytes): qs[48], each byte holding 5 trits as the
// fixed-point fraction ⌈(Σ t_n·3^(4−n))·256/243⌉ (bytes 0..31: elements m + 32n of the first
// 160; bytes 32..47: m + 16n of the next 80), qh[4] holding 4 trits each the same way
// (elements 240 + j + 4m, the fifth trit 0), then fp16 d.
type tq1_0Codec struct{ blockCodec }

func init() { register(tq1_0Codec{blockCodec{gguf.TQ1_0}}) }

// Quantize is quantize_tq1_0 (quantize_row_tq1_0_ref): d = max|x|, t = lroundf(x/d) + 1.
// ggml ignores the imatrix for TQ1_0, and so does this.
func (c tq1_0Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	checkQuantize(c, dst, src, nrows, nPerRow, imatrix)
	for i := 0; i < len(src)/256; i++ {
		x, y := (*[256]float32)(src[256*i:]), (*[54]byte)(dst[54*i:])
		var t [256]uint8
		putF16(y[52:54], ternaryTrits(x, &t))
		for m := 0; m < 32; m++ {
			y[m] = trits5(t[m], t[m+32], t[m+64], t[m+96], t[m+128])
		}
		for m := 0; m < 16; m++ {
			y[32+m] = trits5(t[160+m], t[176+m], t[192+m], t[208+m], t[224+m])
		}
		for j := 0; j < 4; j++ {
			// The first trit in the most significant place, the fifth 0.
			y[48+j] = trits5(t[240+j], t[244+j], t[248+j], t[252+j], 0)
		}
	}
}

// ternaryTrits is the rounding of quantize_row_tq{1,2}_0_ref: d = MAX over |x| (ggml's
// macro, which a NaN does not stick to), id = 1/d (0 when d is 0) and t = lroundf(x·id) + 1
// as ggml's int, wrapped to the uint8 it is added into.
func ternaryTrits(x *[256]float32, t *[256]uint8) (d float32) {
	// The bits of |x| order like the values, NaNs above +Inf: without a NaN their maximum
	// is ggml's d, and the four running maxima are independent chains.
	var m0, m1, m2, m3 uint32
	for j := 0; j < 256; j += 4 {
		m0 = max(m0, math.Float32bits(x[j])&0x7fffffff)
		m1 = max(m1, math.Float32bits(x[j+1])&0x7fffffff)
		m2 = max(m2, math.Float32bits(x[j+2])&0x7fffffff)
		m3 = max(m3, math.Float32bits(x[j+3])&0x7fffffff)
	}
	if m := max(m0, m1, m2, m3); m <= 0x7f800000 {
		d = math.Float32frombits(m)
	} else {
		for _, v := range x {
			if a := abs32(v); !(d > a) {
				d = a
			}
		}
	}
	var id float32
	if d != 0 {
		id = 1 / d
	}
	if id <= maxFloat32 {
		// |x| ≤ d, so x·id is within ±1 (or NaN, which lroundf turns into LONG_MIN and the
		// trit into 1): lroundf, rounding halves away from zero, is two comparisons.
		for j, v := range x {
			p := v * id
			t[j] = 1 + b2u8(p >= 0.5) - b2u8(p <= -0.5)
		}
		return d
	}
	for j, v := range x { // id = +Inf: d is subnormal
		t[j] = uint8(int32(lroundf(v*id) + 1))
	}
	return d
}

// b2u8 is 1 for true, 0 for false (compiled to a SETcc, not a branch).
func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// lroundf is C's lroundf as glibc computes it on amd64: round half away from zero; NaN, ±Inf
// and values beyond the range of long give LONG_MIN (the conversion's "integer indefinite").
func lroundf(f float32) int64 {
	if f != f || abs32(f) >= 0x1p63 {
		return math.MinInt64
	}
	return int64(math.Round(float64(f)))
}

// trits5 packs 5 trits as ggml does: q = Σ t_n·3^(4−n) in uint8 arithmetic, then the
// ceiling of q·256/243.
func trits5(t0, t1, t2, t3, t4 uint8) uint8 {
	q := (((t0*3+t1)*3+t2)*3+t3)*3 + t4
	return uint8((uint16(q)*256 + 242) / 243)
}

// Dequantize is dequantize_row_tq1_0.
func (c tq1_0Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	pow3 := [6]uint8{1, 3, 9, 27, 81, 243}
	trit := func(b uint8, n int, d float32) float32 {
		q := b * pow3[n]
		return float32(int16(uint16(q)*3>>8)-1) * d
	}
	for i := 0; i < len(dst)/256; i++ {
		b, y := (*[54]byte)(src[54*i:]), (*[256]float32)(dst[256*i:])
		d := getF16(b[52:54])
		for n := 0; n < 5; n++ {
			for m := 0; m < 32; m++ {
				y[32*n+m] = trit(b[m], n, d)
			}
		}
		for n := 0; n < 5; n++ {
			for m := 0; m < 16; m++ {
				y[160+16*n+m] = trit(b[32+m], n, d)
			}
		}
		for n := 0; n < 4; n++ {
			for j := 0; j < 4; j++ {
				y[240+4*n+j] = trit(b[48+j], n, d)
			}
		}
	}
}
