package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// iqTypes are the i-quants on a grid and the ternary types.
var iqTypes = []WType{IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0}

// TestIQShapes runs the i-quant and ternary products on random shapes (rows that are not a
// multiple of anything, 1 to 12 super-blocks per row, 1 to 21 tokens so that every tile of the
// GEMM kernels and the GEMV remainder take part) under every implementation: each must stay
// within float rounding of the generic Go code and of the test's float64 reference, and give
// every token the bits a product of that token alone gives it.
func TestIQShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, wt := range iqTypes {
		for range 6 {
			rows, cols, nTok := 1+rng.IntN(150), 256*(1+rng.IntN(12)), 1+rng.IntN(21)
			var data []byte
			for r := 0; r < rows; r++ {
				data = append(data, genRow(wt, cols, rng, rng.IntN(4))...)
			}
			m, err := NewMatrix(wt, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			m.Mode = ActQuant
			X := make([]float32, nTok*cols)
			for i := range X {
				X[i] = float32(rng.NormFloat64())
			}
			results := map[string][]float32{}
			for _, name := range Impls() {
				restore, _ := SetImpl(name)
				var s Scratch
				Y := make([]float32, nTok*rows)
				m.MatMul(Y, X, nTok, 0, rows, &s)
				y1 := make([]float32, rows)
				for tok := 0; tok < nTok; tok++ {
					m.MatVec(y1, X[tok*cols:(tok+1)*cols], 0, rows, &s)
					for r, v := range y1 {
						if math.Float32bits(v) != math.Float32bits(Y[tok*rows+r]) {
							t.Fatalf("%v %s %dx%d, %d tokens: token %d row %d: batch %v, alone %v", wt, name, rows, cols, nTok, tok, r, Y[tok*rows+r], v)
						}
					}
				}
				restore()
				results[name] = Y
			}
			ref := results["generic"]
			for name, Y := range results {
				for i, v := range Y {
					if d := math.Abs(float64(v - ref[i])); d > 1e-4*math.Abs(float64(ref[i]))+2e-3*rmsOf(ref) {
						t.Errorf("%v %s %dx%d, %d tokens: [%d] = %v, generic %v", wt, name, rows, cols, nTok, i, v, ref[i])
					}
				}
			}
			for tok := 0; tok < nTok; tok++ {
				r := rng.IntN(rows)
				want, mag := refQuantDot(m, r, X[tok*cols:(tok+1)*cols])
				if got := ref[tok*rows+r]; !close64(got, want, mag, 2e-6*math.Sqrt(float64(cols))) {
					t.Errorf("%v %dx%d: token %d row %d: generic %v, float64 %v", wt, rows, cols, tok, r, got, want)
				}
			}
		}
	}
}

// TestIQPackedValues checks the packed layouts against the test's own decoding: for every
// element of random blocks, the code the packed copy holds, mapped through the kernels' value
// table (iqValue), times the lane's scale and d, is the reference value (ref_test.go).
func TestIQPackedValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, wt := range iqTypes {
		cols := 512
		for kind := range 4 {
			row := genRow(wt, cols, rng, kind)
			m, err := NewMatrix(wt, 1, cols, row)
			if err != nil {
				t.Fatal(err)
			}
			p := packMatrix(m)
			gb, _ := groupBytes(wt)
			el := refDecode(wt, row, cols)
			for e := 0; e < cols; e++ {
				g := p.data[e/256*gb : (e/256+1)*gb]
				got := iqPackedValue(wt, g, e%256)
				want := el[e].scale * float64(el[e].code)
				if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
					t.Fatalf("%v kind %d element %d: packed %v, reference %v", wt, kind, e, got, want)
				}
			}
		}
	}
}

// iqPackedValue decodes element e of a packed group (pack.go's layout notes, written again
// here): the code, the plane bit, the value table, the lane scale and d.
func iqPackedValue(t WType, g []byte, e int) float64 {
	i := ilIndex(e, 16)
	s, pos := i/64, i%64
	var v int
	switch t {
	case IQ3_XXS, IQ3_S:
		nib := int(g[64*(s/2)+pos]>>(4*(s%2))) & 15
		mags := iq3XXSMagnitudes
		if t == IQ3_S {
			mags = iq3SMagnitudes
		}
		v = mags[nib&7]
		if nib&8 != 0 {
			v = -v
		}
	case TQ1_0, TQ2_0:
		v = int(g[pos]>>(2*s))&3 - 1
	default:
		c := int(g[pos]>>(2*s)) & 3
		bit := g[64+8*s+pos/8]>>(pos%8)&1 != 0
		switch t {
		case IQ1_S, IQ1_M:
			v = 8*(c-1) + 1
			if bit {
				v -= 2
			}
		default:
			v = iq2Magnitudes[c]
			if bit {
				v = -v
			}
		}
	}
	gb, _ := groupBytes(t)
	if t == TQ1_0 || t == TQ2_0 {
		return float64(v) * refHalf(u16(g[64:]))
	}
	d := float64(math.Float32frombits(le32(g[gb-4:])))
	return float64(v) * float64(g[gb-20+pos/4]) * d
}
