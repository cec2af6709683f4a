package quantize

import "github.com/gquant/gquant/formats/gguf"

// kvaluesIQ4NL is ggml's kvalues_iq4nl, the non-linear 4-bit grid of IQ4_NL and IQ4_XS.
var kvaluesIQ4NL = gguf.KValuesIQ4NL

// iq4NLCodec is IQ4_NL: blocks of 32, fp16 d then 16 bytes of nibbles laid out as in Q4_0, each
// indexing kvaluesIQ4NL; w = d·kvalues[q].
type iq4NLCodec struct{ blockCodec }

func init() { register(iq4NLCodec{blockCodec{gguf.IQ4_NL}}) }

// Quantize is quantize_iq4_nl (quantize_row_iq4_nl_impl with ntry 7, with or without imatrix).
func (c iq4NLCodec) Quantize(dst []byte, src []float32, nrows, nPerRow int, imatrix []float32) {
	quantizeRows(c, dst, src, nrows, nPerRow, imatrix, func(dst []byte, x, qw []float32) {
		var L [32]uint8
		var scale [1]float32
		var weight [32]float32
		for ib := 0; ib < len(x)/32; ib++ {
			var bqw []float32
			if qw != nil {
				bqw = qw[32*ib : 32*ib+32]
			}
			y := dst[18*ib : 18*ib+18]
			quantizeIQ4(y[0:2], y[2:18], nil, nil, x[32*ib:32*ib+32], scale[:], weight[:], L[:], bqw, 7)
		}
	})
}

// quantizeIQ4 is quantize_row_iq4_nl_impl with block_size 32 for one super-block of len(x)
// elements (32 for IQ4_NL, 256 for IQ4_XS): dh receives the fp16 super-block scale, q4 the
// nibbles, scalesH and scalesL the 6-bit sub-block scales (IQ4_XS only; nil for IQ4_NL).
// scales (len(x)/32), weight (32) and L (len(x)) are scratch.
func quantizeIQ4(dh, q4, scalesH, scalesL []byte, x, scales, weight []float32, L []uint8, qw []float32, ntry int) {
	const blockSize = 32
	values := &kvaluesIQ4NL
	sbs := len(x)
	var sigma2 float32
	for _, v := range x {
		sigma2 += float32(v * v)
	}
	sigma2 = float32(sigma2 * (2 / float32(sbs)))
	clear(q4[:sbs/2])
	putF16(dh, 0)

	var maxScale, amaxScale float32
	for ib := 0; ib < sbs/blockSize; ib++ {
		xb := x[ib*blockSize : (ib+1)*blockSize]
		Lb := L[ib*blockSize : (ib+1)*blockSize]
		if qw != nil {
			q := qw[ib*blockSize : (ib+1)*blockSize]
			for j, v := range xb {
				weight[j] = q[j] * sqrt32(sigma2+float32(v*v))
			}
		} else {
			for j, v := range xb {
				weight[j] = float32(v * v)
			}
		}
		var amax, maxv float32
		for _, v := range xb {
			if ax := abs32(v); ax > amax {
				amax, maxv = ax, v
			}
		}
		if amax < groupMaxEps {
			scales[ib] = 0
			continue
		}
		var d float32
		if ntry > 0 {
			d = -maxv / float32(values[0])
		} else {
			d = maxv / float32(values[0])
		}
		id := 1 / d
		var sumqx, sumq2 float32
		for j, v := range xb {
			al := float32(id * v)
			l := bestIndexInt8(values, al)
			Lb[j] = uint8(l)
			q, w := float32(values[l]), weight[j]
			sumqx += float32(w * q * v)
			sumq2 += float32(w * q * q)
		}
		d = 0
		if sumq2 > 0 {
			d = sumqx / sumq2
		}
		best := d * sumqx
		for itry := -ntry; itry <= ntry; itry++ {
			id = float32(itry+int(values[0])) / maxv
			sumqx, sumq2 = 0, 0
			for j, v := range xb {
				al := float32(id * v)
				l := bestIndexInt8(values, al)
				q, w := float32(values[l]), weight[j]
				sumqx += float32(w * q * v)
				sumq2 += float32(w * q * q)
			}
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
				d = sumqx / sumq2
				best = d * sumqx
			}
		}
		scales[ib] = d
		if ad := abs32(d); ad > amaxScale {
			amaxScale, maxScale = ad, d
		}
	}

	if nb := sbs / blockSize; nb > 1 {
		var sh uint16
		d := -maxScale / 32
		putF16(dh, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for ib := 0; ib < nb; ib++ {
			l := clamp(nearestInt(id*scales[ib]), -32, 31)
			dl := float32(d * float32(l))
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			Lb := L[ib*blockSize : (ib+1)*blockSize]
			xb := x[ib*blockSize : (ib+1)*blockSize]
			for j, v := range xb {
				Lb[j] = uint8(bestIndexInt8(values, idl*v))
			}
			l += 32
			lLow, lHigh := uint8(l&0xf), uint16(l>>4)
			if ib%2 == 0 {
				scalesL[ib/2] = lLow
			} else {
				scalesL[ib/2] |= lLow << 4
			}
			sh |= lHigh << (2 * (ib % 8))
		}
		scalesH[0], scalesH[1] = byte(sh), byte(sh>>8)
	} else {
		putF16(dh, scales[0])
		if ntry > 0 {
			var id float32
			if scales[0] != 0 {
				id = 1 / scales[0]
			}
			for j, v := range x {
				L[j] = uint8(bestIndexInt8(values, id*v))
			}
		}
	}

	for i := 0; i < sbs/32; i++ {
		for j := 0; j < 16; j++ {
			q4[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}

// Dequantize is dequantize_row_iq4_nl.
func (c iq4NLCodec) Dequantize(dst []float32, src []byte) {
	checkDequantize(c, dst, src)
	for ib := 0; ib < len(dst)/32; ib++ {
		b, y := src[18*ib:18*ib+18], dst[32*ib:32*ib+32]
		d := getF16(b)
		for j := 0; j < 16; j++ {
			y[j] = d * float32(kvaluesIQ4NL[b[2+j]&0xf])
			y[j+16] = d * float32(kvaluesIQ4NL[b[2+j]>>4])
		}
	}
}
