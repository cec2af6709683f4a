package quantize

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// The lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M) have AVX-512 kernels
// (iq_search_amd64.s) for their neighbour search and for IQ1_S's split search, whose Go code is
// the reference. The vectors and stress tests run the default path (the kernels where the CPU
// has them); the tests here run the Go path on the same vectors, and both paths side by side
// on random and adversarial inputs.

// TestIQVectorsGoPath runs the ggml vectors through the Go code when the default is SIMD.
func TestIQVectorsGoPath(t *testing.T) {
	if !simdOn() {
		t.Skip("the default path is already the Go code")
	}
	withGo(func() { TestQuantizeMatchesGGML(t) })
}

// TestIQSIMDMatchesGo quantizes rows of every kind of searchGenerators with both paths.
func TestIQSIMDMatchesGo(t *testing.T) {
	if !simdOn() {
		t.Skip("no SIMD search in this build or on this CPU")
	}
	const nrows, n = 8, 512
	rows := nrows
	if testing.Short() {
		rows = 2
	}
	r := rand.New(rand.NewPCG(17, 23))
	im := make([]float32, n)
	for j := range im {
		im[j] = float32(math.Exp(2 * r.NormFloat64()))
	}
	imZeros := make([]float32, n)
	for j := range imZeros {
		if r.IntN(3) > 0 {
			imZeros[j] = float32(r.Float64())
		}
	}
	x := make([]float32, rows*n)
	for name, gen := range searchGenerators {
		gen(r, x)
		for _, typ := range iqBenchTypes {
			e, _ := For(typ)
			for iw, w := range [][]float32{nil, im, imZeros} {
				if w == nil && needsImatrix[typ] {
					continue
				}
				got := make([]byte, RowBytes(typ, n)*rows)
				want := make([]byte, len(got))
				e.Quantize(got, x, rows, n, w)
				withGo(func() { e.Quantize(want, x, rows, n, w) })
				if !bytes.Equal(got, want) {
					t.Errorf("%s %s imatrix %d: SIMD and Go bytes differ: %s", name, typ, iw, firstDiff(got, want, e, n))
				}
			}
		}
	}
}

// TestIQNearestSIMD compares the neighbour search on both paths for lists of every length up
// to 40 (partial last chunks), with ties, zeros, infinities and NaNs among the distances.
func TestIQNearestSIMD(t *testing.T) {
	if !simdOn() {
		t.Skip("no SIMD search in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 8))
	g := gridIQ1S()
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN()), 3e38, 1e-45}
	for rep := 0; rep < 3000; rep++ {
		n := 1 + rep%40
		nb := make([]iqCand, n)
		for k := range nb {
			j := r.IntN(len(g.code))
			if rep%3 == 0 && k > 0 && r.IntN(3) == 0 {
				j = int(nb[r.IntN(k)].idx) // a repeated candidate: equal distances
			}
			nb[k] = iqCand{uint16(j), g.code[j]}
		}
		var s [4]float32
		var x, w [8]float32
		scale := float32(r.NormFloat64())
		for l := 0; l < 3; l++ {
			s[l] = scale * iq1XP[l]
		}
		for i := range x {
			x[i] = float32(r.NormFloat64())
			w[i] = float32(r.ExpFloat64())
			if rep%4 == 1 {
				x[i] = float32(r.IntN(3)-1) * scale // exact hits: zero terms
			}
			if rep%7 == 3 && r.IntN(4) == 0 {
				w[i] = special[r.IntN(len(special))]
			}
		}
		got := iqNearest(&s, x[:], w[:], nb)
		var want int
		withGo(func() { want = iqNearest(&s, x[:], w[:], nb) })
		if got != want {
			t.Fatalf("rep %d: %d candidates, x %v w %v s %v: SIMD picks %d, Go %d", rep, n, x, w, s, got, want)
		}
	}
}

