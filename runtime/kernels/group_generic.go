package kernels

import (
	"math"
	"sync"
	"unsafe"
)

// groupGenericScratch is one worker's float and integer sums of a block's 16 rows for every
// token (groupMulGeneric).
type groupGenericScratch struct {
	acc []float32
	I   []int32
}

var groupGenericPool = sync.Pool{New: func() any { return new(groupGenericScratch) }}

// groupMulGeneric is the reference product of a group matrix (group.go's arithmetic) over the
// packed layout and natural-order activations (glNatural): whole 16-row blocks are computed,
// and the rows of [r0,r1) stored. A block's weights are decoded one activation block (a16) or
// unit (a8) at a time and meet every token.
func groupMulGeneric(m *Matrix, Y []float32, a *Acts, r0, r1 int) {
	g, cols, n := m.grp, a.cols, a.nTok
	w := new([16][512]int32)
	sc := groupGenericPool.Get().(*groupGenericScratch)
	defer groupGenericPool.Put(sc)
	sc.acc, sc.I = growF32(sc.acc, 16*n), growI32(sc.I, 16*n)
	acc, I := sc.acc, sc.I
	unit, step := a.grp.unit, a.grp.unit
	if a.kind == actG8 && g.f.Bits == 8 {
		step = min(512, cols) // int8 rows are summed in pieces of 512 (cols is a multiple of 4)
	}
	for b := r0 / 16; 16*b < r1; b++ {
		blk := m.Data[b*g.blockBytes : (b+1)*g.blockBytes]
		clear(acc)
		clear(I)
		for k0 := 0; k0 < cols; k0 += step {
			k1 := min(k0+step, cols)
			groupWeights(g, blk, k0, k1-k0, w)
			for t := 0; t < n; t++ {
				It := I[16*t : 16*t+16]
				if a.kind == actG16 {
					q := a.g16[t*cols+k0 : t*cols+k1]
					for j := range It {
						wj := w[j][:len(q)]
						for i, v := range q {
							It[j] += wj[i] * int32(v)
						}
					}
				} else {
					q := a.g8[t*cols+k0 : t*cols+k1]
					for j := range It {
						wj := w[j][:len(q)]
						for i, v := range q {
							It[j] += wj[i] * int32(v)
						}
					}
				}
			}
			if k1%unit != 0 {
				continue // an int8 a8 row goes on
			}
			u := k0 / unit // the activation block (a16) or unit (a8) just completed
			su := u        // its scale unit
			if g.f.Bits == 8 {
				su = 0
			}
			for t := 0; t < n; t++ {
				for j := 0; j < 16; j++ {
					s, Ij := groupScale(g, blk, su, j), I[16*t+j]
					if a.kind == actG16 {
						// y = float32(y + float32(float32(I)·float32(s·d))).
						fac := float32(s * a.gd[t*(cols/unit)+u])
						acc[16*t+j] = float32(acc[16*t+j] + float32(float32(Ij)*fac))
					} else {
						// acc = float32(acc + float32(float32(I)·s)).
						acc[16*t+j] = float32(acc[16*t+j] + float32(float32(Ij)*s))
					}
					I[16*t+j] = 0
				}
			}
		}
		for t := 0; t < n; t++ {
			for j := max(r0-16*b, 0); j < min(r1-16*b, 16); j++ {
				y := acc[16*t+j]
				if a.kind == actG8 {
					y = float32(y * a.gd[t]) // y = float32(acc·d)
				}
				Y[t*m.Rows+16*b+j] = y
			}
		}
	}
}

// groupWeights returns the 16 lanes' integer weights w = c − z of elements [k0, k0+n) of a
// block into w (16 rows of n), reading unit u's zero points (int4 asymmetric).
func groupWeights(g *groupInfo, blk []byte, k0, n int, w *[16][512]int32) {
	word := func(o int) uint32 { return *(*uint32)(unsafe.Pointer(&blk[o])) }
	if g.f.Bits == 8 {
		for c := k0 / 4; c < (k0+n)/4; c++ {
			for j := 0; j < 16; j++ {
				x := word(64 + 64*c + 4*j)
				for i := 0; i < 4; i++ {
					w[j][4*c+i-k0] = int32(x>>(8*i)&255) - 128
				}
			}
		}
		return
	}
	u := k0 / g.f.Group
	for j := 0; j < 16; j++ {
		z := int32(8)
		if !g.f.Signed {
			z = int32(blk[64*g.units+16*u+j])
		}
		for c := k0 / 8; c < (k0+n)/8; c++ {
			x := word(g.hdr + 64*c + 4*j)
			for i := 0; i < 4; i++ {
				w[j][8*c+i-k0] = int32(x>>(8*i)&15) - z
				w[j][8*c+i+4-k0] = int32(x>>(8*i+4)&15) - z
			}
		}
	}
}

// groupScale returns lane j's scale of unit u.
func groupScale(g *groupInfo, blk []byte, u, j int) float32 {
	if g.f.Bits == 8 {
		u = 0
	}
	return math.Float32frombits(*(*uint32)(unsafe.Pointer(&blk[64*u+4*j])))
}
