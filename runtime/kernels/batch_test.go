package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBatchInvariance checks that a quantized product gives every token of a batch the same
// bits as a product of that token alone, for batch sizes that use every tile of the multi-token
// kernels (8 and 4 tokens) and the single-token remainder, and row ranges that cross row
// blocks. It also checks each token against an independent float64 computation over the
// test's own quantization of the activations (TestQuantPath's reference, summed per element).
func TestBatchInvariance(t *testing.T) {
	defer forceTiles()()
	forEachImpl(t, func(t *testing.T, impl string) {
		rng := rand.New(rand.NewPCG(7, 7))
		for _, wt := range Types {
			if !wt.quantized() {
				continue
			}
			cols := 1024 + 32 // a partial 16-block group
			if wt.BlockSize() == 256 {
				cols = 768
			}
			rows := gemmRowBlockTest + 7
			var data []byte
			for r := 0; r < rows; r++ {
				data = append(data, genRow(wt, cols, rng, 3)...)
			}
			m, err := NewMatrix(wt, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			m.Mode = ActQuant
			for _, nTok := range []int{2, 4, 8, 13, 21} {
				X := make([]float32, nTok*cols)
				for i := range X {
					X[i] = float32(rng.NormFloat64())
				}
				X[5*cols/3] = 40 // an outlier in one block
				var a Acts
				m.Prepare(&a, X, nTok)
				Y := make([]float32, nTok*rows)
				for i := range Y {
					Y[i] = float32(math.NaN())
				}
				// Two uneven row ranges, as two workers would compute them.
				split := 19
				m.MulActs(Y, &a, 0, split)
				m.MulActs(Y, &a, split, rows)
				var s Scratch
				y1 := make([]float32, rows)
				for tok := 0; tok < nTok; tok++ {
					x := X[tok*cols : (tok+1)*cols]
					m.MatVec(y1, x, 0, rows, &s)
					for r := 0; r < rows; r++ {
						if got := Y[tok*rows+r]; math.Float32bits(got) != math.Float32bits(y1[r]) {
							t.Fatalf("%v %s, %d tokens: token %d row %d: batch %v, alone %v", wt, impl, nTok, tok, r, got, y1[r])
						}
					}
					// Spot-check a few rows against the reference.
					for _, r := range []int{0, split, rows - 1} {
						want, mag := refQuantDot(m, r, x)
						if got := Y[tok*rows+r]; !close64(got, want, mag, 2e-6*math.Sqrt(float64(cols))) {
							t.Errorf("%v %s, %d tokens: token %d row %d: got %v, want %v", wt, impl, nTok, tok, r, got, want)
						}
					}
				}
			}
		}
	})
}

// gemmRowBlockTest is larger than the row blocks of the multi-token kernels.
const gemmRowBlockTest = 70

// refQuantDot computes row r of quantized m times x as llama.cpp does, in float64 from the
// test's own decoding and activation quantization; it returns the value and Σ|terms|.
func refQuantDot(m *Matrix, r int, x []float32) (want, mag float64) {
	cols := m.Cols
	el := refDecode(m.Type, m.Data[r*m.RowBytes():(r+1)*m.RowBytes()], cols)
	aq := make([]int, cols)
	ad := make([]float64, cols)
	as := make([]float64, cols)
	if m.actKind() == actQ8_K {
		for b := 0; b < cols/256; b++ {
			q, d := refQ8_K(x[256*b : 256*b+256])
			for i := range 256 {
				aq[256*b+i], ad[256*b+i] = q[i], d
			}
		}
	} else {
		for b := 0; b < cols/32; b++ {
			q, d, s := refQ8_0(x[32*b : 32*b+32])
			for i := range 32 {
				aq[32*b+i], ad[32*b+i], as[32*b+i] = q[i], d, s
			}
		}
	}
	for g := 0; g < cols/16; g++ {
		var si, sa int64
		for i := 16 * g; i < 16*g+16; i++ {
			si += int64(el[i].code * aq[i])
			sa += int64(aq[i])
		}
		p := el[16*g].scale * ad[16*g] * float64(si)
		want += p
		mag += math.Abs(p)
		var po float64
		switch {
		case m.Type == Q4_1 || m.Type == Q5_1:
			if g%2 == 0 {
				po = el[16*g].offset * as[16*g]
			}
		default:
			po = el[16*g].offset * ad[16*g] * float64(sa)
		}
		want += po
		mag += math.Abs(po)
	}
	return want, mag
}
