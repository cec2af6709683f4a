package quantize

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// The SIMD searches (search_amd64.s) must give exactly the bytes of the Go code, which is their
// reference (and is itself checked against ggml by the vectors and stress tests, which run
// through the SIMD path whenever the CPU has it). These tests compare both paths on many
// random super-blocks of awkward shapes.

// simdOn reports whether this build and CPU use a SIMD search.
func simdOn() bool { return useSIMDSearch }

// withGo runs f with the SIMD searches switched off (the pure Go reference).
func withGo(f func()) {
	on := useSIMDSearch
	useSIMDSearch = false
	defer func() { useSIMDSearch = on }()
	f()
}

// searchGenerators make rows of 256·k values that stress different parts of the searches.
var searchGenerators = map[string]func(r *rand.Rand, x []float32){
	"normal": func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.NormFloat64() * 0.02)
		}
	},
	"heavy-tailed": func(r *rand.Rand, x []float32) { // Student-t-like: normal / |normal|
		for i := range x {
			x[i] = float32(r.NormFloat64() / (math.Abs(r.NormFloat64()) + 0.05))
		}
	},
	"positive": func(r *rand.Rand, x []float32) { // min > 0 everywhere
		for i := range x {
			x[i] = float32(1 + r.Float64())
		}
	},
	"negative": func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(-0.5 - r.Float64())
		}
	},
	"zeros": func(r *rand.Rand, x []float32) { clear(x) },
	"constant": func(r *rand.Rand, x []float32) {
		c := float32(r.NormFloat64())
		for i := range x {
			x[i] = c
		}
	},
	"subnormal": func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.NormFloat64() * 1e-39)
		}
	},
	"huge": func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.NormFloat64() * 1e37)
		}
	},
	"small-integers": func(r *rand.Rand, x []float32) { // ties in the rounding, repeated levels
		for i := range x {
			x[i] = float32(r.IntN(7) - 3)
		}
	},
	"non-finite": func(r *rand.Rand, x []float32) { // NaN, ±Inf and overflowing ranges here and there
		for i := range x {
			x[i] = float32(r.NormFloat64())
			if r.IntN(40) == 0 {
				x[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 3e38, -3e38}[r.IntN(5)]
			}
		}
	},
	"mixed-sub-blocks": func(r *rand.Rand, x []float32) { // each 16 values: a different kind
		for j := 0; j < len(x); j += 16 {
			kind := r.IntN(6)
			for i := j; i < j+16; i++ {
				switch kind {
				case 0:
					x[i] = 0
				case 1:
					x[i] = 3.5
				case 2:
					x[i] = float32(r.NormFloat64())
				case 3:
					x[i] = float32(r.ExpFloat64())
				case 4:
					x[i] = -float32(r.ExpFloat64() * 1e-3)
				default:
					x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-20))
				}
			}
			if kind == 2 && r.IntN(2) == 0 {
				x[j+r.IntN(16)] *= 50 // an outlier
			}
		}
	},
}

// searchTypes are the encoders that use qkxSearch, makeQxQuants or the IQ3 trial kernel.
var searchTypes = []gguf.Type{gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1,
	gguf.IQ3_XXS, gguf.IQ3_S}

func TestSIMDSearchMatchesGo(t *testing.T) {
	if !simdOn() {
		t.Skip("no SIMD search in this build or on this CPU")
	}
	const nrows, n = 48, 512
	rows := nrows
	if testing.Short() {
		rows = 4
	}
	r := rand.New(rand.NewPCG(7, 11))
	im := make([]float32, n)
	for j := range im {
		im[j] = float32(r.ExpFloat64() + 1e-3)
	}
	imZeros := make([]float32, n) // imatrix with zero weights in places
	for j := range imZeros {
		if r.IntN(3) > 0 {
			imZeros[j] = float32(r.Float64())
		}
	}
	x := make([]float32, rows*n)
	for name, gen := range searchGenerators {
		gen(r, x)
		for _, typ := range searchTypes {
			e, _ := For(typ)
			for iw, w := range [][]float32{nil, im, imZeros} {
				got := make([]byte, RowBytes(typ, n)*rows)
				want := make([]byte, len(got))
				e.Quantize(got, x, rows, n, w)
				withGo(func() { e.Quantize(want, x, rows, n, w) })
				if !bytes.Equal(got, want) {
					bs := typ.TypeSize()
					for i := 0; i < len(got); i += bs {
						if !bytes.Equal(got[i:i+bs], want[i:i+bs]) {
							t.Errorf("%s %s imatrix %d: block %d: SIMD %x, Go %x", name, typ, iw, i/bs, got[i:i+bs], want[i:i+bs])
							break
						}
					}
				}
			}
		}
	}
}

