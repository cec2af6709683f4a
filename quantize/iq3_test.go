package quantize

import (
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// TestIQ3Lattice checks the lattices against iq3xs_init_impl's definition by brute force:
// every combination of 4 levels is either a grid point (mapped to its index) or has as
// neighbours exactly the grid points at its nwant smallest distinct squared distances, in
// (distance, index) order.
func TestIQ3Lattice(t *testing.T) {
	for _, c := range []struct {
		name  string
		lat   *iq3Lattice
		grid  []uint32
		level func(b uint32) int // level of a byte of the gguf grid
		nwant int
	}{
		{"IQ3_XXS", iq3XXSGrid(), gguf.IQ3XXSGrid[:], func(b uint32) int { return int(b >> 3) }, 2},
		{"IQ3_S", iq3SGrid(), gguf.IQ3SGrid[:], func(b uint32) int { return int(b-1) / 2 }, 3},
	} {
		var pts [][4]int
		for _, g := range c.grid {
			var p [4]int
			for i := range p {
				p[i] = c.level(g >> (8 * i) & 0xff)
			}
			pts = append(pts, p)
		}
		onGrid := 0
		for u := 0; u < 4096; u++ {
			lv := [4]int{u & 7, u >> 3 & 7, u >> 6 & 7, u >> 9 & 7}
			idx := -1
			for k, p := range pts {
				if p == lv {
					idx = k
				}
			}
			if int(c.lat.kmap[u]) != idx {
				t.Fatalf("%s: kmap[%d] = %d, want %d", c.name, u, c.lat.kmap[u], idx)
			}
			nb := c.lat.nb[c.lat.nbOff[u]:c.lat.nbOff[u+1]]
			if idx >= 0 {
				onGrid++
				if len(nb) != 0 || c.lat.kmap32[u] != int32(idx) {
					t.Fatalf("%s: grid point %d has neighbours %v, kmap32 %d", c.name, u, nb, c.lat.kmap32[u])
				}
				continue
			}
			if c.lat.kmap32[u] != ^int32(c.lat.nbOff[u]<<6|uint32(len(nb))) {
				t.Fatalf("%s: kmap32[%d] = %#x", c.name, u, c.lat.kmap32[u])
			}
			dist := func(p [4]int) int {
				d := 0
				for i := range p {
					e := (2*p[i] + 1) - (2*lv[i] + 1)
					d += e * e
				}
				return d
			}
			var want []uint32
			last := -1
			for n := 0; n < c.nwant; n++ { // the next larger distance, and its points in index order
				next := 1 << 30
				for _, p := range pts {
					if d := dist(p); d > last && d < next {
						next = d
					}
				}
				for k, p := range pts {
					if dist(p) == next {
						want = append(want, uint32(u2(p))|uint32(k)<<12)
					}
				}
				last = next
			}
			if len(nb) != len(want) {
				t.Fatalf("%s: %d neighbours of %d, want %d", c.name, len(nb), u, len(want))
			}
			for i := range nb {
				if nb[i] != want[i] {
					t.Fatalf("%s: neighbours of %d: %x, want %x", c.name, u, nb, want)
				}
			}
		}
		if onGrid != len(c.grid) {
			t.Errorf("%s: %d grid points in the map, want %d", c.name, onGrid, len(c.grid))
		}
	}
}

// u2 packs 4 levels into a combination.
func u2(p [4]int) int { return p[0] | p[1]<<3 | p[2]<<6 | p[3]<<9 }

// TestQuantizeMatchesGGMLGoPath runs the ggml vectors through the Go reference as well, when
// the default path is SIMD (TestQuantizeMatchesGGML then covers the SIMD path).
func TestQuantizeMatchesGGMLGoPath(t *testing.T) {
	if !simdOn() {
		t.Skip("the default path is already the Go code")
	}
	withGo(func() { TestQuantizeMatchesGGML(t) })
}
