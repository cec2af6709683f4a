package quantize

import (
	"math"
	"sync"

	"github.com/gquant/gquant/formats/gguf"
)

// The lattice grids of IQ2_XXS, IQ2_XS, IQ2_S and IQ1_S/IQ1_M, and what ggml's
// iq2xs_init_impl (ggml/src/ggml-quants.c) derives from them for the encoders: every grid
// point is 8 levels in {0, 1, 2} (ggml's positions 2l+1 = 1, 3, 5); the map sends each point of
// {0, 1, 2}^8 to its grid index, and each point off the grid to its neighbour list, the grid
// points at the nwant smallest squared distances, in ggml's order (distance, then index).
//
// ggml builds the lists for all 43692 2-bit codes up to 0xAAAA; its encoders only look up
// codes whose levels are clamped to 0..2, so the 3^8 points here are every list that can be
// read, each identical to ggml's. The grids come from formats/gguf's codebooks (the decoders'
// tables) by mapping each byte value to its level; each grid is built once, on first use.

// iqPoints is the number of points of {0, 1, 2}^8.
const iqPoints = 6561

// iqCand is one neighbour: the grid index and the point's 2-bit code (level of element i at
// bits 2i).
type iqCand struct{ idx, code uint16 }

// iqGrid is one grid with its map and neighbour lists.
type iqGrid struct {
	code []uint16 // code[j]: grid point j, 2 bits per element (ggml's kgrid_* tables)
	// at[p] for p = Σ level_i·3^i: the grid index when ≥ 0, else −1−o with the neighbour list
	// at nb[o+1 : o+1+nb[o].idx] (nb[o].idx holds the count).
	at [iqPoints]int32
	nb []iqCand
}

// grid index of point p, and whether it is on the grid.
func (g *iqGrid) lookup(p int) (int, bool) {
	v := g.at[p]
	return int(v), v >= 0
}

// neighbours of the off-grid point p (g.at[p] < 0).
func (g *iqGrid) neighbours(p int) []iqCand {
	o := int(-1 - g.at[p])
	n := int(g.nb[o].idx)
	return g.nb[o+1 : o+1+n]
}

// levelsOf writes the levels of grid point j to L.
func (g *iqGrid) levelsOf(j int, L []int8) {
	c := g.code[j]
	for i := 0; i < 8; i++ {
		L[i] = int8(c >> (2 * i) & 3)
	}
}

// iqPoint is the index into iqGrid.at of the 8 levels L (each 0..2).
func iqPoint(L []int8) int {
	_ = L[7]
	return int(L[0]) + 3*(int(L[1])+3*(int(L[2])+3*(int(L[3])+3*(int(L[4])+3*(int(L[5])+3*(int(L[6])+3*int(L[7])))))))
}

// iqPointSafe is iqPoint for levels that may lie outside 0..2 (from NaN or overflowing inputs,
// where ggml reads out of its map or aborts): they are clamped first.
func iqPointSafe(L []int8) int {
	var c [8]int8
	for i := range c {
		c[i] = int8(clamp(int(L[i]), 0, 2))
	}
	return iqPoint(c[:])
}