// TestSIMDQkxSearchShapes calls qkxSearch directly with the shapes and parameters of every
// caller and some that none uses (fewer sub-blocks, no trials, other level counts).
func TestSIMDQkxSearchShapes(t *testing.T) {
	if !simdOn() {
		t.Skip("no SIMD qkxSearch in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 5))
	params := []qkxParams{qkxQ4KRef, qkxQ5KRef, qkxQ2KRef,
		{nmax: 15, rmin: -0.9, rdelta: 0.05, nstep: 36}, {nmax: 31, rmin: -0.9, rdelta: 0.05, nstep: 36},
		{nmax: 7, rmin: -1, rdelta: 0.1, nstep: 0}, {nmax: 3, rmin: -0.5, rdelta: 0.1, nstep: 1, useMad: true},
		{nmax: 63, rmin: -2, rdelta: 0.25, nstep: 5}}
	for _, p := range params {
		for _, n := range []int{1, 2, 16, 31, 32} {
			for _, m := range []int{1, 3, 8, 9, 16} {
				for rep := 0; rep < 20; rep++ {
					x := make([]float32, m*n)
					w := make([]float32, m*n)
					for i := range x {
						x[i] = float32(r.NormFloat64())
						if rep%4 == 1 {
							x[i] = float32(r.IntN(5))
						}
						w[i] = float32(r.ExpFloat64())
						if rep%5 == 2 {
							w[i] = float32(math.Abs(float64(x[i]))) + 0.3
						}
					}
					if rep%3 == 0 {
						for i := 0; i < n; i++ { // a constant sub-block
							x[i] = 1.25
						}
					}
					var gotL, wantL [512]uint8
					var gotS, gotM, wantS, wantM [16]float32
					qkxSearch(x, w, n, gotL[:], gotS[:], gotM[:], p)
					withGo(func() { qkxSearch(x, w, n, wantL[:], wantS[:], wantM[:], p) })
					if gotL != wantL || !sameBits(gotS[:], wantS[:]) || !sameBits(gotM[:], wantM[:]) {
						t.Fatalf("%+v n=%d m=%d rep %d: SIMD L %v scales %v mins %v; Go L %v scales %v mins %v",
							p, n, m, rep, gotL[:m*n], gotS[:m], gotM[:m], wantL[:m*n], wantS[:m], wantM[:m])
					}
				}
			}
		}
	}
}

// TestSIMDMakeQxQuants compares makeQxQuants on both paths for every level count and length.
func TestSIMDMakeQxQuants(t *testing.T) {
	if !simdOn() {
		t.Skip("no SIMD make_qx_quants in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(9, 1))
	for _, nmax := range []int{1, 4, 8, 16, 31, 32} {
		for n := 1; n <= 32; n++ {
			for rep := 0; rep < 30; rep++ {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(6)-3))
				}
				var qw []float32
				if rep%2 == 1 {
					qw = make([]float32, n)
					for i := range qw {
						qw[i] = float32(r.ExpFloat64())
					}
				}
				got, want := make([]int8, n), make([]int8, n)
				gs := makeQxQuants(x, nmax, got, qw)
				var ws float32
				withGo(func() { ws = makeQxQuants(x, nmax, want, qw) })
				if math.Float32bits(gs) != math.Float32bits(ws) || !bytes.Equal(int8Bytes(got), int8Bytes(want)) {
					t.Fatalf("nmax %d n %d rep %d: SIMD %v %v, Go %v %v", nmax, n, rep, gs, got, ws, want)
				}
			}
		}
	}
}

// TestStressMatchesGGMLGoPath runs the ggml stress hashes through the Go reference as well,
// when the default path is SIMD (TestStressMatchesGGML then covers the SIMD path).
func TestStressMatchesGGMLGoPath(t *testing.T) {
	if !simdOn() {
		t.Skip("the default path is already the Go code")
	}
	withGo(func() { TestStressMatchesGGML(t) })
}

// TestSearchAsmHasNoFMA: ggml's quantizers are compiled without FMA, so a fused multiply-add
// in the kernels would be a latent byte difference (TestNoFusedMultiplyAdd only sees Go code).
func TestSearchAsmHasNoFMA(t *testing.T) {
	for _, file := range []string{"search_amd64.s", "iq3search_amd64.s"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fma := regexp.MustCompile(`(?m)^\s*VF(N?)M(ADD|SUB)\w*`)
		if m := fma.FindAll(src, -1); len(m) > 0 {
			t.Errorf("%s uses fused multiply-add: %q", file, m)
		}
		if !regexp.MustCompile(`(?m)^\s*VMULPS`).Match(src) {
			t.Fatalf("no VMULPS in %s: the check looks at the wrong file", file)
		}
	}
}

func sameBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func int8Bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// BenchmarkSearchTypes quantizes the encoders that use the searches, on the SIMD path ("asm")
// and on the Go path ("go") in the same run.
func BenchmarkSearchTypes(b *testing.B) {
	const nrows, n = 16, 4096
	x := gaussianRows(1, nrows, n, 0.02)
	im := make([]float32, n)
	for j := range im {
		im[j] = float32(1 + j%5)
	}
	for _, typ := range searchTypes {
		e, _ := For(typ)
		q := make([]byte, RowBytes(typ, n)*nrows)
		for _, variant := range []string{"plain", "imat"} {
			var w []float32
			if variant == "imat" {
				w = im
			}
			for _, path := range []string{"asm", "go"} {
				if path == "asm" && !simdOn() {
					continue
				}
				b.Run(fmt.Sprintf("%s/%s/%s", typ, variant, path), func(b *testing.B) {
					run := func() {
						b.SetBytes(int64(4 * len(x)))
						for b.Loop() {
							e.Quantize(q, x, nrows, n, w)
						}
					}
					if path == "go" {
						withGo(run)
					} else {
						run()
					}
				})
			}
		}
	}
}
