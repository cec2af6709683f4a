package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// testCols returns row lengths to test for t: several blocks, lengths that are not a multiple
// of the vector width or of the assembly's 16-block groups, and one long row.
func testCols(t WType) []int {
	switch t.BlockSize() {
	case 1:
		return []int{1, 7, 16, 33, 100, 1000}
	case 32:
		return []int{32, 96, 544, 1024}
	}
	return []int{256, 768}
}

// forEachImpl runs f under every available implementation.
func forEachImpl(t *testing.T, f func(t *testing.T, impl string)) {
	for _, name := range Impls() {
		t.Run(name, func(t *testing.T) {
			restore, err := SetImpl(name)
			if err != nil {
				t.Fatal(err)
			}
			defer restore()
			f(t, name)
		})
	}
}

// testCase is one matrix with its activations.
type testCase struct {
	name string
	m    *Matrix
	X    []float32
	nTok int
}

var kindNames = []string{"random", "zeros", "extreme", "mixed"}

func makeCases(tb testing.TB, wt WType, seed uint64) []testCase {
	rng := rand.New(rand.NewPCG(seed, uint64(wt)))
	var cases []testCase
	for _, cols := range testCols(wt) {
		for kind := range kindNames {
			rows, nTok := 5, 3
			rb, _ := wt.RowBytes(cols)
			data := make([]byte, 0, rows*rb)
			for r := 0; r < rows; r++ {
				data = append(data, genRow(wt, cols, rng, kind)...)
			}
			m, err := NewMatrix(wt, rows, cols, data)
			if err != nil {
				tb.Fatal(err)
			}
			X := make([]float32, nTok*cols)
			for i := range X {
				X[i] = float32(rng.NormFloat64())
			}
			if kind == 2 { // extreme activations too: a zero token and a huge value
				clear(X[:cols])
				X[cols] = 1e4
			}
			cases = append(cases, testCase{fmt.Sprintf("%v/%d/%s", wt, cols, kindNames[kind]), m, X, nTok})
		}
	}
	return cases
}

// run computes the product of rows [r0,r1) into a fresh Y prefilled with NaN, and checks that
// the rows outside the range stay NaN.
func (c testCase) run(t *testing.T, mode ActMode, r0, r1 int) []float32 {
	t.Helper()
	c.m.Mode = mode
	Y := make([]float32, c.nTok*c.m.Rows)
	for i := range Y {
		Y[i] = float32(math.NaN())
	}
	var s Scratch
	c.m.MatMul(Y, c.X, c.nTok, r0, r1, &s)
	for tok := 0; tok < c.nTok; tok++ {
		for r := 0; r < c.m.Rows; r++ {
			y := Y[tok*c.m.Rows+r]
			if (r < r0 || r >= r1) != math.IsNaN(float64(y)) {
				t.Fatalf("%s: row %d token %d: value %v (rows [%d,%d) asked)", c.name, r, tok, y, r0, r1)
			}
		}
	}
	return Y
}

func close64(got float32, want, mag float64, rel float64) bool {
	if math.IsInf(want, 0) || math.IsNaN(want) {
		return false
	}
	return math.Abs(float64(got)-want) <= rel*mag+1e-30
}

// TestFloatPath checks ActFloat products against Σ w·x with float64 weights decoded by the test.
func TestFloatPath(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		for _, wt := range Types {
			for _, c := range makeCases(t, wt, 1) {
				Y := c.run(t, ActFloat, 1, c.m.Rows)
				for r := 1; r < c.m.Rows; r++ {
					w := refValues(wt, c.m.Data[r*c.m.RowBytes():(r+1)*c.m.RowBytes()], c.m.Cols)
					for tok := 0; tok < c.nTok; tok++ {
						var want, mag float64
						for k, wv := range w {
							p := wv * float64(c.X[tok*c.m.Cols+k])
							want += p
							mag += math.Abs(p)
						}
						if got := Y[tok*c.m.Rows+r]; !close64(got, want, mag, 2e-6*math.Sqrt(float64(c.m.Cols))) {
							t.Errorf("%s: row %d token %d: got %v, want %v (Σ|w·x| %v)", c.name, r, tok, got, want, mag)
						}
					}
				}
			}
		}
	})
}

// refQ8_0 quantizes one block of 32 as ggml's x86 quantize_row_q8_0 (float32 arithmetic:
// d = max/127 rounded to fp16, q = round-half-even(x·(127/max))).
func refQ8_0(x []float32) (q [32]int, d float64, s float64) {
	var amax float32
	for _, v := range x {
		amax = float32(math.Max(float64(amax), math.Abs(float64(v))))
	}
	df := amax / 127
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	sum := 0
	for i, v := range x {
		q[i] = int(math.RoundToEven(float64(v * id)))
		sum += q[i]
	}
	return q, refHalf(f32ToF16Test(df)), refHalf(f32ToF16Test(df * float32(sum)))
}

