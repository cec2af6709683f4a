package kernels

import (
	"encoding/binary"
	"math"

	"github.com/gquant/gquant/formats/gguf"
)

// kvaluesIQ4NL is the IQ4_NL codebook (ggml-common.h kvalues_iq4nl).
var kvaluesIQ4NL = gguf.KValuesIQ4NL

// dequantRow decodes one row of type t from src into dst (len(dst) elements), as ggml's
// dequantize_row_* functions do. src must hold the row's bytes.
func dequantRow(t WType, dst []float32, src []byte) {
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = f16ToF32(le16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = bf16ToF32(le16(src[2*i:]))
		}
	case Q4_0, IQ4_NL:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[18*b : 18*b+18]
			d := f16ToF32(le16(blk))
			y := dst[32*b : 32*b+32]
			for j := 0; j < 16; j++ {
				q := blk[2+j]
				if t == Q4_0 {
					y[j] = float32(int(q&15)-8) * d
					y[j+16] = float32(int(q>>4)-8) * d
				} else {
					y[j] = d * float32(kvaluesIQ4NL[q&15])
					y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
				}
			}
		}
	case Q4_1:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[20*b : 20*b+20]
			d, m := f16ToF32(le16(blk)), f16ToF32(le16(blk[2:]))
			y := dst[32*b : 32*b+32]
			for j := 0; j < 16; j++ {
				q := blk[4+j]
				y[j] = float32(float32(q&15)*d) + m
				y[j+16] = float32(float32(q>>4)*d) + m
			}
		}
	case Q5_0, Q5_1:
		bs, off := 22, 2
		if t == Q5_1 {
			bs, off = 24, 4
		}
		for b := 0; b < len(dst)/32; b++ {
			blk := src[bs*b : bs*b+bs]
			d := f16ToF32(le16(blk))
			var m float32
			if t == Q5_1 {
				m = f16ToF32(le16(blk[2:]))
			}
			qh := binary.LittleEndian.Uint32(blk[off:])
			qs := blk[off+4:]
			y := dst[32*b : 32*b+32]
			for j := 0; j < 16; j++ {
				x0 := int(qs[j]&15) | int((qh>>j)<<4)&0x10
				x1 := int(qs[j]>>4) | int(qh>>(j+12))&0x10
				if t == Q5_0 {
					y[j] = float32(x0-16) * d
					y[j+16] = float32(x1-16) * d
				} else {
					y[j] = float32(float32(x0)*d) + m
					y[j+16] = float32(float32(x1)*d) + m
				}
			}
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[34*b : 34*b+34]
			d := f16ToF32(le16(blk))
			for j := 0; j < 32; j++ {
				dst[32*b+j] = float32(int8(blk[2+j])) * d
			}
		}
	case Q4_K, Q5_K:
		bs := 144
		if t == Q5_K {
			bs = 176
		}
		for b := 0; b < len(dst)/256; b++ {
			blk := src[bs*b : bs*b+bs]
			d, dmin := f16ToF32(le16(blk)), f16ToF32(le16(blk[2:]))
			sc := blk[4:16]
			qs, qh := blk[16:], []byte(nil)
			if t == Q5_K {
				qh, qs = blk[16:48], blk[48:]
			}
			y := dst[256*b : 256*b+256]
			for j := 0; j < 4; j++ { // 64 elements: two sub-blocks sharing 32 bytes
				s1, m1 := scaleMinK4(2*j, sc)
				s2, m2 := scaleMinK4(2*j+1, sc)
				d1, mm1 := d*float32(s1), dmin*float32(m1)
				d2, mm2 := d*float32(s2), dmin*float32(m2)
				for l := 0; l < 32; l++ {
					q0, q1 := int(qs[32*j+l]&15), int(qs[32*j+l]>>4)
					if qh != nil {
						q0 += int(qh[l]>>(2*j)&1) << 4
						q1 += int(qh[l]>>(2*j+1)&1) << 4
					}
					y[64*j+l] = float32(d1*float32(q0)) - mm1
					y[64*j+32+l] = float32(d2*float32(q1)) - mm2
				}
			}
		}
	case Q6_K:
		for b := 0; b < len(dst)/256; b++ {
			blk := src[210*b : 210*b+210]
			d := f16ToF32(le16(blk[208:]))
			y := dst[256*b : 256*b+256]
			for n := 0; n < 2; n++ {
				ql, qh := blk[64*n:], blk[128+32*n:]
				sc := blk[192+8*n:]
				for l := 0; l < 32; l++ {
					is := l / 16
					q1 := int(ql[l]&15|(qh[l]>>0&3)<<4) - 32
					q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
					q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
					q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
					y[128*n+l] = float32(d*float32(int8(sc[is]))) * float32(q1)
					y[128*n+l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
					y[128*n+l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
					y[128*n+l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
				}
			}
		}
	case Q2_K:
		for b := 0; b < len(dst)/256; b++ {
			blk := src[84*b : 84*b+84]
			sc, qs := blk[:16], blk[16:80]
			d, dmin := f16ToF32(le16(blk[80:])), f16ToF32(le16(blk[82:]))
			y := dst[256*b : 256*b+256]
			for c := 0; c < 2; c++ {
				for j := 0; j < 4; j++ {
					for h := 0; h < 2; h++ {
						s := sc[8*c+2*j+h]
						dl, ml := d*float32(s&15), dmin*float32(s>>4)
						for l := 0; l < 16; l++ {
							y[128*c+32*j+16*h+l] = float32(dl*float32(qs[32*c+16*h+l]>>(2*j)&3)) - ml
						}
					}
				}
			}
		}
	case Q3_K:
		for b := 0; b < len(dst)/256; b++ {
			blk := src[110*b : 110*b+110]
			hm, qs := blk[:32], blk[32:96]
			d := f16ToF32(le16(blk[108:]))
			y := dst[256*b : 256*b+256]
			for c := 0; c < 2; c++ {
				for j := 0; j < 4; j++ {
					m := byte(1) << (4*c + j)
					for h := 0; h < 2; h++ {
						dl := d * float32(q3KScale(blk[96:108], 8*c+2*j+h)-32)
						for l := 16 * h; l < 16*h+16; l++ {
							v := int(qs[32*c+l] >> (2 * j) & 3)
							if hm[l]&m == 0 {
								v -= 4
							}
							y[128*c+32*j+l] = dl * float32(v)
						}
					}
				}
			}
		}
	case IQ4_XS:
		for b := 0; b < len(dst)/256; b++ {
			blk := src[136*b : 136*b+136]
			d := f16ToF32(le16(blk))
			y := dst[256*b : 256*b+256]
			for ib := 0; ib < 8; ib++ {
				dl := d * float32(iq4XSScale(blk, ib)-32)
				qs := blk[8+16*ib : 8+16*ib+16]
				for j := 0; j < 16; j++ {
					y[32*ib+j] = dl * float32(kvaluesIQ4NL[qs[j]&15])
					y[32*ib+j+16] = dl * float32(kvaluesIQ4NL[qs[j]>>4])
				}
			}
		}
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0:
		dequantIQ(t, dst, src)
	default:
		panic("kernels: dequantRow: unsupported type " + t.String())
	}
}

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j from a K-quant's 12 scale bytes
// (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// q3KScale returns Q3_K's 6-bit scale j (0..15, before the −32) from its 12 packed bytes: low
// four bits in the nibbles of bytes 0-7 (j < 8: low nibble of byte j, else high nibble of byte
// j−8), high two bits in bytes 8-11 (bits 2·(j/4) of byte 8 + j mod 4).
func q3KScale(sc []byte, j int) int {
	lo := int(sc[j%8]) >> (4 * (j / 8)) & 15
	hi := int(sc[8+j%4]) >> (2 * (j / 4)) & 3
	return lo | hi<<4
}

// iq4XSScale returns IQ4_XS's 6-bit scale of sub-block ib (0..7, before the −32): low four bits
// in nibble ib of scales_l (bytes 4-7 of the block), high two in bits 2·ib of scales_h (bytes
// 2-3).
func iq4XSScale(blk []byte, ib int) int {
	lo := int(blk[4+ib/2]) >> (4 * (ib % 2)) & 15
	hi := int(le16(blk[2:])) >> (2 * ib) & 3
	return lo | hi<<4
}
