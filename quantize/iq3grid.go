package quantize

import (
	"math"
	"sync"

	"github.com/gquant/gquant/formats/gguf"
)

// The IQ3 encoders (IQ3_XXS, IQ3_S) quantize groups of 4 magnitudes to levels 0..7 (values
// 2l+1) and keep only the combinations on a grid of 256 or 512 points (ggml's kgrid_q3xs).
// ggml's iq3xs_init_impl builds, once per grid, a map from each of the 4096 combinations to
// its grid index and, for each combination off the grid, the list of grid points at the
// nwant smallest squared distances (2 for 256 points, 3 for 512) in (distance, index) order;
// iq3_find_best_neighbour then picks the listed point of least weighted error. iq3Lattice is
// that map and those lists, built lazily once per grid from the grid tables of
// formats/gguf (the same points, in the same order, as kgrid_256 and kgrid_512).

// iq3Lattice is one IQ3 grid with ggml's map and neighbour lists.
type iq3Lattice struct {
	// kmap is the grid index of each combination u = l0 | l1<<3 | l2<<6 | l3<<9, or -1 when u
	// is off the grid.
	kmap [4096]int16
	// levels holds the combination u of each grid point.
	levels []uint16
	// nbOff[u]..nbOff[u+1] delimit the neighbours of u in nb (none for points on the grid).
	nbOff [4097]uint32
	// nb holds the neighbour lists in ggml's order, each entry u | index<<12.
	nb []uint32
	// kmap32 is kmap for the SIMD search: the grid index of u, or ^(nbOff[u]<<6 | count)
	// for an off-grid u (lists are shorter than 64).
	kmap32 [4096]int32
}

var (
	iq3XXSLattice, iq3SLattice         *iq3Lattice
	iq3XXSLatticeOnce, iq3SLatticeOnce sync.Once
)

// iq3XXSGrid is IQ3_XXS's lattice: the 256 points of gguf.IQ3XXSGrid, whose bytes are the
// dequantization values 4, 12, 20, …, 52, 62 of the levels 0..7 (level = byte>>3).
func iq3XXSGrid() *iq3Lattice {
	iq3XXSLatticeOnce.Do(func() {
		pts := make([]uint16, len(gguf.IQ3XXSGrid))
		for k, g := range gguf.IQ3XXSGrid {
			for i := 0; i < 4; i++ {
				pts[k] |= uint16(g>>(8*i)&0xff>>3) << (3 * i)
			}
		}
		iq3XXSLattice = newIQ3Lattice(pts, 2)
	})
	return iq3XXSLattice
}

// iq3SGrid is IQ3_S's lattice: the 512 points of gguf.IQ3SGrid, whose bytes are 2l+1.
func iq3SGrid() *iq3Lattice {
	iq3SLatticeOnce.Do(func() {
		pts := make([]uint16, len(gguf.IQ3SGrid))
		for k, g := range gguf.IQ3SGrid {
			for i := 0; i < 4; i++ {
				pts[k] |= uint16(g>>(8*i)&0xff>>1) << (3 * i)
			}
		}
		iq3SLattice = newIQ3Lattice(pts, 3)
	})
	return iq3SLattice
}

// newIQ3Lattice is iq3xs_init_impl for the grid points pts (combinations u, in grid order):
// the neighbours of an off-grid u are all points at the nwant smallest distinct squared
// distances, ordered by distance then index (ggml sorts (distance, index) pairs, a total
// order, so the lists do not depend on the sort).
func newIQ3Lattice(pts []uint16, nwant int) *iq3Lattice {
	lat := &iq3Lattice{levels: pts}
	for u := range lat.kmap {
		lat.kmap[u] = -1
	}
	for k, u := range pts {
		lat.kmap[u] = int16(k)
	}
	d2 := make([]int32, len(pts))
	var dist []int32
	for u := 0; u < 4096; u++ {
		lat.nbOff[u] = uint32(len(lat.nb))
		if lat.kmap[u] >= 0 {
			continue
		}
		for j, p := range pts {
			var d int32
			for i := 0; i < 4; i++ {
				// Values 2l+1: the difference of two is twice that of their levels.
				e := 2 * (int32(p>>(3*i)&7) - int32(u>>(3*i)&7))
				d += e * e
			}
			d2[j] = d
		}
		// The nwant smallest distinct distances, in increasing order.
		dist = dist[:0]
		for range nwant {
			next := int32(math.MaxInt32)
			for _, d := range d2 {
				if d < next && (len(dist) == 0 || d > dist[len(dist)-1]) {
					next = d
				}
			}
			if next == math.MaxInt32 {
				break
			}
			dist = append(dist, next)
		}
		for _, want := range dist {
			for j, d := range d2 {
				if d == want {
					lat.nb = append(lat.nb, uint32(pts[j])|uint32(j)<<12)
				}
			}
		}
	}
	lat.nbOff[4096] = uint32(len(lat.nb))
	for u, k := range lat.kmap {
		if k >= 0 {
			lat.kmap32[u] = int32(k)
		} else {
			lat.kmap32[u] = ^int32(lat.nbOff[u]<<6 | (lat.nbOff[u+1] - lat.nbOff[u]))
		}
	}
	return lat
}