// TestIQ1SSplitSIMD compares IQ1_S's split search on both paths, on sums from random sorted
// sub-blocks and with NaNs, infinities and zero weights among them.
func TestIQ1SSplitSIMD(t *testing.T) {
	if !simdOn() {
		t.Skip("no SIMD search in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(9, 2))
	for rep := 0; rep < 2000; rep++ {
		var sumx, sumw [33]float32
		for j := 0; j < 32; j++ {
			x := float32(r.NormFloat64())
			w := float32(r.ExpFloat64())
			switch rep % 5 {
			case 1:
				x = float32(r.IntN(5) - 2)
			case 2:
				if r.IntN(3) == 0 {
					w = 0
				}
			case 3:
				if r.IntN(20) == 0 {
					x = []float32{float32(math.NaN()), float32(math.Inf(-1)), 3e38}[r.IntN(3)]
				}
			}
			sumx[j+1] = sumx[j] + float32(w*x)
			sumw[j+1] = sumw[j] + w
		}
		var a, b iq1SSplit
		for i := 0; i <= 32; i++ {
			for s, xs := range [2]*[3]float32{&iq1XP, &iq1XM} {
				a.sx[2*i+s], a.sw[2*i+s] = sumx[i], sumw[i]
				a.ax[2*i+s] = (sumx[i] - sumx[0]) * xs[0]
				a.cx[2*i+s] = (sumx[32] - sumx[i]) * xs[2]
				a.aw[2*i+s] = float32((sumw[i]-sumw[0])*xs[0]) * xs[0]
				a.cw[2*i+s] = float32((sumw[32]-sumw[i])*xs[2]) * xs[2]
			}
		}
		b = a
		maxv := float32(r.ExpFloat64())
		a.search(maxv)
		withGo(func() { b.search(maxv) })
		if math.Float32bits(a.scale) != math.Float32bits(b.scale) || a.i1 != b.i1 || a.i2 != b.i2 || a.shift != b.shift {
			t.Fatalf("rep %d: SIMD scale %g split (%d, %d) shift %d; Go %g (%d, %d) %d",
				rep, a.scale, a.i1, a.i2, a.shift, b.scale, b.i1, b.i2, b.shift)
		}
	}
}

// TestIQ1SortIsGlibcMergeSort checks the insertion sort of iq1Sort against the port of glibc's
// merge sort (which gives ggml's order) on values with many ties, both zeros and subnormals.
func TestIQ1SortIsGlibcMergeSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 3))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.5, 1e-45, -1e-45, float32(math.Inf(1)), float32(math.Inf(-1))}
	for rep := 0; rep < 5000; rep++ {
		n := []int{16, 32}[rep%2]
		x := make([]float32, n)
		for i := range x {
			if rep%3 == 0 {
				x[i] = float32(r.NormFloat64())
			} else {
				x[i] = vals[r.IntN(len(vals))]
			}
		}
		var a, b, tmp [32]uint8
		for i := 0; i < n; i++ {
			a[i], b[i] = uint8(i), uint8(i)
		}
		iq1Sort(a[:n], tmp[:n], x)
		iq1MergeSort(b[:n], tmp[:n], x)
		if a != b {
			t.Fatalf("x %v: iq1Sort %v, glibc merge sort %v", x, a[:n], b[:n])
		}
	}
}

