package quantize

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// allTypes is every type with a codec: the ggml-checked ones plus F32.
func allTypes() []gguf.Type {
	ts := []gguf.Type{gguf.F32}
	for t := range ggmlNames {
		ts = append(ts, t)
	}
	return ts
}

func TestForAndRowBytes(t *testing.T) {
	for _, typ := range allTypes() {
		e, err := For(typ)
		if err != nil {
			t.Fatalf("For(%s): %v", typ, err)
		}
		if e.Type() != typ || e.BlockSize() != typ.BlockSize() || e.BlockBytes() != typ.TypeSize() {
			t.Errorf("%s: codec says type %s, block %d × %d bytes", typ, e.Type(), e.BlockSize(), e.BlockBytes())
		}
		if got, want := RowBytes(typ, 4*256), 4*256/typ.BlockSize()*typ.TypeSize(); got != want {
			t.Errorf("RowBytes(%s, 1024) = %d, want %d", typ, got, want)
		}
	}
	if len(Types()) != len(allTypes()) {
		t.Errorf("Types() = %v, want %d types", Types(), len(allTypes()))
	}
	for _, typ := range []gguf.Type{gguf.Q8_1, gguf.Q8_K, gguf.I32, gguf.Type(99)} {
		if _, err := For(typ); err == nil {
			t.Errorf("For(%s) gave a codec; want an error", typ)
		}
	}
}