// iq3Block is the scratch of one 32-element sub-block of quantize_row_iq3_xxs_impl and
// quantize_row_iq3_s_impl. The SIMD trial kernel (iq3search_amd64.s) reads and writes it
// through the offsets in go_asm.h.
type iq3Block struct {
	// weight, xval, waux are ggml's; wx is weight·xval, the same product in every trial.
	weight, xval, waux, wx [32]float32
	L, Laux                [32]uint8
	onGrid, onAux          [8]bool
	signs                  [4]uint8
	index                  [8]uint16 // grid index of each group of 4 after the search
	// scaledQ is bestNeighbour's scale·q per level.
	scaledQ [8]float32

	// The SIMD kernel's pass of up to 16 trials, one per lane: the inverse scale id and
	// scale 1/id of each (inputs), the lattice, and per trial the level of each element,
	// which groups were on the grid (bit lane of onMask[k]) and Σw·x·q, Σw·q².
	id, tscale   [16]float32
	kmap         *int32
	nb           *uint32
	levels       [32][16]int32
	onMask       [8]uint16
	sumqx, sumq2 [16]float32
}

// iq3Params are the differences between the two encoders' sub-block searches.
type iq3Params struct {
	xxs  bool // IQ3_XXS: even sign count, GROUP_MAX_EPS_IQ3_XXS, fallback only off the grid
	ntry int  // trial scales (15 + is·0.2)/max for is in −ntry..ntry
}

// groupMaxEpsIQ3XXS is GROUP_MAX_EPS_IQ3_XXS.
const groupMaxEpsIQ3XXS = 1e-8

// bestNeighbour is iq3_find_best_neighbour for the off-grid combination u of group k at the
// scale whose products scale·(2l+1) are b.scaledQ: it stores the levels of the listed grid
// point of least Σ w·(scale·q − x)² (the first on a tie) in L[4k:4k+4] and returns its
// index. The errors are ggml's (same operations, same order), with the products scale·q
// taken from b.scaledQ. Where ggml asserts because no error is
// below FLT_MAX (non-finite inputs), the first neighbour is taken.
func (lat *iq3Lattice) bestNeighbour(b *iq3Block, u, k int, L *[32]uint8) int {
	sq := &b.scaledQ
	x := (*[4]float32)(b.xval[4*k : 4*k+4])
	w := (*[4]float32)(b.waux[4*k : 4*k+4])
	x0, x1, x2, x3 := x[0], x[1], x[2], x[3]
	w0, w1, w2, w3 := w[0], w[1], w[2], w[3]
	nb := lat.nb[lat.nbOff[u]:lat.nbOff[u+1]]
	best, bestD2 := nb[0], float32(maxFloat32)
	for _, e := range nb {
		d0 := sq[e&7] - x0
		d1 := sq[e>>3&7] - x1
		d2 := sq[e>>6&7] - x2
		d3 := sq[e>>9&7] - x3
		s := float32(float32(w0*d0)*d0) + float32(float32(w1*d1)*d1)
		s += float32(float32(w2*d2) * d2)
		s += float32(float32(w3*d3) * d3)
		// Branch-free "if s < bestD2 { bestD2, best = s, e }": which neighbour wins is
		// data-dependent, so a branch would often be mispredicted.
		var m uint32
		if s < bestD2 {
			m = ^uint32(0)
		}
		best ^= (best ^ e) & m
		bestD2 = math.Float32frombits(math.Float32bits(bestD2) ^ (math.Float32bits(bestD2)^math.Float32bits(s))&m)
	}
	for i := 0; i < 4; i++ {
		L[4*k+i] = uint8(best >> (3 * i) & 7)
	}
	return int(best >> 12)
}

