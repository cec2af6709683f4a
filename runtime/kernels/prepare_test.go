package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// prepareInput returns nTok rows of cols activations with the quantizers' corner cases: a zero
// block, values on rounding ties, a block whose largest magnitude is negative, two elements of
// equal magnitude and opposite sign (Q8_K takes the first), and an outlier.
func prepareInput(rng *rand.Rand, nTok, cols int) []float32 {
	X := make([]float32, nTok*cols)
	for i := range X {
		X[i] = float32(rng.NormFloat64())
	}
	if nTok > 1 {
		clear(X[cols : cols+min(cols, 256)]) // token 1 starts with a zero (super-)block
	}
	if nTok > 2 {
		row := X[2*cols : 3*cols]
		for i := range row {
			row[i] = float32(i%8) - 3.5
		}
		row[0] = -127
		if cols > 300 {
			row[300], row[260] = 9, -9
		}
	}
	X[len(X)-5] = 60
	return X
}

// TestPrepareImpls checks every implementation's activation conversion against the test's own
// transcription of ggml's quantizers (refQ8_0, refQ8_K), and the interleaved copy read by the
// assembly kernels against the package's generic interleaving of the same values; PrepareOn
// over a pool must give the same bytes as Prepare.
func TestPrepareImpls(t *testing.T) {
	pool := NewPool(3)
	defer pool.Close()
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(21, 22))
		for _, c := range []struct {
			wt   WType
			cols []int
		}{{Q4_0, []int{32, 544, 1024}}, {Q4_1, []int{96, 1056}}, {Q4_K, []int{256, 768}}} {
			for _, cols := range c.cols {
				for _, nTok := range []int{1, 3, 10} {
					name := fmt.Sprintf("%v/%d/%d", c.wt, cols, nTok)
					m, err := NewMatrix(c.wt, 1, cols, make([]byte, mustRowBytes(c.wt, cols)))
					if err != nil {
						t.Fatal(err)
					}
					m.Mode = ActQuant
					X := prepareInput(rng, nTok, cols)
					var a, b Acts
					m.Prepare(&a, X, nTok)
					m.PrepareOn(pool, &b, X, nTok)
					checkActsRef(t, name, &a, X)
					if !sameActs(&a, &b) {
						t.Errorf("%s: PrepareOn differs from Prepare", name)
					}
					if a.il == nil {
						continue
					}
					// The generic interleaving of the reference-checked ggml-layout values.
					g := Acts{kind: a.kind, nTok: a.nTok, cols: a.cols, qs: a.qs, d: a.d, s: a.s, bsums: a.bsums}
					ilSize(&g)
					for i := range g.il {
						g.il[i] = 0xee // padding must be written too
					}
					interleaveTokens(&g, 0, nTok)
					if !slices.Equal(a.il, g.il) {
						t.Errorf("%s: interleaved values differ from the generic interleaving", name)
					}
					used := 32 // words of a record in use: Q8_K has 16 sums and d
					if a.kind == actQ8_K {
						used = 17
					}
					for i := range g.ilM {
						if i%ilRecord < used && math.Float32bits(a.ilM[i]) != math.Float32bits(g.ilM[i]) {
							t.Fatalf("%s: record word %d = %#x, generic %#x", name, i, math.Float32bits(a.ilM[i]), math.Float32bits(g.ilM[i]))
						}
					}
				}
			}
		}
	})
}

func mustRowBytes(t WType, cols int) int {
	rb, err := t.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	return rb
}

// checkActsRef compares a's ggml-layout blocks with refQ8_0 / refQ8_K.
func checkActsRef(t *testing.T, name string, a *Acts, X []float32) {
	t.Helper()
	cols := a.cols
	for tok := 0; tok < a.nTok; tok++ {
		x := X[tok*cols : (tok+1)*cols]
		if a.kind == actQ8_K {
			nb := cols / 256
			for b := 0; b < nb; b++ {
				q, d := refQ8_K(x[256*b : 256*b+256])
				if got := a.d[tok*nb+b]; float64(got) != d {
					t.Fatalf("%s: token %d Q8_K block %d: d %v, want %v", name, tok, b, got, d)
				}
				for j := 0; j < 16; j++ {
					sum := 0
					for i := 16 * j; i < 16*j+16; i++ {
						if got := a.qs[tok*cols+256*b+i]; int(got) != q[i] {
							t.Fatalf("%s: token %d Q8_K block %d value %d: %d, want %d", name, tok, b, i, got, q[i])
						}
						sum += q[i]
					}
					if got := a.bsums[16*(tok*nb+b)+j]; int(got) != sum {
						t.Fatalf("%s: token %d Q8_K block %d sum %d: %d, want %d", name, tok, b, j, got, sum)
					}
				}
			}
			continue
		}
		nb := cols / 32
		for b := 0; b < nb; b++ {
			q, d, s := refQ8_0(x[32*b : 32*b+32])
			if got := a.d[tok*nb+b]; float64(got) != d {
				t.Fatalf("%s: token %d block %d: d %v, want %v", name, tok, b, got, d)
			}
			if a.kind == actQ8_1 {
				if got := a.s[tok*nb+b]; float64(got) != s {
					t.Fatalf("%s: token %d block %d: s %v, want %v", name, tok, b, got, s)
				}
			}
			for i := range q {
				if got := a.qs[tok*cols+32*b+i]; int(got) != q[i] {
					t.Fatalf("%s: token %d block %d value %d: %d, want %d", name, tok, b, i, got, q[i])
				}
			}
		}
	}
}

// sameActs reports whether two prepared batches hold the same bytes.
func sameActs(a, b *Acts) bool {
	bits := func(v []float32) []uint32 {
		out := make([]uint32, len(v))
		for i, f := range v {
			out[i] = math.Float32bits(f)
		}
		return out
	}
	return a.kind == b.kind && a.nTok == b.nTok && slices.Equal(a.qs, b.qs) &&
		slices.Equal(bits(a.d), bits(b.d)) && slices.Equal(bits(a.s), bits(b.s)) &&
		slices.Equal(a.bsums, b.bsums) && slices.Equal(a.il, b.il) && slices.Equal(bits(a.ilM), bits(b.ilM))
}
