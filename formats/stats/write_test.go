package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// oneWeight returns statistics of one linear weight of c columns with a Hessian still to be
// written, over chunks [0, chunks) of as many windows folded in groups of fold.
func oneWeight(c, chunks, fold int) *Stats {
	ls := NewLinearStats("w", c)
	ls.Count = 1
	ls.Round()
	return &Stats{Kind: "gquant", Linear: []*LinearStats{ls}, Meta: Meta{
		Hessian: true, Chunks: chunks, WindowChunks: chunks, Shards: 1, ShardIndex: []int{0},
		ChunkSet: []ChunkRange{{0, chunks}}, FoldChunks: fold,
	}}
}

// WriteHessianSum writes the exact triangle plus the upper triangle of a float64 matrix, each
// element rounded to the grid (FixedOf, checked against math/big), whatever the goroutines:
// as 128-bit integers, or as float64s for statistics of one fold group (elements below 2^-11
// rounded to the grid); and the file reads back to those sums.
func TestWriteHessianSum(t *testing.T) {
	const c = 301 // TriangleLen above foldMinWork: several goroutines
	r := rand.New(rand.NewPCG(13, 14))
	h := make([]float64, c*c)
	for i := range h {
		h[i] = math.Ldexp(r.NormFloat64(), r.IntN(80)-60) // some below 2^-11, some far below 2^-64
		if i%(c+1) == 0 {
			h[i] = math.Abs(h[i]) // a Σx² on the diagonal
		}
	}
	acc := make([]Fixed, TriangleLen(c))
	for k := range acc {
		acc[k], _ = FixedOf(math.Ldexp(math.Abs(r.NormFloat64()), r.IntN(60)-30))
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name          string
		chunks, fold  int
		acc           []Fixed
		threads       int
		compact       bool
		tensorType    gguf.Type
		tensorEntries uint64
	}{
		{"pairs", 4, 2, acc, 4, false, gguf.I64, 2 * uint64(TriangleLen(c))},
		{"pairs, one goroutine", 4, 2, acc, 1, false, gguf.I64, 2 * uint64(TriangleLen(c))},
		{"pairs, no triangle", 4, 1, nil, 2, false, gguf.I64, 2 * uint64(TriangleLen(c))},
		{"one fold group", 4, 4, nil, 2, true, gguf.F64, uint64(TriangleLen(c))},
	} {
		s := oneWeight(c, tc.chunks, tc.fold)
		if s.Meta.OneFold() != tc.compact {
			t.Fatalf("%s: OneFold %v", tc.name, !tc.compact)
		}
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".stats")
		w, err := Create(path, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteHessianSum("w", Triangle(tc.acc), h, tc.threads); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		gf, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		i, _ := gf.TensorIndex("w" + sufHessianExact)
		ti := gf.Tensors[i]
		gf.Close()
		if ti.Type != tc.tensorType || gguf.ElementCount(ti.Shape) != tc.tensorEntries {
			t.Errorf("%s: %s is %v %v", tc.name, ti.Name, ti.Type, ti.Shape)
		}
		back, err := Read(path)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, n, err := back.Hessian("w")
		if err != nil || n != c {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var k int
		err = back.Linear[0].hessian.blocks(func(off int, block []Fixed) error {
			for _, f := range block {
				i := triRowOf(off, c)
				j := off - triRow(i, c) + i
				want, _ := FixedOf(h[i*c+j])
				if tc.acc != nil {
					want, _ = want.Add(tc.acc[off])
				}
				if f != want || got[i*c+j] != want.Float64() || got[j*c+i] != want.Float64() {
					t.Fatalf("%s: (%d, %d): %v (%g), want %v", tc.name, i, j, f, got[i*c+j], want)
				}
				off++
				k++
			}
			return nil
		})
		if err != nil || k != TriangleLen(c) {
			t.Fatalf("%s: %d values read, %v", tc.name, k, err)
		}
	}

	// Sums that cannot be held: an Inf, in either form; a sum that is no float64 in a file
	// of one fold group. Nothing is left behind.
	bad := []struct {
		name string
		fold int
		acc  []Fixed
		want string
	}{
		{"Inf", 1, acc, "w: Hessian[5, 7]: the sum +Inf is not finite or leaves the exact range ±2^63"},
		{"Inf, one fold group", 4, nil, "w: Hessian[5, 7]: the sum +Inf is not finite or leaves the exact range ±2^63"},
		{"no float64", 4, nil, fmt.Sprintf("w.hessian_exact[%d]: the sum (about 1) is not a float64, as in statistics of one fold group", triRow(5, c)+2)},
	}
	h[5*c+7] = math.Inf(1)
	for _, b := range bad {
		if b.name == "no float64" {
			h[5*c+7] = 1 // 1 + 2^-60: 61 bits
			b.acc = make([]Fixed, TriangleLen(c))
			b.acc[triRow(5, c)+2], _ = FixedOf(0x1p-60)
		}
		out := filepath.Join(t.TempDir(), "bad.stats")
		w, err := Create(out, oneWeight(c, 4, b.fold))
		if err != nil {
			t.Fatal(err)
		}
		err = w.WriteHessianSum("w", Triangle(b.acc), h, 2)
		if err == nil || !strings.Contains(err.Error(), out+": "+b.want) {
			t.Errorf("%s: %v, want %q", b.name, err, b.want)
		}
		w.Abort()
		if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
			t.Errorf("%s: %d files left", b.name, len(entries))
		}
	}
}