// gaussianRows makes nrows rows of n standard-normal values times scale.
func gaussianRows(seed uint64, nrows, n int, scale float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, nrows*n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// relRMSE is sqrt(Σ w (x − y)² / Σ w x²), with w = 1 when im is nil, else im of the column.
func relRMSE(x, y []float32, n int, im []float32) float64 {
	var num, den float64
	for i := range x {
		w := 1.0
		if im != nil {
			w = float64(im[i%n])
		}
		d := float64(x[i]) - float64(y[i])
		num += w * d * d
		den += w * float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(num / den)
}

// orUnit is im, or a uniform importance matrix of n ones when im is nil and typ can only be
// quantized with one (needsImatrix): the tests' "plain" case for those types.
func orUnit(typ gguf.Type, im []float32, n int) []float32 {
	if im != nil || !needsImatrix[typ] {
		return im
	}
	u := make([]float32, n)
	for j := range u {
		u[j] = 1
	}
	return u
}

func roundTrip(e Encoding, x []float32, nrows, n int, im []float32) []float32 {
	q := make([]byte, RowBytes(e.Type(), n)*nrows)
	e.Quantize(q, x, nrows, n, orUnit(e.Type(), im, n))
	y := make([]float32, len(x))
	e.Dequantize(y, q)
	return y
}

// TestRoundTripError bounds the relative RMS error of encode+decode on Gaussian rows. The
// bounds are a little above the error of a uniform quantizer of the type's bits over ±3σ
// (2^-b·6/√12 relative to σ), so a broken scale or bit layout fails them by far.
func TestRoundTripError(t *testing.T) {
	bounds := map[gguf.Type]float64{
		gguf.F32: 0, gguf.F16: 0.0005, gguf.BF16: 0.004, gguf.Q8_0: 0.01,
		gguf.Q6_K: 0.03, gguf.Q5_0: 0.06, gguf.Q5_1: 0.06, gguf.Q5_K: 0.05,
		gguf.Q4_0: 0.12, gguf.Q4_1: 0.12, gguf.Q4_K: 0.1, gguf.IQ4_NL: 0.11, gguf.IQ4_XS: 0.11,
		gguf.Q3_K: 0.22, gguf.Q2_K: 0.45, gguf.IQ3_S: 0.19, gguf.IQ3_XXS: 0.24,
		// Ternary with d = max|x|: on Gaussian rows most values round to 0.
		gguf.TQ1_0: 0.85, gguf.TQ2_0: 0.85,
		// The i-quants on lattice grids, measured 0.27 (IQ2_S) to 0.34 (IQ2_XXS) and 0.48
		// (IQ1_S, with a uniform imatrix); IQ1_M without an imatrix weights by x² only (0.59).
		gguf.IQ2_S: 0.3, gguf.IQ2_XS: 0.33, gguf.IQ2_XXS: 0.38, gguf.IQ1_S: 0.53, gguf.IQ1_M: 0.65,
	}
	const nrows, n = 16, 512
	x := gaussianRows(7, nrows, n, 0.05)
	for _, typ := range allTypes() {
		e, _ := For(typ)
		got := relRMSE(x, roundTrip(e, x, nrows, n, nil), n, nil)
		if got > bounds[typ] {
			t.Errorf("%s: relative RMS error %.4f > %.4f", typ, got, bounds[typ])
		}
		t.Logf("%-6s rel. RMSE %.4f", typ, got)
	}
}

// TestImatrixLowersWeightedError checks that, for the types that use it, an importance matrix
// lowers the error weighted by that importance (summed over many rows).
func TestImatrixLowersWeightedError(t *testing.T) {
	const nrows, n = 64, 512
	x := gaussianRows(11, nrows, n, 1)
	r := rand.New(rand.NewPCG(3, 4))
	im := make([]float32, n)
	for j := range im {
		im[j] = float32(math.Exp(3 * r.NormFloat64())) // importance spread over decades
	}
	for _, typ := range allTypes() {
		if typ == gguf.F32 || ignoresImatrix[typ] {
			continue
		}
		e, _ := For(typ)
		plain := relRMSE(x, roundTrip(e, x, nrows, n, nil), n, im)
		weighted := relRMSE(x, roundTrip(e, x, nrows, n, im), n, im)
		t.Logf("%-6s importance-weighted rel. RMSE: plain %.4f, with imatrix %.4f", typ, plain, weighted)
		if weighted >= plain {
			t.Errorf("%s: imatrix does not lower the weighted error (%.4f ≥ %.4f)", typ, weighted, plain)
		}
	}
}

func TestZeroRowsDecodeToZero(t *testing.T) {
	const n = 256
	for _, neg := range []bool{false, true} {
		x := make([]float32, n)
		if neg {
			for i := range x {
				x[i] = float32(math.Copysign(0, -1))
			}
		}
		for _, typ := range allTypes() {
			e, _ := For(typ)
			for _, v := range roundTrip(e, x, 1, n, nil) {
				if v != 0 {
					t.Fatalf("%s: zero row decodes to %g", typ, v)
				}
			}
		}
	}
}

// TestRowsIndependentAndConcurrent quantizes rows one by one from many goroutines (into
// disjoint parts of one buffer) and expects the bytes of a single whole-tensor call.
func TestRowsIndependentAndConcurrent(t *testing.T) {
	const nrows, n = 24, 512
	x := gaussianRows(5, nrows, n, 0.1)
	im := make([]float32, n)
	for j := range im {
		im[j] = float32(1 + j%7)
	}
	for _, typ := range allTypes() {
		e, _ := For(typ)
		for _, w := range [][]float32{orUnit(typ, nil, n), im} {
			rb := RowBytes(typ, n)
			whole := make([]byte, rb*nrows)
			e.Quantize(whole, x, nrows, n, w)
			parts := make([]byte, rb*nrows)
			var wg sync.WaitGroup
			for r := 0; r < nrows; r++ {
				wg.Go(func() {
					e.Quantize(parts[r*rb:(r+1)*rb], x[r*n:(r+1)*n], 1, n, w)
				})
			}
			wg.Wait()
			if !bytes.Equal(whole, parts) {
				t.Errorf("%s (imatrix %v): row-by-row concurrent quantization differs from one call", typ, w != nil)
			}
		}
	}
}

func TestBadShapesPanic(t *testing.T) {
	e, _ := For(gguf.Q4_K)
	cases := map[string]func(){
		"row not a multiple of the block": func() { e.Quantize(make([]byte, 144), make([]float32, 255), 1, 255, nil) },
		"short dst":                       func() { e.Quantize(make([]byte, 143), make([]float32, 256), 1, 256, nil) },
		"short src":                       func() { e.Quantize(make([]byte, 288), make([]float32, 256), 2, 256, nil) },
		"short imatrix":                   func() { e.Quantize(make([]byte, 144), make([]float32, 256), 1, 256, make([]float32, 32)) },
		"partial block decode":            func() { e.Dequantize(make([]float32, 256), make([]byte, 100)) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func BenchmarkQuantize(b *testing.B) {
	const nrows, n = 16, 4096
	x := gaussianRows(1, nrows, n, 0.02)
	im := make([]float32, n)
	for j := range im {
		im[j] = float32(1 + j%5)
	}
	for _, typ := range Types() {
		e, _ := For(typ)
		q := make([]byte, RowBytes(typ, n)*nrows)
		for _, variant := range []string{"plain", "imat"} {
			w := orUnit(typ, nil, n)
			if variant == "imat" {
				w = im
			}
			b.Run(typ.String()+"/"+variant, func(b *testing.B) {
				b.SetBytes(int64(4 * len(x)))
				for b.Loop() {
					e.Quantize(q, x, nrows, n, w)
				}
			})
		}
	}
}

func BenchmarkDequantize(b *testing.B) {
	const nrows, n = 16, 4096
	x := gaussianRows(1, nrows, n, 0.02)
	y := make([]float32, len(x))
	for _, typ := range Types() {
		e, _ := For(typ)
		q := make([]byte, RowBytes(typ, n)*nrows)
		e.Quantize(q, x, nrows, n, orUnit(typ, nil, n))
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(4 * len(y)))
			for b.Loop() {
				e.Dequantize(y, q)
			}
		})
	}
}

// TestNonFiniteInputsDoNotPanic: NaN, ±Inf and huge values give unspecified bytes (as in ggml)
// but must not crash the encoder or the decoder.
func TestNonFiniteInputsDoNotPanic(t *testing.T) {
	const n = 256
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)}
	for j := 0; j < n; j++ {
		rows[0][j] = nan
		rows[1][j] = float32(j%3-1) * inf
		rows[2][j] = float32(j) * 1e37
		rows[3][j] = float32(j%5) - 2
	}
	rows[3][7], rows[3][100] = nan, -inf
	im := make([]float32, n)
	for j := range im {
		im[j] = 1
	}
	for _, typ := range allTypes() {
		e, _ := For(typ)
		for _, x := range rows {
			for _, w := range [][]float32{nil, im} {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("%s: panic on non-finite input: %v", typ, r)
						}
					}()
					roundTrip(e, x, 1, n, w)
				}()
			}
		}
	}
}