// setScale prepares bestNeighbour for a scale: scaledQ[l] = scale·(2l+1), as ggml's
// scale*q.
func (b *iq3Block) setScale(scale float32) {
	for l := 0; l < 8; l++ {
		b.scaledQ[l] = scale * float32(2*l+1)
	}
}

// iq3MinLanes is the fewest remaining trials worth a SIMD kernel call (measured: a call
// costs about as much as 4 or 5 trials of the Go loop).
var iq3MinLanes = 4

// iq3ID is ggml's inverse trial scale (2·kMaxQ − 1 + is·0.2)/max.
func iq3ID(is int, mx float32) float32 {
	return (15 + float32(float32(is)*0.2)) / mx
}

// trials runs ggml's trial scales, is = −ntry..ntry in order: each puts the groups on their
// nearest levels, or on the best listed neighbour when those are off the grid, and the
// first trial of largest Σ(w·x·q)²/Σw·q² is kept (b.L, b.onGrid). It returns the
// scale, max/15 when no trial is kept.
func (lat *iq3Lattice) trials(b *iq3Block, p iq3Params, mx float32) float32 {
	const kMaxQ = 8
	scale := mx / (2*kMaxQ - 1)
	var best float32
	b.onGrid = [8]bool{}
	if p.xxs {
		b.onGrid = [8]bool{true, true, true, true, true, true, true, true}
	}
	if useSIMDSearch {
		return lat.trialsBySIMD(b, p, mx, scale)
	}
	for is := -p.ntry; is <= p.ntry; is++ {
		id := iq3ID(is, mx)
		b.setScale(1 / id)
		for k := 0; k < 8; k++ {
			x := (*[4]float32)(b.xval[4*k : 4*k+4])
			u := 0
			for i := 0; i < 4; i++ {
				l := clamp(nearestInt(0.5*(float32(id*x[i])-1)), 0, kMaxQ-1)
				b.Laux[4*k+i] = uint8(l)
				u |= l << (3 * i)
			}
			b.onAux[k] = lat.kmap[u] >= 0
			if !b.onAux[k] {
				lat.bestNeighbour(b, u, k, &b.Laux)
			}
		}
		var sumqx, sumq2 float32
		for i, l := range b.Laux {
			q := float32(2*int(l) + 1)
			sumqx += float32(b.wx[i] * q)
			sumq2 += float32(float32(b.weight[i]*q) * q)
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			scale = sumqx / sumq2
			best = scale * sumqx
			b.L = b.Laux
			b.onGrid = b.onAux
		}
	}
	return scale
}

// trialsBySIMD is trials on the SIMD kernel, 16 trials per call (the spare lanes of the last
// call repeat its last trial); scale is max/15.
func (lat *iq3Lattice) trialsBySIMD(b *iq3Block, p iq3Params, mx, scale float32) float32 {
	var best float32
	for is := -p.ntry; is <= p.ntry; is += 16 {
		n := min(16, p.ntry-is+1)
		for lane := range b.id {
			id := iq3ID(is+min(lane, n-1), mx)
			b.id[lane], b.tscale[lane] = id, 1/id
		}
		lat.trialsSIMD(b)
		for lane := 0; lane < n; lane++ {
			sumqx, sumq2 := b.sumqx[lane], b.sumq2[lane]
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
				scale = sumqx / sumq2
				best = scale * sumqx
				for e := range b.L {
					b.L[e] = uint8(b.levels[e][lane])
				}
				for k, m := range b.onMask {
					b.onGrid[k] = m>>lane&1 != 0
				}
			}
		}
	}
	return scale
}