// TestIQGridNeighbours rebuilds every neighbour list as iq2xs_init_impl does, with a sort of
// (distance, index) pairs, and compares it with the counting pass of newIQGrid; it also checks
// each grid point's map entry and levels against the codebook bytes.
func TestIQGridNeighbours(t *testing.T) {
	grids := []struct {
		name  string
		g     *iqGrid
		pts   []uint64
		vals  [3]uint8
		nwant int
	}{
		{"IQ2_XXS", gridIQ2XXS(), gguf.IQ2XXSGrid[:], iq2Vals, 2},
		{"IQ2_XS", gridIQ2XS(), gguf.IQ2XSGrid[:], iq2Vals, 2},
		{"IQ2_S", gridIQ2S(), gguf.IQ2SGrid[:], iq2Vals, 1},
		{"IQ1_S", gridIQ1S(), gguf.IQ1SGrid[:], iq1Vals, 3},
	}
	for _, c := range grids {
		pos := make([][8]int, len(c.pts)) // ggml's positions 2l+1
		for j, pt := range c.pts {
			for i := 0; i < 8; i++ {
				b := uint8(pt >> (8 * i))
				l := bytes.IndexByte(c.vals[:], b)
				pos[j][i] = 2*l + 1
			}
			var L [8]int8
			c.g.levelsOf(j, L[:])
			for i := range L {
				if 2*int(L[i])+1 != pos[j][i] {
					t.Fatalf("%s: grid point %d: levels %v, codebook %x", c.name, j, L, pt)
				}
			}
			if k, ok := c.g.lookup(iqPoint(L[:])); !ok || k != j {
				t.Fatalf("%s: map of grid point %d gives %d", c.name, j, k)
			}
		}
		lists, step := 0, 1
		if testing.Short() {
			step = 13
		}
		keys := make([]int32, len(pos))
		for p := 0; p < iqPoints; p++ {
			if c.g.at[p] >= 0 {
				continue
			}
			if lists++; lists%step != 0 {
				continue
			}
			var want [8]int
			q := p
			for i := range want {
				want[i] = 2*(q%3) + 1
				q /= 3
			}
			// qsort of (d2, j) pairs with iq2_compare_func: keys d2·2^12 + j (j < 2048).
			for j := range pos {
				d := 0
				for i := 0; i < 8; i++ {
					d += (pos[j][i] - want[i]) * (pos[j][i] - want[i])
				}
				keys[j] = int32(d<<12 | j)
			}
			slices.Sort(keys)
			var ref []int
			d2, have := keys[0]>>12, 1
			for _, k := range keys {
				if k>>12 > d2 {
					if have == c.nwant {
						break
					}
					d2 = k >> 12
					have++
				}
				ref = append(ref, int(k&0xfff))
			}
			nb := c.g.neighbours(p)
			if len(nb) != len(ref) {
				t.Fatalf("%s: point %d: %d neighbours, ggml's rule gives %d", c.name, p, len(nb), len(ref))
			}
			for k := range nb {
				if int(nb[k].idx) != ref[k] || nb[k].code != c.g.code[ref[k]] {
					t.Fatalf("%s: point %d: neighbour %d is %d, ggml's rule gives %d", c.name, p, k, nb[k].idx, ref[k])
				}
			}
		}
		if lists+len(c.pts) != iqPoints {
			t.Errorf("%s: %d lists and %d grid points do not cover the %d points", c.name, lists, len(c.pts), iqPoints)
		}
	}
}

// TestIQSearchAsmHasNoFMA: the kernels must not fuse multiply-adds (ggml's C has none).
func TestIQSearchAsmHasNoFMA(t *testing.T) {
	src, err := os.ReadFile("iq_search_amd64.s")
	if err != nil {
		t.Skip("iq_search_amd64.s not found")
	}
	if m := regexp.MustCompile(`(?m)^\s*VF(N?)M(ADD|SUB)\w*`).FindAll(src, -1); len(m) > 0 {
		t.Errorf("iq_search_amd64.s uses fused multiply-add: %q", m)
	}
	if !regexp.MustCompile(`(?m)^\s*VMULPS`).Match(src) {
		t.Fatal("no VMULPS in iq_search_amd64.s: the check looks at the wrong file")
	}
}

// TestRequiresImatrixRefusal: the types that ggml only quantizes with an importance matrix
// panic without one (callers check RequiresImatrix first), and the others do not.
func TestRequiresImatrixRefusal(t *testing.T) {
	x := gaussianRows(2, 1, 256, 1)
	for _, typ := range allTypes() {
		e, _ := For(typ)
		q := make([]byte, RowBytes(typ, 256))
		if got := panics(func() { e.Quantize(q, x, 1, 256, nil) }); got != RequiresImatrix(typ) {
			t.Errorf("%s: panics without an imatrix: %v, RequiresImatrix: %v", typ, got, RequiresImatrix(typ))
		}
	}
}

// TestIQEncodersDoNotAllocate: the encoders keep their scratch on the stack (grids aside,
// which are built once).
func TestIQEncodersDoNotAllocate(t *testing.T) {
	const nrows, n = 4, 512
	x := gaussianRows(4, nrows, n, 0.02)
	im := orUnit(gguf.IQ1_S, nil, n)
	for _, typ := range iqBenchTypes {
		e, _ := For(typ)
		q := make([]byte, RowBytes(typ, n)*nrows)
		e.Quantize(q, x, nrows, n, im)
		if a := testing.AllocsPerRun(3, func() { e.Quantize(q, x, nrows, n, im) }); a != 0 {
			t.Errorf("%s: %.0f allocations per Quantize call", typ, a)
		}
	}
}
