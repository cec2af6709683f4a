package kernels

import (
	"math"
	"sync"
	"unsafe"
)

// Activations of group matrices (group.go). The codes and scales are the same in every
// implementation; only where they are stored differs (groupLayout), so that each kernel reads
// them in the order it consumes them.

// groupLayout is where an Acts of a group kind keeps its codes.
type groupLayout uint8

const (
	// glNatural: token-major, natural order. a16: g16[t·cols + k], gd[t·nb + b] (nb = cols/unit
	// blocks per token); a8: g8[t·cols + k], gd[t]. Read by the generic code.
	glNatural groupLayout = iota
	// glChunk: chunk-major for the AVX-512 kernels, so that the tokens of a GEMM tile sit
	// together and a token's displacement is a constant. Chunks of 8 elements (int4) or 4
	// (int8): chunk c of token t at index c·nTok + t. a16 codes int16 in the VPDPWSSD pair
	// order of the weight dwords (int4: k0 k2 k4 k6 k1 k3 k5 k7; int8: k0 k2 k1 k3); a8 codes
	// int8 in natural order. gd: a16 d of block b at b·nTok + t, a8 d at t; gs: Σa of block
	// (a16) or unit (a8: int4 G, int8 the row) b at b·nTok + t.
	glChunk
	// glAMX: token-major natural order for the A tiles of the AMX kernels (nTok ≥
	// amxMinTokens). a16: the codes split as a = 256·h + l, h = a>>8 in gh (int8) and l = a&255
	// in gl (uint8), gh[t·cols + k]; gd of block b at b·nPad + t (nPad: nTok rounded up to 16,
	// zeros past nTok). a8: g8[t·cols + k], gd[t] (padded likewise).
	glAMX
)

// groupSize sizes a (kind, grp, nTok, cols set) for the current implementation's layout.
func (a *Acts) groupSize() {
	lay := glNatural
	if current.groupLayout != nil {
		lay = current.groupLayout(a.kind, a.grp, a.nTok, a.cols)
	}
	a.groupSizeFor(lay)
}

// groupPrepareLayout prepares X (nTok tokens) for m in layout lay with implementation im's
// quantizers, whatever the current implementation would choose (the AMX self-check).
func groupPrepareLayout(a *Acts, m *Matrix, X []float32, nTok int, lay groupLayout, im *implTable) {
	a.kind, a.impl, a.nTok, a.cols, a.grp = m.actKind(), im, nTok, m.Cols, m.groupActs()
	a.groupSizeFor(lay)
	a.groupConvert(X, 0, nTok)
}

// groupSizeFor sizes a's buffers for layout lay. glAMX pads the codes (zeros) and scales (0)
// to whole tiles of 16 tokens.
func (a *Acts) groupSizeFor(lay groupLayout) {
	a.glay = lay
	n, nb := a.nTok*a.cols, a.cols/a.grp.unit
	nPad := (a.nTok + 15) &^ 15
	a.gs = a.gs[:0]
	switch {
	case a.kind == actG16 && a.glay == glAMX:
		a.gh, a.gl = growU8(a.gh, nPad*a.cols), growU8(a.gl, nPad*a.cols)
		clear(a.gh[n:])
		clear(a.gl[n:])
		a.gd = growF32(a.gd, nb*nPad)
		clear(a.gd)
	case a.kind == actG16:
		a.g16 = growI16(a.g16, n)
		a.gd = growF32(a.gd, nb*a.nTok)
	case a.glay == glAMX:
		a.g8 = growI8(a.g8, nPad*a.cols)
		clear(a.g8[n:])
		a.gd = growF32(a.gd, nPad)
		clear(a.gd)
	default:
		a.g8 = growI8(a.g8, n)
		a.gd = growF32(a.gd, a.nTok)
	}
	if a.glay == glChunk {
		a.gs = growI32(a.gs, nb*a.nTok)
	}
}

