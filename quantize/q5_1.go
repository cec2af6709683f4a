package quantize

import "github.com/gquant/gquant/formats/gguf"

// q5_1Codec is Q5_1: blocks of 32, fp16 d, fp16 m, then the Q5_0 bit layout; w = d·q + m.
type q5_1Codec struct{ blockCodec }

func init() { register(q5_1Codec{blockCodec{gguf.Q5_1}}) }

// Quantize is quantize_q5_1: min/max rounding without an imatrix, make_qkx3_quants with one.
func (c q5_1Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, quantizeRowQ5_1)
}

func quantizeRowQ5_1(dst []byte, x []float32, qw []float32) {
	if qw == nil {
		for ib := 0; ib < len(x)/32; ib++ {
			quantizeBlockQ5_1Ref(dst[24*ib:24*ib+24], x[32*ib:32*ib+32])
		}
		return
	}
	quantizeRowQkx3(x, qw, 31, func(ib int, d, m float32, L *[32]uint8) {
		y := dst[24*ib : 24*ib+24]
		putF16(y, d)
		putF16(y[2:], -m)
		pack5(y[4:24], L)
	})
}

// quantizeBlockQ5_1Ref is one block of quantize_row_q5_1_ref: d = (max − min)/31,
// q = trunc((x − min)/d + 0.5).
func quantizeBlockQ5_1Ref(y []byte, x []float32) {
	minv, maxv := float32(maxFloat32), float32(-maxFloat32)
	for _, v := range x {
		if v < minv {
			minv = v
		}
		if v > maxv {
			maxv = v
		}
	}
	d := (maxv - minv) / 31
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	putF16(y[2:], minv)
	var q [32]uint8
	for j := 0; j < 32; j++ {
		q[j] = uint8(int32(float32((x[j]-minv)*id) + 0.5))
	}
	pack5(y[4:24], &q)
}

// Dequantize is dequantize_row_q5_1.
func (c q5_1Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	var q [32]uint8
	for ib := 0; ib < len(dst)/32; ib++ {
		y, out := src[24*ib:24*ib+24], dst[32*ib:32*ib+32]
		d, m := getF16(y), getF16(y[2:])
		unpack5(&q, y[4:])
		for j := 0; j < 32; j++ {
			out[j] = float32(float32(q[j])*d) + m
		}
	}
}