// refQ8_K quantizes one super-block of 256 as ggml's quantize_row_q8_K_ref.
func refQ8_K(x []float32) (q [256]int, d float64) {
	var amax, mx float32
	for _, v := range x {
		if float32(math.Abs(float64(v))) > amax {
			amax, mx = float32(math.Abs(float64(v))), v
		}
	}
	if amax == 0 {
		return q, 0
	}
	iscale := -127 / mx
	for i, v := range x {
		q[i] = min(127, int(math.RoundToEven(float64(iscale*v))))
	}
	return q, float64(1 / iscale)
}

// TestQuantPath checks ActQuant products against an exact integer re-computation: the test
// quantizes the activations itself, sums code·q8 per block in integers and scales in float64.
func TestQuantPath(t *testing.T) {
	forEachImpl(t, func(t *testing.T, impl string) {
		for _, wt := range Types {
			for _, c := range makeCases(t, wt, 2) {
				Y := c.run(t, ActQuant, 0, c.m.Rows-1)
				cols := c.m.Cols
				for tok := 0; tok < c.nTok; tok++ {
					x := c.X[tok*cols : (tok+1)*cols]
					// Activation codes and scales per element, as llama.cpp forms them.
					aq := make([]int, cols)
					ad := make([]float64, cols) // scale of the element's activation block
					as := make([]float64, cols) // Q8_1 s of the block (per element copy)
					xf := make([]float64, cols) // float activations for float weights
					switch c.m.actKind() {
					case actQ8_0, actQ8_1:
						for b := 0; b < cols/32; b++ {
							q, d, s := refQ8_0(x[32*b : 32*b+32])
							for i := range 32 {
								aq[32*b+i], ad[32*b+i], as[32*b+i] = q[i], d, s
							}
						}
					case actQ8_K:
						for b := 0; b < cols/256; b++ {
							q, d := refQ8_K(x[256*b : 256*b+256])
							for i := range 256 {
								aq[256*b+i], ad[256*b+i] = q[i], d
							}
						}
					case actF16:
						for i, v := range x {
							xf[i] = refHalf(f32ToF16Test(v))
						}
					case actBF16:
						for i, v := range x {
							xf[i] = refBF16(f32ToBF16(v))
						}
					default:
						for i, v := range x {
							xf[i] = float64(v)
						}
					}
					for r := 0; r < c.m.Rows-1; r++ {
						el := refDecode(wt, c.m.Data[r*c.m.RowBytes():(r+1)*c.m.RowBytes()], cols)
						var want, mag float64
						if !wt.quantized() {
							for i, e := range el {
								p := e.scale * xf[i]
								want += p
								mag += math.Abs(p)
							}
						} else {
							// Exact integer sums per 16 elements (every format's scales are constant
							// over 16 elements), scaled in float64.
							for g := 0; g < cols/16; g++ {
								var si int64
								for i := 16 * g; i < 16*g+16; i++ {
									si += int64(el[i].code * aq[i])
								}
								p := el[16*g].scale * ad[16*g] * float64(si)
								want += p
								mag += math.Abs(p)
								if off := el[16*g].offset; off != 0 || wt == Q4_1 || wt == Q5_1 {
									var sa int64
									for i := 16 * g; i < 16*g+16; i++ {
										sa += int64(aq[i])
									}
									var po float64
									if wt == Q4_1 || wt == Q5_1 {
										// m·s with s = fp16(d_a·Σq) over the 32-block: half per 16.
										if g%2 == 0 {
											po = el[16*g].offset * as[16*g]
										}
									} else {
										po = off * ad[16*g] * float64(sa)
									}
									want += po
									mag += math.Abs(po)
								}
							}
						}
						got := Y[tok*c.m.Rows+r]
						if !close64(got, want, mag, 2e-6*math.Sqrt(float64(cols))) {
							t.Errorf("%s: row %d token %d: got %v, want %v (Σ|terms| %v)", c.name, r, tok, got, want, mag)
						}
					}
				}
			}
		}
	})
}

// forceTiles makes the AMX implementation run every type it handles on the tiles from its
// smallest batch, returning a function that restores the defaults (set by amx_test.go where
// the AMX implementation exists; elsewhere it does nothing).
var forceTiles = func() (restore func()) { return func() {} }