// groupScratch holds one token's codes, scales and sums while they are scattered into a
// multi-token layout.
type groupScratch struct {
	q16 []int16
	q8  []int8
	d   []float32
	s   []int32
}

var groupScratchPool = sync.Pool{New: func() any { return new(groupScratch) }}

// Orders of 16 consecutive a16 codes: as they are (glNatural, glAMX), and the VPDPWSSD pair
// orders of glChunk (int4 per 8: k0 k2 k4 k6 k1 k3 k5 k7; int8 per 4: k0 k2 k1 k3).
var (
	groupPermNone = [16]uint16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	groupPermI4   = [16]uint16{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}
	groupPermI8   = [16]uint16{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}
)

// groupQuant16Go is groupQuantA16 with the codes of each 16 (4 when the block is shorter)
// reordered by perm (dst[p] = src[perm[p]]): the reference of implTable.groupQuant16.
func groupQuant16Go(q []int16, d []float32, sums []int32, x []float32, unit int, perm *[16]uint16) {
	groupQuantA16(q, d, sums, x, unit)
	if perm == &groupPermNone {
		return
	}
	var tmp [16]int16
	for b := 0; b < len(d); b++ {
		qb := q[b*unit : (b+1)*unit]
		for o := 0; o < unit; o += 16 {
			v := qb[o:min(o+16, unit)]
			copy(tmp[:], v)
			for p := range v {
				v[p] = tmp[perm[p]]
			}
		}
	}
}

// groupQuant8Go is groupQuantA8 with the code sums of each unit written to sums (when not nil):
// the reference of implTable.groupQuant8.
func groupQuant8Go(q []int8, sums []int32, x []float32, unit int) float32 {
	d := groupQuantA8(q, x)
	for u := range sums {
		var s int32
		for _, v := range q[u*unit : (u+1)*unit] {
			s += int32(v)
		}
		sums[u] = s
	}
	return d
}

// groupSplitGo splits a16 codes as a = 256·h + l into hi (h = a>>8) and lo (l = a&255): the
// reference of implTable.groupSplit.
func groupSplitGo(q []int16, hi, lo []byte) {
	for k, v := range q {
		hi[k], lo[k] = byte(v>>8), byte(v)
	}
}