// newIQGrid builds a grid from a codebook of 8-byte points whose bytes take the three values
// vals (in level order), with neighbour lists of nwant distances (iq2xs_init_impl).
func newIQGrid(points []uint64, vals [3]uint8, nwant int) *iqGrid {
	g := &iqGrid{code: make([]uint16, len(points))}
	for i := range g.at {
		g.at[i] = -1
	}
	levels := make([][8]int8, len(points))
	for j, pt := range points {
		var c uint16
		for i := 0; i < 8; i++ {
			b := uint8(pt >> (8 * i))
			l := 0
			for l < 3 && vals[l] != b {
				l++
			}
			if l == 3 {
				panic("quantize: grid byte outside the codebook's three values")
			}
			levels[j][i] = int8(l)
			c |= uint16(l) << (2 * i)
		}
		g.code[j] = c
		g.at[iqPoint(levels[j][:])] = int32(j)
	}
	// For each off-grid point, ggml sorts (d2, j) over the grid and keeps the entries of the
	// first nwant distinct distances. d2 = Σ (2a+1 − (2b+1))² ≤ 128 here, so a counting pass
	// over the distances gives the same order.
	var count [129]int
	d2 := make([]uint8, len(points))
	var L [8]int8
	for p := 0; p < iqPoints; p++ {
		if g.at[p] >= 0 {
			continue
		}
		q := p
		for i := range L {
			L[i] = int8(q % 3)
			q /= 3
		}
		clear(count[:])
		for j := range levels {
			d := 0
			for i := 0; i < 8; i++ {
				e := 2 * int(levels[j][i]-L[i])
				d += e * e
			}
			d2[j] = uint8(d)
			count[d]++
		}
		maxd, have := 0, 0
		for d := range count {
			if count[d] > 0 {
				maxd = d
				if have++; have == nwant {
					break
				}
			}
		}
		o := len(g.nb)
		g.at[p] = int32(-1 - o)
		g.nb = append(g.nb, iqCand{})
		for d := 0; d <= maxd; d++ {
			if count[d] == 0 {
				continue
			}
			for j := range levels {
				if int(d2[j]) == d {
					g.nb = append(g.nb, iqCand{uint16(j), g.code[j]})
				}
			}
		}
		g.nb[o].idx = uint16(len(g.nb) - o - 1)
	}
	return g
}

// The grids, built on first use (ggml_quantize_init). IQ1_S and IQ1_M share theirs, as in
// ggml (iq2_data_index).
var (
	iq2XXSGridOnce, iq2XSGridOnce, iq2SGridOnce, iq1SGridOnce sync.Once
	iq2XXSGrid, iq2XSGrid, iq2SGrid, iq1SGrid                 *iqGrid
)

// iq2Vals are the bytes of the IQ2 codebooks for levels 0, 1, 2; iq1Vals those of IQ1_S
// (int8 −1, 0, 1).
var (
	iq2Vals = [3]uint8{0x08, 0x19, 0x2b}
	iq1Vals = [3]uint8{0xff, 0x00, 0x01}
)

func gridIQ2XXS() *iqGrid {
	iq2XXSGridOnce.Do(func() { iq2XXSGrid = newIQGrid(gguf.IQ2XXSGrid[:], iq2Vals, 2) })
	return iq2XXSGrid
}

func gridIQ2XS() *iqGrid {
	iq2XSGridOnce.Do(func() { iq2XSGrid = newIQGrid(gguf.IQ2XSGrid[:], iq2Vals, 2) })
	return iq2XSGrid
}

func gridIQ2S() *iqGrid {
	iq2SGridOnce.Do(func() { iq2SGrid = newIQGrid(gguf.IQ2SGrid[:], iq2Vals, 1) })
	return iq2SGrid
}

func gridIQ1S() *iqGrid {
	iq1SGridOnce.Do(func() { iq1SGrid = newIQGrid(gguf.IQ1SGrid[:], iq1Vals, 3) })
	return iq1SGrid
}

// kmaskIQ2XS is ggml's kmask_iq2xs: the sign bit of element j.
var kmaskIQ2XS = [8]uint8{1, 2, 4, 8, 16, 32, 64, 128}

