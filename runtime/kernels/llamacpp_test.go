package kernels

import (
	"encoding/binary"
	"math"
	"os"
	"testing"
)

// TestMatchesLlamaCpp checks ActQuant products against llama.cpp's own vec_dot results
// (testdata/README.md): the activations are converted here from the same float inputs, so this
// covers the activation quantizers as well as the dot products.
func TestMatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("testdata/llamacpp_vecdot.bin")
	if err != nil {
		t.Fatal(err)
	}
	u32 := func() int {
		v := binary.LittleEndian.Uint32(raw)
		raw = raw[4:]
		return int(v)
	}
	f32s := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		raw = raw[4*n:]
		return v
	}
	ntypes, cols, ntok := u32(), u32(), u32()
	x := f32s(ntok * cols)
	type tc struct {
		m *Matrix
		y []float32
	}
	var cases []tc
	for i := 0; i < ntypes; i++ {
		wt, rows := WType(u32()), u32()
		rb, err := wt.RowBytes(cols)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMatrix(wt, rows, cols, raw[:rows*rb])
		if err != nil {
			t.Fatal(err)
		}
		raw = raw[rows*rb:]
		cases = append(cases, tc{m, f32s(ntok * rows)})
	}
	if len(cases) != len(Types) {
		t.Fatalf("%d types in the vectors, want %d", len(cases), len(Types))
	}
	forEachImpl(t, func(t *testing.T, impl string) {
		for _, c := range cases {
			m := c.m
			m.Mode = ActQuant
			Y := make([]float32, ntok*m.Rows)
			var s Scratch
			m.MatMul(Y, x, ntok, 0, m.Rows, &s)
			for r := 0; r < m.Rows; r++ {
				w := refValues(m.Type, m.Data[r*m.RowBytes():(r+1)*m.RowBytes()], cols)
				for tok := 0; tok < ntok; tok++ {
					var mag float64
					for k, v := range w {
						mag += math.Abs(v * float64(x[tok*cols+k]))
					}
					got, want := Y[tok*m.Rows+r], c.y[tok*m.Rows+r]
					if math.Abs(float64(got-want)) > 3e-7*mag {
						t.Errorf("%v row %d token %d: got %v, llama.cpp %v (diff %.3g, Σ|w·x| %.3g)", m.Type, r, tok, got, want, got-want, mag)
					}
				}
			}
		}
	})
}
