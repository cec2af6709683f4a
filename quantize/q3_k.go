package quantize

import (
	"encoding/binary"

	"github.com/gquant/gquant/formats/gguf"
)

// q3_KCodec is Q3_K: super-blocks of 256 = 16 sub-blocks of 16 with 6-bit signed scales.
// Layout (110 bytes): hmask[32] (third bit of element j in bit j/32 of hmask[j%32]), qs[64]
// low two bits packed as in Q2_K, scales[12], fp16 d; w = d·(sc_j − 32)·(q − 4).
type q3_KCodec struct{ blockCodec }

func init() { register(q3_KCodec{blockCodec{gguf.Q3_K}}) }

// Quantize is quantize_q3_K: quantize_row_q3_K_ref (make_q3_quants) without an imatrix,
// quantize_row_q3_K_impl (make_qx_quants) with one.
func (c q3_KCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		for i := 0; i < len(x)/256; i++ {
			y, xb := dst[110*i:110*i+110], x[256*i:256*i+256]
			if qw == nil {
				quantizeBlockQ3_KRef(y, xb)
			} else {
				quantizeBlockQ3_KImpl(y, xb, qw[256*i:256*i+256])
			}
		}
	})
}

// putScaleQ3_K stores the 6-bit value l (0..63) of sub-block j into the 12 scale bytes.
func putScaleQ3_K(sc []byte, j int, l uint8) {
	if j < 8 {
		sc[j] = l & 0xF
	} else {
		sc[j-8] |= (l & 0xF) << 4
	}
	sc[j%4+8] |= (l >> 4) << (2 * (j / 4))
}

// scaleQ3_K reads the signed scale of sub-block j (−32..31) from the 12 scale bytes.
func scaleQ3_K(sc []byte, j int) int8 {
	var s int8
	if j < 8 {
		s = int8(sc[j] & 0xF)
	} else {
		s = int8(sc[j-8] >> 4)
	}
	return int8(uint8(s)|(sc[8+j%4]>>(2*(j/4))&3)<<4) - 32
}

func quantizeBlockQ3_KRef(y []byte, x []float32) {
	var L [256]int8
	var scales [16]float32
	var maxScale, amax float32
	for j := 0; j < 16; j++ {
		scales[j] = makeQ3Quants(x[16*j:16*j+16], 4, L[16*j:16*j+16])
		if s := abs32(scales[j]); s > amax {
			amax, maxScale = s, scales[j]
		}
	}
	sc := y[96:108]
	clear(sc)
	if maxScale != 0 {
		iscale := -32 / maxScale
		for j := 0; j < 16; j++ {
			l := int8(nearestInt(iscale * scales[j]))
			l = max(-32, min(31, l)) + 32
			putScaleQ3_K(sc, j, uint8(l))
		}
		putF16(y[108:], 1/iscale)
	} else {
		putF16(y[108:], 0)
	}
	finishQ3_K(y, x, &L)
}

func quantizeBlockQ3_KImpl(y []byte, x, qw []float32) {
	var L [256]int8
	var scales, weight, sw [16]float32
	var ls [16]int8
	var sumX2 float32
	for _, v := range x {
		sumX2 += float32(v * v)
	}
	sigma2 := float32(2 * sumX2 / 256)
	for j := 0; j < 16; j++ {
		xs := x[16*j : 16*j+16]
		for l, v := range xs {
			weight[l] = qw[16*j+l] * sqrt32(sigma2+float32(v*v))
		}
		var sumw float32
		for _, w := range weight {
			sumw += w
		}
		sw[j] = sumw
		scales[j] = makeQxQuants(xs, 4, L[16*j:16*j+16], weight[:])
	}
	sc := y[96:108]
	clear(sc)
	dBlock := makeQxQuants(scales[:], 32, ls[:], sw[:])
	for j := 0; j < 16; j++ {
		putScaleQ3_K(sc, j, uint8(ls[j]))
	}
	putF16(y[108:], dBlock)
	finishQ3_K(y, x, &L)
}

// finishQ3_K requantizes against the stored scales (where not zero) and packs the levels.
func finishQ3_K(y []byte, x []float32, L *[256]int8) {
	sc := y[96:108]
	d0 := getF16(y[108:])
	for j := 0; j < 16; j++ {
		d := float32(d0 * float32(scaleQ3_K(sc, j)))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			L[16*j+ii] = int8(clamp(nearestInt(x[16*j+ii]/d), -4, 3) + 4)
		}
	}
	hmask, qs := y[0:32], y[32:96]
	clear(hmask)
	m, hm := 0, uint8(1)
	for j := 0; j < 256; j++ {
		if L[j] > 3 {
			hmask[m] |= hm
			L[j] -= 4
		}
		if m++; m == 32 {
			m = 0
			hm <<= 1
		}
	}
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = uint8(L[j+l]) | uint8(L[j+l+32])<<2 | uint8(L[j+l+64])<<4 | uint8(L[j+l+96])<<6
		}
	}
}

// Dequantize is dequantize_row_q3_K.
func (c q3_KCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	var aux [4]uint32
	var scales [16]int8
	for i := 0; i < len(dst)/256; i++ {
		b, y := src[110*i:110*i+110], dst[256*i:256*i+256]
		dAll := getF16(b[108:])
		hm, q := b[0:32], b[32:96]
		aux[0] = binary.LittleEndian.Uint32(b[96:])
		aux[1] = binary.LittleEndian.Uint32(b[100:])
		tmp := binary.LittleEndian.Uint32(b[104:])
		aux[2] = (aux[0]>>4)&kmask2 | ((tmp>>4)&kmask1)<<4
		aux[3] = (aux[1]>>4)&kmask2 | ((tmp>>6)&kmask1)<<4
		aux[0] = aux[0]&kmask2 | ((tmp>>0)&kmask1)<<4
		aux[1] = aux[1]&kmask2 | ((tmp>>2)&kmask1)<<4
		for k := 0; k < 16; k++ {
			scales[k] = int8(aux[k/4] >> (8 * (k % 4)))
		}
		m := uint8(1)
		is, k := 0, 0
		for n := 0; n < 256; n += 128 {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					dl := dAll * float32(int(scales[is])-32)
					is++
					for l := 0; l < 16; l++ {
						v := int(q[16*half+l] >> shift & 3)
						if hm[16*half+l]&m == 0 {
							v -= 4
						}
						y[k] = dl * float32(v)
						k++
					}
				}
				m <<= 1
			}
			q = q[32:]
		}
	}
}