// iqNearest is the neighbour search shared by iq2_find_best_neighbour and
// iq1_find_best_neighbour2: the index in nb of the candidate whose levels l_i, mapped to
// s[l_i], are nearest to x (8 values) in Σ w_i·(s[l_i] − x_i)², summed in ggml's order and
// compared as ggml does (the first of equal minima; −1 when no distance is below FLT_MAX:
// NaN or infinite). The term of element i at level l, (w_i·d)·d with d = s[l] − x_i, does not
// depend on the candidate, so a table of the 24 terms is made first and each candidate costs
// eight additions instead of ggml's twenty-four operations, with the same bits. With AVX-512
// (iq_search_amd64.s) sixteen candidates are summed at once, one per lane, in the same order.
func iqNearest(s *[4]float32, x, w []float32, nb []iqCand) int {
	_, _ = x[7], w[7]
	if useSIMDSearch && len(nb) > 0 {
		return iqNearestAVX512(s, &x[0], &w[0], &nb[0], len(nb))
	}
	var t [32]float32
	for i := 0; i < 8; i++ {
		for l := 0; l < 3; l++ {
			d := s[l] - x[i]
			t[4*i+l] = float32(w[i]*d) * d
		}
	}
	best, bi := float32(maxFloat32), -1
	for k, c := range nb {
		if d := iqDist2(&t, c.code); d < best {
			best, bi = d, k
		}
	}
	return bi
}

// iqDist2 sums the terms of t for the candidate with code c, starting from 0 as ggml does.
func iqDist2(t *[32]float32, c uint16) float32 {
	d := float32(0) + t[c&3]
	d += t[4+(c>>2&3)]
	d += t[8+(c>>4&3)]
	d += t[12+(c>>6&3)]
	d += t[16+(c>>8&3)]
	d += t[20+(c>>10&3)]
	d += t[24+(c>>12&3)]
	d += t[28+(c>>14&3)]
	return d
}

// iq2FindBestNeighbour is iq2_find_best_neighbour: among the neighbours nb, the grid point
// nearest to xval (8 values) at scale with weights w; its levels go to L and its index is
// returned. Where ggml asserts because no distance is finite (NaN or overflowing inputs),
// gquant takes the first neighbour.
func iq2FindBestNeighbour(g *iqGrid, nb []iqCand, xval, w []float32, scale float32, L []int8) int {
	s := [4]float32{scale * 1, scale * 3, scale * 5}
	k := max(iqNearest(&s, xval, w, nb), 0)
	g.levelsOf(int(nb[k].idx), L)
	return int(nb[k].idx)
}

// iq2Signs is the sign handling of quantize_row_iq2_xxs_impl and quantize_row_iq2_xs_impl for
// 8 values: xval gets |x|, and when the number of negative values is odd the one with the
// smallest w·x² keeps its sign (its xval is negated) so that 7 sign bits suffice. It returns
// the 7 sign bits.
func iq2Signs(xval, x, w []float32) uint8 {
	_, _, _ = xval[7], x[7], w[7]
	var s uint8
	nflip := 0
	for i := 0; i < 8; i++ {
		if x[i] >= 0 {
			xval[i] = x[i]
		} else {
			xval[i] = -x[i]
			nflip++
			s |= 1 << i
		}
	}
	if nflip%2 != 0 {
		imin := 0
		minv := float32(w[0]*x[0]) * x[0]
		for i := 1; i < 8; i++ {
			if ax := float32(w[i]*x[i]) * x[i]; ax < minv {
				minv, imin = ax, i
			}
		}
		xval[imin] = -xval[imin]
		s ^= 1 << imin
	}
	return s & 127
}

// max32 is ggml's MAX(a, b) for floats: a > b ? a : b (b when either is NaN).
func max32(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}

// iq2Level is nearest_int(0.5f*(id*x − 1)) clamped to 0..kMaxQ−1 = 0..2: the level of x at the
// inverse scale id on the positions 1, 3, 5.
func iq2Level(id, x float32) int8 {
	l := nearestInt(float32(0.5 * float32(float32(id*x)-1)))
	return int8(clamp(l, 0, 2))
}

