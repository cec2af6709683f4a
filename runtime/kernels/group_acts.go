package kernels

import (
	"math"
	"sync"
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
	a.glay = glNatural
	if current.groupLayout != nil {
		a.glay = current.groupLayout(a.kind, a.grp, a.nTok, a.cols)
	}
	n, nb := a.nTok*a.cols, a.cols/a.grp.unit
	nPad := (a.nTok + 15) &^ 15
	a.gs = a.gs[:0]
	switch {
	case a.kind == actG16 && a.glay == glAMX:
		a.gh, a.gl = growU8(a.gh, n), growU8(a.gl, n)
		a.gd = growF32(a.gd, nb*nPad)
		clear(a.gd)
	case a.kind == actG16:
		a.g16 = growI16(a.g16, n)
		a.gd = growF32(a.gd, nb*a.nTok)
	case a.glay == glAMX:
		a.g8 = growI8(a.g8, n)
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

// groupScratch holds one token's natural-order codes while they are scattered into a chunk or
// AMX layout.
type groupScratch struct {
	q16 []int16
	q8  []int8
	d   []float32
	s   []int32
}

var groupScratchPool = sync.Pool{New: func() any { return new(groupScratch) }}

// groupConvert quantizes tokens [t0,t1) of X into a (sized by groupSize).
func (a *Acts) groupConvert(X []float32, t0, t1 int) {
	cols, n, unit := a.cols, a.nTok, a.grp.unit
	nb := cols / unit
	var sc *groupScratch
	if a.glay != glNatural {
		sc = groupScratchPool.Get().(*groupScratch)
		defer groupScratchPool.Put(sc)
		sc.q16, sc.q8 = growI16(sc.q16, cols), growI8(sc.q8, cols)
		sc.d, sc.s = growF32(sc.d, nb), growI32(sc.s, nb)
	}
	nPad := (n + 15) &^ 15
	for t := t0; t < t1; t++ {
		x := X[t*cols : (t+1)*cols]
		if a.kind == actG16 {
			if a.glay == glNatural {
				groupQuantA16(a.g16[t*cols:(t+1)*cols], a.gd[t*nb:(t+1)*nb], nil, x, unit)
				continue
			}
			groupQuantA16(sc.q16, sc.d, sc.s, x, unit)
			if a.glay == glAMX {
				gh, gl := a.gh[t*cols:(t+1)*cols], a.gl[t*cols:(t+1)*cols]
				for k, v := range sc.q16 {
					gh[k], gl[k] = byte(v>>8), byte(v)
				}
				for b, d := range sc.d {
					a.gd[b*nPad+t] = d
				}
				continue
			}
			// glChunk.
			w := 8
			perm := &[8]int{0, 2, 4, 6, 1, 3, 5, 7}
			if a.grp.bits == 8 {
				w, perm = 4, &[8]int{0, 2, 1, 3}
			}
			for c := 0; c < cols/w; c++ {
				dst := a.g16[(c*n+t)*w : (c*n+t+1)*w]
				src := sc.q16[c*w : (c+1)*w]
				for p := range dst {
					dst[p] = src[perm[p]]
				}
			}
			for b := range nb {
				a.gd[b*n+t], a.gs[b*n+t] = sc.d[b], sc.s[b]
			}
			continue
		}
		// a8.
		if a.glay == glNatural {
			a.gd[t] = groupQuantA8(a.g8[t*cols:(t+1)*cols], x)
			continue
		}
		d := groupQuantA8(sc.q8, x)
		if a.glay == glAMX {
			copy(a.g8[t*cols:(t+1)*cols], sc.q8)
			a.gd[t] = d
			continue
		}
		a.gd[t] = d
		w := 8
		if a.grp.bits == 8 {
			w = 4
		}
		for c := 0; c < cols/w; c++ {
			copy(a.g8[(c*n+t)*w:(c*n+t+1)*w], sc.q8[c*w:(c+1)*w])
		}
		for b := range nb {
			var s int32
			for _, v := range sc.q8[b*unit : (b+1)*unit] {
				s += int32(v)
			}
			a.gs[b*n+t] = s
		}
	}
	_ = nPad
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