// groupConvert quantizes tokens [t0,t1) of X into a (sized by groupSize).
func (a *Acts) groupConvert(X []float32, t0, t1 int) {
	cols, n, unit := a.cols, a.nTok, a.grp.unit
	nb := cols / unit
	q16, q8, split := groupQuant16Go, groupQuant8Go, groupSplitGo
	if im := a.impl; im.groupQuant16 != nil {
		q16, q8, split = im.groupQuant16, im.groupQuant8, im.groupSplit
	}
	w, perm := 8, &groupPermI4 // elements per chunk (glChunk) and their a16 order
	if a.grp.bits == 8 {
		w, perm = 4, &groupPermI8
	}
	var sc *groupScratch
	if a.glay == glAMX || a.glay == glChunk && n > 1 {
		sc = groupScratchPool.Get().(*groupScratch)
		defer groupScratchPool.Put(sc)
		sc.q16, sc.q8 = growI16(sc.q16, cols), growI8(sc.q8, cols)
		sc.d, sc.s = growF32(sc.d, nb), growI32(sc.s, nb)
	}
	nPad := (n + 15) &^ 15
	for t := t0; t < t1; t++ {
		x := X[t*cols : (t+1)*cols]
		switch a16 := a.kind == actG16; {
		case a16 && a.glay == glNatural:
			q16(a.g16[t*cols:(t+1)*cols], a.gd[t*nb:(t+1)*nb], nil, x, unit, &groupPermNone)
		case a16 && a.glay == glAMX:
			q16(sc.q16, sc.d, nil, x, unit, &groupPermNone)
			split(sc.q16, a.gh[t*cols:(t+1)*cols], a.gl[t*cols:(t+1)*cols])
			for b, d := range sc.d {
				a.gd[b*nPad+t] = d
			}
		case a16 && n == 1: // glChunk of one token: the natural places
			q16(a.g16[:cols], a.gd[:nb], a.gs[:nb], x, unit, perm)
		case a16:
			q16(sc.q16, sc.d, sc.s, x, unit, perm)
			if w == 8 {
				for c := 0; c < cols/8; c++ { // 16 bytes per chunk
					o := (c*n + t) * 8
					*(*[2]uint64)(unsafe.Pointer(&a.g16[o])) = *(*[2]uint64)(unsafe.Pointer(&sc.q16[8*c]))
				}
			} else {
				for c := 0; c < cols/4; c++ { // 8 bytes per chunk
					o := (c*n + t) * 4
					*(*uint64)(unsafe.Pointer(&a.g16[o])) = *(*uint64)(unsafe.Pointer(&sc.q16[4*c]))
				}
			}
			for b := range nb {
				a.gd[b*n+t], a.gs[b*n+t] = sc.d[b], sc.s[b]
			}
		case a.glay == glNatural || a.glay == glAMX:
			a.gd[t] = q8(a.g8[t*cols:(t+1)*cols], nil, x, unit)
		case n == 1:
			a.gd[0] = q8(a.g8[:cols], a.gs[:nb], x, unit)
		default:
			a.gd[t] = q8(sc.q8, sc.s, x, unit)
			if w == 8 {
				for c := 0; c < cols/8; c++ {
					*(*uint64)(unsafe.Pointer(&a.g8[(c*n+t)*8])) = *(*uint64)(unsafe.Pointer(&sc.q8[8*c]))
				}
			} else {
				for c := 0; c < cols/4; c++ {
					*(*uint32)(unsafe.Pointer(&a.g8[(c*n+t)*4])) = *(*uint32)(unsafe.Pointer(&sc.q8[4*c]))
				}
			}
			for b := range nb {
				a.gs[b*n+t] = sc.s[b]
			}
		}
	}
}

// absMax returns max |v| over x, NaN when x holds a NaN (the builtin max propagates it).
func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, math.Float32frombits(math.Float32bits(v)&^(1<<31)))
	}
	return m
}

// finite reports whether f is neither infinite nor NaN.
func finite(f float32) bool { return f-f == 0 }

// groupQuantA16 quantizes x (a whole number of blocks of unit elements) into 16-bit codes:
// per block b, d[b] = float32(amax/32767) and q = clamp(RoundToEven(float32(x/d)), ±32767); d
// = 0 gives zero codes, a non-finite amax d = NaN and zero codes. When sums is not nil it
// receives each block's Σq.
func groupQuantA16(q []int16, d []float32, sums []int32, x []float32, unit int) {
	for b := range d {
		xb, qb := x[b*unit:(b+1)*unit], q[b*unit:(b+1)*unit]
		amax := absMax(xb)
		db := amax / 32767
		if !finite(amax) {
			db = float32(math.NaN())
		}
		d[b] = db
		if db == 0 || db != db {
			clear(qb)
			if sums != nil {
				sums[b] = 0
			}
			continue
		}
		var s int32
		for k, v := range xb {
			r := math.RoundToEven(float64(v / db))
			r = max(-32767, min(32767, r))
			qb[k] = int16(r)
			s += int32(r)
		}
		if sums != nil {
			sums[b] = s
		}
	}
}

// groupQuantA8 quantizes the row x into 8-bit codes with one scale d = float32(amax/127), q =
// clamp(RoundToEven(float32(x/d)), ±127), and returns d (0: zero codes; NaN, with zero codes,
// when amax is not finite).
func groupQuantA8(q []int8, x []float32) float32 {
	amax := absMax(x)
	d := amax / 127
	if !finite(amax) {
		d = float32(math.NaN())
	}
	if d == 0 || d != d {
		clear(q)
		return d
	}
	for k, v := range x {
		r := math.RoundToEven(float64(v / d))
		q[k] = int8(max(-127, min(127, r)))
	}
	return d
}
