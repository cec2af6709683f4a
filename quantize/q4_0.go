package quantize

import "github.com/gquant/gquant/formats/gguf"

// q4_0Codec is Q4_0: blocks of 32, fp16 d then 16 bytes of nibbles (element j in the low nibble
// of byte j, element j+16 in the high nibble); w = d·(q − 8).
type q4_0Codec struct{ blockCodec }

func init() { register(q4_0Codec{blockCodec{gguf.Q4_0}}) }

// Quantize is quantize_q4_0: the reference rounding without an imatrix, the weighted search
// make_qx_quants with one.
func (c q4_0Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, quantizeRowQ4_0)
}

func quantizeRowQ4_0(dst []byte, x []float32, qw []float32) {
	if qw == nil {
		for ib := 0; ib < len(x)/32; ib++ {
			quantizeBlockQ4_0Ref(dst[18*ib:18*ib+18], x[32*ib:32*ib+32])
		}
		return
	}
	sigma2 := rowSigma2(x)
	var weight [32]float32
	var L [32]int8
	for ib := 0; ib < len(x)/32; ib++ {
		xb, y := x[32*ib:32*ib+32], dst[18*ib:18*ib+18]
		legacyWeights(&weight, xb, qw[32*ib:32*ib+32], sigma2)
		d := makeQxQuants(xb, 8, L[:], weight[:])
		putF16(y, d)
		for j := 0; j < 16; j++ {
			y[2+j] = byte(L[j]) | byte(L[j+16])<<4
		}
	}
}

// quantizeBlockQ4_0Ref is one block of quantize_row_q4_0_ref: d = max/−8 where max is the
// signed value of largest magnitude, q = min(15, trunc(x/d + 8.5)).
func quantizeBlockQ4_0Ref(y []byte, x []float32) {
	var amax, maxv float32
	for _, v := range x {
		if amax < abs32(v) {
			amax, maxv = abs32(v), v
		}
	}
	d := maxv / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	for j := 0; j < 16; j++ {
		x0 := float32(x[j] * id)
		x1 := float32(x[16+j] * id)
		xi0 := min(15, int8(int32(x0+8.5)))
		xi1 := min(15, int8(int32(x1+8.5)))
		y[2+j] = uint8(xi0) | uint8(xi1)<<4
	}
}

// rowSigma2 is Σx²/n over a whole row, the variance term of the legacy quants' imatrix weights.
func rowSigma2(x []float32) float32 {
	var sum float32
	for _, v := range x {
		sum += float32(v * v)
	}
	return sum / float32(len(x))
}

// legacyWeights sets weight[j] = qw[j]·sqrt(sigma2 + x[j]²), the imatrix weighting of the
// legacy (32-element) quants.
func legacyWeights(weight *[32]float32, x, qw []float32, sigma2 float32) {
	for j := 0; j < 32; j++ {
		weight[j] = qw[j] * sqrt32(sigma2+float32(x[j]*x[j]))
	}
}

// Dequantize is dequantize_row_q4_0.
func (c q4_0Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for ib := 0; ib < len(dst)/32; ib++ {
		y, out := src[18*ib:18*ib+18], dst[32*ib:32*ib+32]
		d := getF16(y)
		for j := 0; j < 16; j++ {
			out[j] = float32(int(y[2+j]&0xF)-8) * d
			out[j+16] = float32(int(y[2+j]>>4)-8) * d
		}
	}
}
