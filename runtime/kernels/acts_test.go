package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestHalfConversions checks fp16/bf16 conversions: every fp16 value widens exactly and
// narrows back to itself, and float32 values round as an independent float64 rounding does
// (ties to even, subnormals, overflow).
func TestHalfConversions(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32(uint16(h))
		if want := refHalf(uint16(h)); !(float64(f) == want || math.IsNaN(want) && f != f) {
			t.Fatalf("f16ToF32(%#04x) = %v, want %v", h, f, want)
		}
		if f == f && f32ToF16(f) != uint16(h) {
			t.Fatalf("f32ToF16(f16ToF32(%#04x)) = %#04x", h, f32ToF16(f))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	edge := []float32{0, 65504, 65519.99, 65520, 1e6, 5.960464477539063e-08, 2.98e-08, 2.9802322387695312e-08,
		6.097555160522461e-05, 1 + 1.0/2048, 1 + 3.0/2048, 1.5 * 5.960464477539063e-08}
	for i := 0; i < 200000; i++ {
		f := math.Float32frombits(rng.Uint32())
		if i < len(edge) {
			f = edge[i]
		} else if f != f || math.Abs(float64(f)) > 1e6 {
			continue
		}
		for _, v := range []float32{f, -f} {
			if got, want := f32ToF16(v), f32ToF16Test(v); got != want {
				t.Fatalf("f32ToF16(%v) = %#04x, want %#04x", v, got, want)
			}
		}
	}
	// bf16: ties to even on the 16 dropped bits.
	for _, c := range []struct {
		in   uint32
		want uint16
	}{{0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, {0x7f7fffff, 0x7f80}, {0x7fc00001, 0x7fc0}} {
		if got := f32ToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("f32ToBF16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

// TestQuantizeActs compares the package's Q8_0, Q8_1 and Q8_K activation blocks with the test's
// own transcription of ggml's quantizers, value by value, on random data, exact ties, zeros and
// blocks whose maximum is negative.
func TestQuantizeActs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 4*256)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	clear(x[256:512])            // a zero super-block
	for i := 512; i < 768; i++ { // values whose scaled form lands on .5 ties
		x[i] = float32(i%8) - 3.5
	}
	x[512] = -127 // max |x| is negative: Q8_K scale is negative
	qs, d, s := make([]int8, len(x)), make([]float32, len(x)/32), make([]float32, len(x)/32)
	quantizeQ8_0(qs, d, s, x)
	for b := 0; b < len(x)/32; b++ {
		q, dd, ss := refQ8_0(x[32*b : 32*b+32])
		if float64(d[b]) != dd || float64(s[b]) != ss {
			t.Fatalf("Q8_0 block %d: d %v s %v, want %v %v", b, d[b], s[b], dd, ss)
		}
		for i := range q {
			if int(qs[32*b+i]) != q[i] {
				t.Fatalf("Q8_0 block %d value %d: %d, want %d", b, i, qs[32*b+i], q[i])
			}
		}
	}
	dk, bs := make([]float32, len(x)/256), make([]int16, len(x)/16)
	quantizeQ8_K(qs, dk, bs, x)
	for b := 0; b < len(x)/256; b++ {
		q, dd := refQ8_K(x[256*b : 256*b+256])
		if float64(dk[b]) != dd {
			t.Fatalf("Q8_K block %d: d %v, want %v", b, dk[b], dd)
		}
		for j := 0; j < 16; j++ {
			sum := 0
			for i := 16 * j; i < 16*j+16; i++ {
				if int(qs[256*b+i]) != q[i] {
					t.Fatalf("Q8_K block %d value %d: %d, want %d", b, i, qs[256*b+i], q[i])
				}
				sum += q[i]
			}
			if int(bs[16*b+j]) != sum {
				t.Fatalf("Q8_K block %d bsum %d: %d, want %d", b, j, bs[16*b+j], sum)
			}
		}
	}
	// ggml's Q8_K scale is 1/(-127/max): negative when the extreme value is positive.
	if dk[2] != 1 {
		t.Errorf("Q8_K scale of a block whose extreme is -127: %v, want 1", dk[2])
	}
}

// TestAsmMatchesGeneric runs larger products (several row tiles, several tokens) under every
// implementation and compares them with the generic one.
func TestAsmMatchesGeneric(t *testing.T) {
	if len(Impls()) == 1 {
		t.Skip("no assembly implementation on this machine")
	}
	defer forceTiles()()
	rng := rand.New(rand.NewPCG(7, 8))
	for _, wt := range Types {
		cols := 1024 + 32
		switch {
		case wt.BlockSize() == 256:
			cols = 1280
		case wt.BlockSize() == 1:
			cols = 1000 + 13
		}
		rows, nTok := 37, 5
		var data []byte
		for r := 0; r < rows; r++ {
			data = append(data, genRow(wt, cols, rng, 3)...)
		}
		m, err := NewMatrix(wt, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		X := make([]float32, nTok*cols)
		for i := range X {
			X[i] = float32(rng.NormFloat64())
		}
		for _, mode := range []ActMode{ActFloat, ActQuant} {
			m.Mode = mode
			results := map[string][]float32{}
			for _, name := range Impls() {
				restore, _ := SetImpl(name)
				Y := make([]float32, nTok*rows)
				var s Scratch
				m.MatMul(Y, X, nTok, 0, rows, &s)
				y1 := make([]float32, rows) // decode path: one token
				m.MatVec(y1, X[cols:2*cols], 3, rows, &s)
				restore()
				for r := 3; r < rows; r++ {
					// Quantized products are batch-invariant (one kernel per token); float ones
					// of 4+ tokens use a GEMM kernel whose sums run in another order.
					exact := wt.quantized() || name == "generic"
					if d := math.Abs(float64(y1[r] - Y[rows+r])); exact && d != 0 || d > 1e-5*math.Abs(float64(y1[r]))+1e-3*rmsOf(Y) {
						t.Errorf("%v %v %s: MatVec row %d = %v, MatMul gave %v", wt, mode, name, r, y1[r], Y[rows+r])
					}
				}
				results[name] = Y
			}
			ref := results["generic"]
			for name, Y := range results {
				for i, v := range Y {
					// Tolerance: float32 rounding of sums of ~1000 terms of magnitude |y|-ish.
					if d := math.Abs(float64(v - ref[i])); d > 1e-4*math.Abs(float64(ref[i]))+2e-3*rmsOf(ref) {
						t.Errorf("%v %v: %s[%d] = %v, generic %v", wt, mode, name, i, v, ref[i])
					}
				}
			}
		}
	}
}

func rmsOf(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s/float64(len(v))) * 1e-3
}

func TestNewMatrixErrors(t *testing.T) {
	for _, c := range []struct {
		t          WType
		rows, cols int
		n          int
	}{{Q4_0, 2, 48, 0}, {Q4_K, 1, 512, 10}, {WType(99), 1, 32, 18}, {F32, 0, 4, 0}, {Q8_0, 2, 32, 34}} {
		if _, err := NewMatrix(c.t, c.rows, c.cols, make([]byte, c.n)); err == nil {
			t.Errorf("NewMatrix(%v, %d, %d, %d bytes) succeeded", c.t, c.rows, c.cols, c.n)
		}
	}
}
