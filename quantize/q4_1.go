package quantize

import "github.com/gquant/gquant/formats/gguf"

// q4_1Codec is Q4_1: blocks of 32, fp16 d, fp16 m, 16 bytes of nibbles; w = d·q + m.
type q4_1Codec struct{ blockCodec }

func init() { register(q4_1Codec{blockCodec{gguf.Q4_1}}) }

// Quantize is quantize_q4_1: min/max rounding without an imatrix, make_qkx3_quants with one.
func (c q4_1Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, quantizeRowQ4_1)
}

func quantizeRowQ4_1(dst []byte, x []float32, qw []float32) {
	if qw == nil {
		for ib := 0; ib < len(x)/32; ib++ {
			quantizeBlockQ4_1Ref(dst[20*ib:20*ib+20], x[32*ib:32*ib+32])
		}
		return
	}
	sigma2 := rowSigma2(x)
	var weight [32]float32
	var L, laux [32]uint8
	for ib := 0; ib < len(x)/32; ib++ {
		xb, y := x[32*ib:32*ib+32], dst[20*ib:20*ib+20]
		legacyWeights(&weight, xb, qw[32*ib:32*ib+32], sigma2)
		d, m := makeQkx3Quants(xb, 15, weight[:], L[:], laux[:], -0.9, 0.05, 36, false)
		putF16(y, d)
		putF16(y[2:], -m)
		for j := 0; j < 16; j++ {
			y[4+j] = L[j] | L[j+16]<<4
		}
	}
}

// quantizeBlockQ4_1Ref is one block of quantize_row_q4_1_ref: d = (max − min)/15,
// q = min(15, trunc((x − min)/d + 0.5)).
func quantizeBlockQ4_1Ref(y []byte, x []float32) {
	minv, maxv := float32(maxFloat32), float32(-maxFloat32)
	for _, v := range x {
		if v < minv {
			minv = v
		}
		if v > maxv {
			maxv = v
		}
	}
	d := (maxv - minv) / 15
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	putF16(y[2:], minv)
	for j := 0; j < 16; j++ {
		x0 := float32((x[j] - minv) * id)
		x1 := float32((x[16+j] - minv) * id)
		xi0 := min(15, int8(int32(x0+0.5)))
		xi1 := min(15, int8(int32(x1+0.5)))
		y[4+j] = uint8(xi0) | uint8(xi1)<<4
	}
}

// Dequantize is dequantize_row_q4_1.
func (c q4_1Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for ib := 0; ib < len(dst)/32; ib++ {
		y, out := src[20*ib:20*ib+20], dst[32*ib:32*ib+32]
		d, m := getF16(y), getF16(y[2:])
		for j := 0; j < 16; j++ {
			out[j] = float32(float32(y[4+j]&0xF)*d) + m
			out[j+16] = float32(float32(y[4+j]>>4)*d) + m
		}
	}
}
