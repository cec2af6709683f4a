package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
)

// q5_0Codec is Q5_0: blocks of 32, fp16 d, 4 bytes holding the fifth bit of each element
// (bit j for element j), 16 bytes of low nibbles laid out as in Q4_0; w = d·(q − 16).
type q5_0Codec struct{ blockCodec }

func init() { register(q5_0Codec{blockCodec{gguf.Q5_0}}) }

// Quantize is quantize_q5_0: the reference rounding without an imatrix, make_qx_quants with one.
func (c q5_0Codec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, quantizeRowQ5_0)
}

func quantizeRowQ5_0(dst []byte, x []float32, qw []float32) {
	if qw == nil {
		for ib := 0; ib < len(x)/32; ib++ {
			quantizeBlockQ5_0Ref(dst[22*ib:22*ib+22], x[32*ib:32*ib+32])
		}
		return
	}
	sigma2 := rowSigma2(x)
	var weight [32]float32
	var L [32]int8
	var q [32]uint8
	for ib := 0; ib < len(x)/32; ib++ {
		xb, y := x[32*ib:32*ib+32], dst[22*ib:22*ib+22]
		legacyWeights(&weight, xb, qw[32*ib:32*ib+32], sigma2)
		d := makeQxQuants(xb, 16, L[:], weight[:])
		putF16(y, d)
		for j := range q {
			q[j] = uint8(L[j])
		}
		pack5(y[2:22], &q)
	}
}

// quantizeBlockQ5_0Ref is one block of quantize_row_q5_0_ref: d = max/−16,
// q = min(31, trunc(x/d + 16.5)).
func quantizeBlockQ5_0Ref(y []byte, x []float32) {
	var amax, maxv float32
	for _, v := range x {
		if amax < abs32(v) {
			amax, maxv = abs32(v), v
		}
	}
	d := maxv / -16
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	var q [32]uint8
	for j := 0; j < 32; j++ {
		q[j] = uint8(min(31, int8(int32(float32(x[j]*id)+16.5))))
	}
	pack5(y[2:22], &q)
}

// pack5 stores 32 five-bit values as Q5_0/Q5_1 do: fifth bits in the little-endian uint32
// qh (b[0:4]), low nibbles in b[4:20] with element j and j+16 sharing byte j.
func pack5(b []byte, q *[32]uint8) {
	var qh uint32
	for j := 0; j < 16; j++ {
		x0, x1 := q[j], q[j+16]
		b[4+j] = x0&0x0F | (x1&0x0F)<<4
		qh |= uint32(x0&0x10) >> 4 << j
		qh |= uint32(x1&0x10) >> 4 << (j + 16)
	}
	binary.LittleEndian.PutUint32(b, qh)
}

// unpack5 reads the 32 five-bit values stored by pack5.
func unpack5(q *[32]uint8, b []byte) {
	qh := binary.LittleEndian.Uint32(b)
	for j := 0; j < 16; j++ {
		q[j] = b[4+j]&0x0F | uint8(qh>>j<<4)&0x10
		q[j+16] = b[4+j]>>4 | uint8(qh>>(j+12))&0x10
	}
}

// Dequantize is dequantize_row_q5_0.
func (c q5_0Codec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	var q [32]uint8
	for ib := 0; ib < len(dst)/32; ib++ {
		y, out := src[22*ib:22*ib+22], dst[32*ib:32*ib+32]
		d := getF16(y)
		unpack5(&q, y[2:])
		for j := 0; j < 32; j++ {
			out[j] = float32(int(q[j])-16) * d
		}
	}
}
