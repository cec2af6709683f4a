package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAddColumnSums runs the column statistics of every implementation over rows with
// zeros, signed zeros, infinities, NaNs, subnormals and huge values, on column counts around
// the assembly's blocks of 32, against the test's own float64 sums (each square exact in
// float64, rows in order) and max|x| (NaN ignored), bit for bit.
func TestAddColumnSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 1e-40, -3e38, 65504, 1.5}
	forEachImpl(t, func(t *testing.T, impl string) {
		for _, cols := range []int{1, 31, 32, 33, 100, 1024} {
			for _, n := range []int{1, 7} {
				x := make([]float32, n*cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * math.Exp(4*rng.NormFloat64()))
					if rng.IntN(9) == 0 {
						x[i] = specials[rng.IntN(len(specials))]
					}
				}
				s2, s1, am := make([]float64, cols), make([]float64, cols), make([]float32, cols)
				w2, w1, wm := make([]float64, cols), make([]float64, cols), make([]float32, cols)
				for j := range s2 { // nonzero starting sums, as after earlier chunks
					s2[j], s1[j], am[j] = float64(j), -float64(j)/3, float32(j%5)
					w2[j], w1[j], wm[j] = s2[j], s1[j], am[j]
				}
				AddColumnSums(s2, s1, am, x, n, cols)
				for j := 0; j < cols; j++ {
					for r := 0; r < n; r++ {
						v := float64(x[r*cols+j])
						sq := v * v
						w2[j] += sq
						w1[j] += v
						if a := math.Abs(v); !math.IsNaN(a) && a > float64(wm[j]) {
							wm[j] = float32(a)
						}
					}
					if math.Float64bits(s2[j]) != math.Float64bits(w2[j]) || math.Float64bits(s1[j]) != math.Float64bits(w1[j]) ||
						math.Float32bits(am[j]) != math.Float32bits(wm[j]) {
						t.Fatalf("%d columns, %d rows, column %d: Σx² %v Σx %v max %v, want %v %v %v", cols, n, j, s2[j], s1[j], am[j], w2[j], w1[j], wm[j])
					}
				}
			}
		}
	})
}

// nearestBF16 rounds f to the nearest bfloat16 (ties to the even one) by comparing its two
// neighbours in float64 (past the largest finite one, infinity stands for 2^128, as in
// IEEE rounding); a NaN keeps its high half with the quiet bit set (ggml's
// ggml_compute_fp32_to_bf16).
func nearestBF16(f float32) uint16 {
	u := math.Float32bits(f)
	switch {
	case math.IsNaN(float64(f)):
		return uint16(u>>16) | 64
	case math.IsInf(float64(f), 0):
		return uint16(u >> 16)
	}
	lo := u &^ 0xffff
	hi := lo + 0x10000
	value := func(b uint32) float64 {
		if b&0x7fffffff == 0x7f800000 {
			return math.Copysign(math.Ldexp(1, 128), float64(f))
		}
		return float64(math.Float32frombits(b))
	}
	dl, dh := math.Abs(float64(f)-value(lo)), math.Abs(float64(f)-value(hi))
	switch {
	case dl < dh:
		return uint16(lo >> 16)
	case dh < dl:
		return uint16(hi >> 16)
	case (lo>>16)&1 == 0:
		return uint16(lo >> 16)
	}
	return uint16(hi >> 16)
}

// TestBF16Activations checks the bf16 activations that BF16 × bf16 products read (the widened
// Acts.f, and Acts.bf where the implementation keeps it) in every implementation against nearestBF16, over every exponent, ties,
// NaNs, infinities, subnormals and signed zeros, with a column count that leaves a tail past
// the assembly's 16 lanes.
func TestBF16Activations(t *testing.T) {
	const cols = 16*9 + 5
	var vals []float32
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0x18000, 0x7fffff, 0x7f8000, 0x12345} {
			vals = append(vals, math.Float32frombits(e<<23|m), math.Float32frombits(1<<31|e<<23|m))
		}
	}
	rows := make([]byte, 3*cols*2)
	m, err := NewMatrix(BF16, 3, cols, rows)
	if err != nil {
		t.Fatal(err)
	}
	m.Mode = ActQuant
	forEachImpl(t, func(t *testing.T, impl string) {
		nTok := max(bf16DotMinTokens, (len(vals)+cols-1)/cols)
		X := make([]float32, nTok*cols)
		copy(X, vals)
		var a Acts
		m.Prepare(&a, X, nTok)
		for i, v := range X {
			want := nearestBF16(v)
			if math.Float32bits(a.f[i]) != uint32(want)<<16 || len(a.bf) > 0 && a.bf[i] != want {
				t.Fatalf("%#08x: float %#08x (bf16 copy: %d values); want bf16 %#04x", math.Float32bits(v), math.Float32bits(a.f[i]), len(a.bf), want)
			}
		}
	})
}
