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
	quantizeRowQkx3(x, qw, 15, func(ib int, d, m float32, L *[32]uint8) {
		y := dst[20*ib : 20*ib+20]
		putF16(y, d)
		putF16(y[2:], -m)
		for j := 0; j < 16; j++ {
			y[4+j] = L[j] | L[j+16]<<4
		}
	})
}

// quantizeRowQkx3 runs make_qkx3_quants (nmax, legacy imatrix weights) on every block of 32 of
// the row x, eight blocks at a time, and hands each block's scale, negated minimum and levels
// to put.
func quantizeRowQkx3(x, qw []float32, nmax int, put func(ib int, d, m float32, L *[32]uint8)) {
	sigma2 := rowSigma2(x)
	var weights [256]float32
	var L [256]uint8
	var ds, ms [8]float32
	p := qkxImatrix
	p.nmax = nmax
	nb := len(x) / 32
	for ib0 := 0; ib0 < nb; ib0 += 8 {
		m := min(8, nb-ib0)
		for k := 0; k < m; k++ {
			ib := ib0 + k
			legacyWeights((*[32]float32)(weights[32*k:32*k+32]), x[32*ib:32*ib+32], qw[32*ib:32*ib+32], sigma2)
		}
		qkxSearch(x[32*ib0:32*(ib0+m)], weights[:32*m], 32, L[:], ds[:], ms[:], p)
		for k := 0; k < m; k++ {
			put(ib0+k, ds[k], ms[k], (*[32]uint8)(L[32*k:32*k+32]))
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
