//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBF16Dot checks the VDPBF16PS path (BF16 weights, activations rounded to bf16, batches of
// bf16DotMinTokens or more) against a float64 computation of the same bf16 products, and
// against the widen + FMA path, on shapes with and without a column tail past the last
// multiple of 32, 4-token blocks, leftover rows and tokens (the GEMV kernel), and batches
// too small for it.
func TestBF16Dot(t *testing.T) {
	if !hasImpl("avx512vnni") || !avx512Impl.bf16Dot {
		t.Skip("no AVX512_BF16 on this CPU")
	}
	fma := *avx512Impl
	fma.name, fma.bf16Dot = "avx512-fma", false
	rng := rand.New(rand.NewPCG(5, 6))
	for _, cols := range []int{32, 96, 100, 1000, 1024 + 13} {
		for _, sh := range []struct{ rows, nTok int }{{5, 1}, {37, 3}, {9, 4}, {37, 9}} {
			var data []byte
			for r := 0; r < sh.rows; r++ {
				// Mostly random rows; a zero and an extreme row fall on different positions
				// of the 4-row blocks from shape to shape.
				data = append(data, genRow(BF16, cols, rng, []int{0, 3, 0, 2, 0, 1}[r%6])...)
			}
			m, err := NewMatrix(BF16, sh.rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			m.Mode = ActQuant
			X := make([]float32, sh.nTok*cols)
			for i := range X {
				X[i] = float32(rng.NormFloat64())
			}
			run := func(im *implTable) []float32 {
				prev := current
				current = im
				defer func() { current = prev }()
				var a Acts
				m.Prepare(&a, X, sh.nTok)
				if want := im.bf16Dot && sh.nTok >= bf16DotMinTokens; want != (len(a.bf) == sh.nTok*cols) {
					t.Fatalf("%s, %d tokens: %d bf16 activations, want them: %v", im.name, sh.nTok, len(a.bf), want)
				}
				Y := make([]float32, sh.nTok*sh.rows)
				m.MulActs(Y, &a, 0, sh.rows)
				return Y
			}
			dot, fmaY := run(avx512Impl), run(&fma)
			for tok := 0; tok < sh.nTok; tok++ {
				for r := 0; r < sh.rows; r++ {
					var want, mag float64
					for k := 0; k < cols; k++ {
						w := float64(bf16ToF32(le16(data[(r*cols+k)*2:])))
						p := w * float64(roundBF16(X[tok*cols+k]))
						want += p
						mag += math.Abs(p)
					}
					i := tok*sh.rows + r
					name := fmt.Sprintf("%d cols, %d rows, %d tokens: token %d row %d", cols, sh.rows, sh.nTok, tok, r)
					if !close64(dot[i], want, mag, 1e-6*math.Sqrt(float64(cols))) {
						t.Errorf("%s: vdpbf16ps %v, float64 %v", name, dot[i], want)
					}
					if !close64(fmaY[i], want, mag, 1e-6*math.Sqrt(float64(cols))) {
						t.Errorf("%s: fma %v, float64 %v", name, fmaY[i], want)
					}
				}
			}
		}
	}
}

// TestBF16DotEncodings checks the BYTE-encoded VDPBF16PS of both kernels against GNU objdump.
func TestBF16DotEncodings(t *testing.T) {
	want := map[string][]string{"gemvBF16Dot": {
		"vdpbf16ps %zmm4,%zmm0,%zmm30", "vdpbf16ps %zmm5,%zmm1,%zmm29",
		"vdpbf16ps %zmm6,%zmm2,%zmm28", "vdpbf16ps %zmm7,%zmm3,%zmm27",
		"vdpbf16ps %zmm4,%zmm0,%zmm30",
	}}
	for r := 0; r < 4; r++ {
		for tk := 0; tk < 4; tk++ {
			want["gemm4x4BF16Dot"] = append(want["gemm4x4BF16Dot"], fmt.Sprintf("vdpbf16ps %%zmm%d,%%zmm%d,%%zmm%d", 20+tk, 16+r, 4*r+tk))
		}
	}
	for r := 0; r < 12; r++ { // gramTile12x32BF16: rows' pairs in Z26/Z27, columns in Z24/Z25
		for c := 0; c < 2; c++ {
			want["gramTile12x32BF16"] = append(want["gramTile12x32BF16"], fmt.Sprintf("vdpbf16ps %%zmm%d,%%zmm%d,%%zmm%d", 26+r%2, 24+c, 2*r+c))
		}
	}
	re := regexp.MustCompile(`^(vdpbf16ps\b.*)$`)
	for fn, w := range want {
		if got := disassembled(t, fn, re); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", fn, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
}

// BenchmarkBF16Dot measures BF16 × bf16-activation products (ActQuant) on a Qwen3-0.6B FFN
// matrix with VDPBF16PS and with widen + FMA, in the same run: 64 tokens (prefill) and 1
// (decode), reporting the speed-up of the VDPBF16PS path.
func BenchmarkBF16Dot(b *testing.B) {
	if !hasImpl("avx512vnni") || !avx512Impl.bf16Dot {
		b.Skip("no AVX512_BF16 on this CPU")
	}
	rows, cols := 3072, 1024
	if os.Getenv("GQUANT_BENCH_ROWS") != "" { // e.g. 32768: weights far larger than the caches
		fmt.Sscan(os.Getenv("GQUANT_BENCH_ROWS"), &rows)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	var data []byte
	for r := 0; r < rows; r++ {
		data = append(data, genRow(BF16, cols, rng, 0)...)
	}
	m, _ := NewMatrix(BF16, rows, cols, data)
	m.Mode = ActQuant
	fma := *avx512Impl
	fma.name, fma.bf16Dot = "avx512-fma", false
	for _, nTok := range []int{64, 1} {
		b.Run(fmt.Sprintf("%dtok", nTok), func(b *testing.B) {
			X := make([]float32, nTok*cols)
			for i := range X {
				X[i] = float32(rng.NormFloat64())
			}
			Y := make([]float32, nTok*rows)
			timeWith := func(im *implTable, n int) float64 {
				prev := current
				current = im
				defer func() { current = prev }()
				var a Acts
				m.Prepare(&a, X, nTok)
				m.MulActs(Y, &a, 0, rows)
				start := time.Now()
				for range n {
					m.MulActs(Y, &a, 0, rows)
				}
				return time.Since(start).Seconds() / float64(n)
			}
			var dot, base float64
			for range b.N {
				dot += timeWith(avx512Impl, 3)
				base += timeWith(&fma, 3)
			}
			b.ReportMetric(base/dot, "speedup")
			b.ReportMetric(float64(nTok)*float64(b.N)/dot, "tok/s")
		})
	}
}

// BenchmarkFloatPeak puts the BF16 prefill products beside this CPU's instruction peaks,
// measured in the same run on one thread: VFMADD231PS (float32 FMA, 16 multiply-adds) and
// VDPBF16PS (32 bf16 multiply-adds) in register-only loops, then a 512-token product of a
// Qwen3-0.6B FFN matrix (3072 × 1024) with float32 activations (ActFloat: widen + FMA, the
// reference's default) and with bf16-rounded ones (ActQuant: VDPBF16PS, llama.cpp's
// arithmetic). GFLOP/s count 2 flops per multiply-add; of_peak is the product's fraction of its
// instruction's peak. A float32-activation product cannot go faster than fma_GFLOP/s, which
// is half of dpbf16_GFLOP/s where the CPU runs both at one instruction per cycle.
//
//	go test -run - -bench FloatPeak ./runtime/kernels/
func BenchmarkFloatPeak(b *testing.B) {
	if !hasImpl("avx512vnni") || !avx512Impl.bf16Dot {
		b.Skip("no AVX512_BF16 on this CPU")
	}
	restore, err := SetImpl("avx512vnni")
	if err != nil {
		b.Skip(err)
	}
	defer restore()
	const rows, cols, nTok, loops = 3072, 1024, 512, 1 << 22
	rng := rand.New(rand.NewPCG(2, 5))
	var data []byte
	for r := 0; r < rows; r++ {
		data = append(data, genRow(BF16, cols, rng, 0)...)
	}
	m, _ := NewMatrix(BF16, rows, cols, data)
	X := make([]float32, nTok*cols)
	for i := range X {
		X[i] = float32(rng.NormFloat64())
	}
	Y := make([]float32, nTok*rows)
	product := func(mode ActMode) float64 {
		m.Mode = mode
		var a Acts
		m.Prepare(&a, X, nTok)
		start := time.Now()
		m.MulActs(Y, &a, 0, rows)
		return 2 * rows * cols * nTok / time.Since(start).Seconds() / 1e9
	}
	var fma, dp, f32, bf float64
	for b.Loop() {
		t0 := time.Now()
		fmaPeakLoop(loops)
		t1 := time.Now()
		dpbf16PeakLoop(loops)
		t2 := time.Now()
		fma = max(fma, 16*16*2*loops/t1.Sub(t0).Seconds()/1e9)
		dp = max(dp, 16*32*2*loops/t2.Sub(t1).Seconds()/1e9)
		f32 = max(f32, product(ActFloat))
		bf = max(bf, product(ActQuant))
	}
	b.ReportMetric(fma, "fma_GFLOP/s")
	b.ReportMetric(dp, "dpbf16_GFLOP/s")
	b.ReportMetric(f32, "f32acts_GFLOP/s")
	b.ReportMetric(f32/fma, "f32acts_of_peak")
	b.ReportMetric(bf, "bf16acts_GFLOP/s")
	b.ReportMetric(bf/dp, "bf16acts_of_peak")
}