// levelsOf returns the levels of L[4k:4k+4] packed as a combination u.
func levelsOf(L *[32]uint8, k int) int {
	return int(L[4*k]) | int(L[4*k+1])<<3 | int(L[4*k+2])<<6 | int(L[4*k+3])<<9
}

// search is the body of ggml's sub-block loop for IQ3_XXS and IQ3_S, up to the choice of
// grid points: it fills b.signs (the sign bits of each 8, 7 of them for IQ3_XXS) and
// b.index, and returns the sub-block scale (0 for a sub-block ggml treats as zero, whose
// signs and indices ggml does not store: zero reports that). xb is the sub-block, qw its
// importance (nil for none) and sigma2 ggml's 2·Σx²/256 over the super-block.
func (lat *iq3Lattice) search(b *iq3Block, p iq3Params, xb, qw *[32]float32, sigma2 float32) (scale float32, zero bool) {
	const kMaxQ = 8
	if qw != nil {
		for i, v := range xb {
			b.weight[i] = qw[i] * sqrt32(sigma2+float32(v*v))
		}
	} else {
		for i, v := range xb {
			b.weight[i] = v * v
		}
	}
	for i, w := range b.weight {
		b.waux[i] = sqrt32(w)
	}
	for k := 0; k < 4; k++ {
		nflip, s := 0, uint8(0)
		for i := 0; i < 8; i++ {
			if v := xb[8*k+i]; v >= 0 {
				b.xval[8*k+i] = v
			} else {
				b.xval[8*k+i] = -v
				nflip++
				s |= 1 << i
			}
		}
		if p.xxs {
			if nflip%2 != 0 {
				imin := 0
				mn := float32(b.weight[8*k]*xb[8*k]) * xb[8*k]
				for i := 1; i < 8; i++ {
					if ax := float32(b.weight[8*k+i]*xb[8*k+i]) * xb[8*k+i]; ax < mn {
						mn, imin = ax, i
					}
				}
				b.xval[8*k+imin] = -b.xval[8*k+imin]
				s ^= 1 << imin
			}
			s &= 127
		}
		b.signs[k] = s
	}
	mx := b.xval[0]
	for _, v := range b.xval[1:] {
		if !(mx > v) { // MAX(max, xval[i])
			mx = v
		}
	}
	b.L = [32]uint8{}
	if p.xxs && mx < groupMaxEpsIQ3XXS || !p.xxs && mx == 0 {
		return 0, true
	}
	for i := range b.wx {
		b.wx[i] = b.weight[i] * b.xval[i]
	}

	scale = lat.trials(b, p, mx)
	notOnGrid := 0
	for _, on := range b.onGrid {
		if !on {
			notOnGrid++
		}
	}
	if notOnGrid > 0 && scale > 0 {
		id := 1 / scale
		b.setScale(scale)
		for k := 0; k < 8; k++ {
			if p.xxs && b.onGrid[k] {
				continue
			}
			x := (*[4]float32)(b.xval[4*k : 4*k+4])
			u := 0
			for i := 0; i < 4; i++ {
				l := clamp(nearestInt(0.5*(float32(id*x[i])-1)), 0, kMaxQ-1)
				u |= l << (3 * i)
			}
			if lat.kmap[u] < 0 {
				lat.bestNeighbour(b, u, k, &b.L)
			} else {
				for i := 0; i < 4; i++ {
					b.L[4*k+i] = uint8(u >> (3 * i) & 7)
				}
			}
		}
		var sumqx, sumq2 float32
		for i, l := range b.L {
			q := float32(2*int(l) + 1)
			sumqx += float32(b.wx[i] * q)
			sumq2 += float32(float32(b.weight[i]*q) * q)
		}
		if sumq2 > 0 {
			scale = sumqx / sumq2
		}
	}
	if scale < 0 {
		// ggml: "should never happen"; flip the scale and the signs.
		scale = -scale
		for k := range b.signs {
			if p.xxs {
				b.signs[k] = ^b.signs[k] & 127
			} else {
				b.signs[k] = ^b.signs[k]
			}
		}
	}
	for k := 0; k < 8; k++ {
		// Every L is on the grid here (ggml aborts otherwise).
		b.index[k] = uint16(lat.kmap[levelsOf(&b.L, k)])
	}
	return scale, false
}
