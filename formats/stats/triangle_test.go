package stats

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A TriangleFile folds as FoldUpperZero does in memory (blocks of the file cut rows; one
// goroutine or three), twice over, and a statistics file written from it has the bytes of one
// written from memory.
func TestTriangleFile(t *testing.T) {
	const c = 400 // 80,200 values: two blocks, the second starting inside a row
	r := rand.New(rand.NewPCG(15, 16))
	parts := make([][]float64, 2)
	for p := range parts {
		parts[p] = make([]float64, c*c)
		for i := range parts[p] {
			parts[p][i] = math.Ldexp(r.NormFloat64(), r.IntN(60)-40)
			if i%(c+1) == 0 {
				parts[p][i] = math.Abs(parts[p][i])
			}
		}
	}
	mem := make([]Fixed, TriangleLen(c))
	for _, h := range parts {
		if _, _, ok := FoldUpperZero(mem, slices.Clone(h), c, 1); !ok {
			t.Fatal("refused")
		}
	}
	dir := t.TempDir()
	for _, threads := range []int{1, 3} {
		f, err := os.CreateTemp(dir, "tri")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tf, err := NewTriangleFile(f, []string{"a", "w"}, []int{3, c})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			h := slices.Clone(p)
			if i, j, ok, err := tf.FoldZero("w", h, threads); !ok || err != nil {
				t.Fatalf("%d goroutines: (%d, %d) %v %v", threads, i, j, ok, err)
			}
			checkZeroUpper(t, h, p, c)
		}
		got := make([]Fixed, TriangleLen(c))
		if _, err := tf.Triangle("w").readFixed(0, got, nil); err != nil || !slices.Equal(got, mem) {
			t.Fatalf("%d goroutines: the file's triangle differs from memory's (%v)", threads, err)
		}
		a := make([]Fixed, 6)
		if _, err := tf.Triangle("a").readFixed(0, a, nil); err != nil || slices.ContainsFunc(a, func(f Fixed) bool { return f != Fixed{} }) {
			t.Fatalf("the other triangle is %v (%v), want zeros", a, err)
		}

		// A statistics file's last fold from the file and from memory: the same bytes.
		last := parts[0]
		var files [2][]byte
		for k, acc := range []ExactTriangle{Triangle(mem), tf.Triangle("w")} {
			path := filepath.Join(dir, "s.stats")
			w, err := Create(path, oneWeight(c, 4, 2))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteHessianSum("w", acc, last, threads); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			files[k], _ = os.ReadFile(path)
		}
		if len(files[0]) == 0 || !slices.Equal(files[0], files[1]) {
			t.Fatalf("%d goroutines: statistics written from the file differ from those written from memory", threads)
		}

		// A sum that does not fit names its element.
		h := make([]float64, c*c)
		h[300*c+350] = math.Inf(-1)
		if i, j, ok, err := tf.FoldZero("w", h, threads); ok || err != nil || i != 300 || j != 350 {
			t.Errorf("an Inf at (300, 350): (%d, %d) %v %v", i, j, ok, err)
		}
	}
}