// iq2Search16 is the scale search that quantize_row_iq2_xs_impl and quantize_row_iq2_s_impl
// run on each 16 values: 19 trial scales around max/5, each quantized to the grid (two
// groups of 8, off-grid groups replaced by their best neighbour), keeping the scale that
// maximises (Σw·x·q)²/Σw·q²; then the groups that were off the grid are redone at that scale.
// xval are the magnitudes (one may be negative after the sign fix of IQ2_XS), weight and waux
// the weights and their square roots, maxv the largest xval. The levels go to L (each group
// on the grid unless ggml would abort: NaN inputs); it returns the scale.
func iq2Search16(g *iqGrid, xval, weight, waux *[16]float32, maxv float32, L *[16]int8) float32 {
	const kMaxQ = 3
	var Laux [16]int8
	var wx [16]float32     // w·x, ggml's first product of Σw·x·q
	var q2l [16][3]float32 // w·q·q for q = 2l+1
	for i := 0; i < 16; i++ {
		wx[i] = weight[i] * xval[i]
		for l := 0; l < 3; l++ {
			q := float32(2*l + 1)
			q2l[i][l] = float32(weight[i]*q) * q
		}
	}
	*L = [16]int8{}
	var best float32
	scale := maxv / (2*kMaxQ - 1)
	onGrid := [2]bool{true, true}
	for is := -9; is <= 9; is++ {
		id := (2*kMaxQ - 1 + float32(float32(is)*0.1)) / maxv
		thisScale := 1 / id
		var onGridAux [2]bool
		for k := 0; k < 2; k++ {
			la := Laux[8*k : 8*k+8]
			for i := 0; i < 8; i++ {
				la[i] = iq2Level(id, xval[8*k+i])
			}
			p := iqPoint(la)
			_, onGridAux[k] = g.lookup(p)
			if !onGridAux[k] {
				iq2FindBestNeighbour(g, g.neighbours(p), xval[8*k:8*k+8], waux[8*k:8*k+8], thisScale, la)
			}
		}
		var sumqx, sumq2 float32
		for i := 0; i < 16; i++ {
			l := Laux[i]
			sumqx += float32(wx[i] * float32(2*l+1))
			sumq2 += q2l[i][l]
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			scale = sumqx / sumq2
			best = scale * sumqx
			*L = Laux
			onGrid = onGridAux
		}
	}
	if (!onGrid[0] || !onGrid[1]) && scale > 0 {
		id := 1 / scale
		for k := 0; k < 2; k++ {
			if onGrid[k] {
				continue
			}
			lk := L[8*k : 8*k+8]
			for i := 0; i < 8; i++ {
				lk[i] = iq2Level(id, xval[8*k+i])
			}
			if p := iqPoint(lk); g.at[p] < 0 {
				iq2FindBestNeighbour(g, g.neighbours(p), xval[8*k:8*k+8], waux[8*k:8*k+8], scale, lk)
			}
		}
		var sumqx, sumq2 float32
		for i := 0; i < 16; i++ {
			l := L[i]
			sumqx += float32(wx[i] * float32(2*l+1))
			sumq2 += q2l[i][l]
		}
		if sumq2 > 0 {
			scale = sumqx / sumq2
		}
	}
	return scale
}

// iqGridIndex is the grid index of the 8 levels L, which ggml's encoders require to lie on the
// grid (they print "Oops: found point not on grid" and abort otherwise, reachable only with
// NaN inputs); gquant then takes the nearest grid point (first neighbour) and writes its
// levels to L.
func iqGridIndex(g *iqGrid, L []int8) int {
	p := iqPointSafe(L)
	if j, ok := g.lookup(p); ok {
		return j
	}
	j := int(g.neighbours(p)[0].idx)
	g.levelsOf(j, L)
	return j
}

// iq1Delta is IQ1S_DELTA and IQ1M_DELTA: the shift of the IQ1 levels −1, 0, 1.
const iq1Delta = 0.125

// iq1XP and iq1XM are the shifted IQ1 level values (x_p and x_m of the IQ1 encoders).
var (
	iq1XP = [3]float32{-1 + iq1Delta, iq1Delta, 1 + iq1Delta}
	iq1XM = [3]float32{-1 - iq1Delta, -iq1Delta, 1 - iq1Delta}
)

// iq1FindBestNeighbour2 is iq1_find_best_neighbour2: among the neighbours nb, the grid point
// whose levels, mapped through xg and scaled, are nearest to xval (8 values) with weights w;
// its levels go to L and its index is returned.
//
// When no neighbour has a finite distance, ggml scans the whole grid, and there its distance
// for grid point i uses xval[i] (not xval[j]) for every element: it reads the i-th float after
// the group in the caller's input. tail is that input, from the group to the end of the src of
// the Quantize call (ggml_quantize_chunk's buffer), and the scan follows ggml for every i
// inside it; ggml reads past its buffer beyond, and gquant stops there. Where ggml then asserts
// (nothing found), gquant takes the first neighbour. The scan only runs when every
// neighbour's distance is NaN or infinite: with NaN or infinite inputs, where it finds nothing
// either, or with distances overflowing float32, but finite inputs that large overflow the
// split search's sums first, which then puts all 8 values on one level, a grid point. No test
// vector reaches it (ggml aborts on the inputs tried that come near).
func iq1FindBestNeighbour2(g *iqGrid, nb []iqCand, xval, w []float32, scale float32, xg *[3]float32, L []int8, tail []float32) int {
	s := [4]float32{scale * xg[0], scale * xg[1], scale * xg[2]}
	j := -1
	if k := iqNearest(&s, xval, w, nb); k >= 0 {
		j = int(nb[k].idx)
	} else {
		best := float32(maxFloat32)
		for i, c := range g.code {
			if i >= len(tail) {
				break
			}
			var d2 float32
			for e := 0; e < 8; e++ {
				diff := s[c>>(2*e)&3] - tail[i]
				d2 += float32(float32(w[e]*diff) * diff)
			}
			if d2 < best {
				best, j = d2, i
			}
		}
		if j < 0 {
			j = int(nb[0].idx)
		}
	}
	g.levelsOf(j, L)
	return j
}

// iq1Sort orders the positions idx (0..len−1 on entry, len ≤ 32) by x as the IQ1 encoders'
// qsort of (value, index) pairs does with glibc 2.36, a stable merge sort: equal values (+0
// and −0 among them) keep their order. Without NaNs every stable sort gives that order, and an
// insertion sort of keys that order the floats, then the positions, is quickest; with NaNs the
// order depends on the algorithm, so iq1MergeSort follows glibc's. tmp is scratch of the same
// length.
func iq1Sort(idx, tmp []uint8, x []float32) {
	var keys [32]uint64
	n := len(idx)
	for i := 0; i < n; i++ {
		v := x[idx[i]]
		if v != v {
			iq1MergeSort(idx, tmp, x)
			return
		}
		b := math.Float32bits(v)
		switch {
		case b&0x7fffffff == 0:
			b = 0x80000000
		case b&0x80000000 != 0:
			b = ^b
		default:
			b |= 0x80000000
		}
		keys[i] = uint64(b)<<32 | uint64(idx[i])
	}
	for i := 1; i < n; i++ {
		k := keys[i]
		j := i
		for ; j > 0 && keys[j-1] > k; j-- {
			keys[j] = keys[j-1]
		}
		keys[j] = k
	}
	for i := 0; i < n; i++ {
		idx[i] = uint8(keys[i])
	}
}

// iq1MergeSort is glibc 2.36's msort_with_tmp on idx with the IQ1 encoders' comparison of x:
// top-down, halves of n/2 and n − n/2, merging takes the left element unless it compares
// greater.
func iq1MergeSort(idx, tmp []uint8, x []float32) {
	n := len(idx)
	if n <= 1 {
		return
	}
	n1 := n / 2
	iq1MergeSort(idx[:n1], tmp, x)
	iq1MergeSort(idx[n1:], tmp, x)
	i, j, k := 0, n1, 0
	for i < n1 && j < n {
		if !(x[idx[i]] > x[idx[j]]) {
			tmp[k] = idx[i]
			i++
		} else {
			tmp[k] = idx[j]
			j++
		}
		k++
	}
	k += copy(tmp[k:], idx[i:n1])
	copy(idx[:k], tmp[:k])
}
