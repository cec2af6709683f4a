//go:build amd64 && !purego

package kernels

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	// The emulated child (TestAMXBF16Emulated) runs the BF16 tiles on a CPU without AMX: the
	// emulator carries out the tile instructions, the CPU the AVX512_BF16 conversions.
	if os.Getenv(amxChildEnv) == "1" && cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ {
		amxBF16On = true
	}
}

// amxBF16Testable skips t unless the BF16 tile kernels can run here (natively, or under the
// emulator in TestAMXBF16Emulated's child).
func amxBF16Testable(t testing.TB) {
	t.Helper()
	if !hasImpl("amx") || !amxBF16On {
		t.Skip("no AMX-BF16 on this CPU (TestAMXBF16Emulated runs this test under an emulator)")
	}
}

// bf16Matrix returns a rows × cols BF16 matrix of random weights (genRow's BF16 rows of kind
// kinds[r % len(kinds)]; nil: all random).
func bf16Matrix(t testing.TB, rows, cols int, rng *rand.Rand, kinds []int) *Matrix {
	var data []byte
	for r := 0; r < rows; r++ {
		k := 0
		if len(kinds) > 0 {
			k = kinds[r%len(kinds)]
		}
		data = append(data, genRow(BF16, cols, rng, k)...)
	}
	m, err := NewMatrix(BF16, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// bf16Acts returns nTok × cols activations shaped like a transformer's: normal values, one in
// 64 an outlier 20 to 100 times larger, and a few exact zeros.
func bf16Acts(nTok, cols int, rng *rand.Rand) []float32 {
	X := make([]float32, nTok*cols)
	for i := range X {
		v := rng.NormFloat64()
		switch rng.IntN(64) {
		case 0:
			v *= 20 + 80*rng.Float64()
		case 1:
			v = 0
		}
		X[i] = float32(v)
	}
	return X
}

// TestAMXBF16Split checks the split of a float32 into bf16 parts: h + m + l is x exactly over
// the whole normal range, each part is bf16(the remainder), and the corner cases are those
// documented (denormals and parts that would be denormal are zero, infinities carry no
// remainder, NaN stays NaN).
func TestAMXBF16Split(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for i := 0; i < 200000; i++ {
		// Every exponent from 2^-103 (where the last bit, l at the least, is still normal) to
		// 2^127, every mantissa.
		x := math.Float32frombits(uint32(rng.IntN(2))<<31 | uint32(24+rng.IntN(231))<<23 | uint32(rng.IntN(1<<23)))
		p := amxBF16Split(x)
		h, m, l := bf16ToF32(p[0]), bf16ToF32(p[1]), bf16ToF32(p[2])
		if math.IsInf(float64(h), 0) {
			if m != 0 || l != 0 || math.Abs(float64(x)) < 0x1.ffp127 {
				t.Fatalf("%g: parts %g %g %g", x, h, m, l)
			}
			continue
		}
		if got := float64(h) + float64(m) + float64(l); got != float64(x) {
			t.Fatalf("%g (%#08x): h+m+l = %g (parts %g %g %g)", x, math.Float32bits(x), got, h, m, l)
		}
		if p[0] != amxBF16Round(x) || p[1] != amxBF16Round(x-h) || p[2] != amxBF16Round(x-h-m) {
			t.Fatalf("%g: parts %#04x %#04x %#04x are not the rounded remainders", x, p[0], p[1], p[2])
		}
	}
	for _, c := range []struct {
		x    float32
		want [3]float32
	}{
		{0, [3]float32{0, 0, 0}},
		{1, [3]float32{1, 0, 0}},
		{1 + 0x1p-9 + 0x1p-18, [3]float32{1, 0x1p-9, 0x1p-18}},
		{math.Float32frombits(1), [3]float32{0, 0, 0}},          // denormal: nothing
		{math.Float32frombits(0x807fffff), [3]float32{0, 0, 0}}, // negative denormal
		{0x1.008p-120, [3]float32{0x1p-120, 0, 0}},              // x − h = 2^-129 is denormal
		{float32(math.Inf(1)), [3]float32{float32(math.Inf(1)), 0, 0}},
		{float32(math.Inf(-1)), [3]float32{float32(math.Inf(-1)), 0, 0}},
		{math.MaxFloat32, [3]float32{float32(math.Inf(1)), 0, 0}}, // rounds to bf16 infinity
	} {
		p := amxBF16Split(c.x)
		for i := range p {
			if got := bf16ToF32(p[i]); got != c.want[i] {
				t.Errorf("split(%g): part %d = %g, want %g", c.x, i, got, c.want[i])
			}
		}
	}
	if p := amxBF16Split(float32(math.NaN())); !math.IsNaN(float64(bf16ToF32(p[0]))) {
		t.Errorf("split(NaN): h = %#04x", p[0])
	}
}

// amxBF16Unpacked returns element k (< 32·kc) of token n's part j from tiles packed for 16
// tokens (amxBF16Pack with dchunk = planes·2048, dplane = 2048).
func amxBF16Unpacked(b []byte, planes, n, j, k int) uint16 {
	i, p, e := k/32, k%32/2, k%2
	return le16(b[i*planes*2048+j*2048+64*p+4*n+2*e:])
}

// TestAMXBF16Pack runs the assembly packing over values with every corner case, for 1 to 16
// tokens and 1 to 3 parts, and compares each packed bf16 with amxBF16Split; the tokens past
// nt must be zeros.
func TestAMXBF16Pack(t *testing.T) {
	if !amxBF16On {
		t.Skip("no AVX512_BF16")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	const kc, cols = 3, 100 // the packing reads 32·kc columns of each token
	special := []float32{0, float32(math.Copysign(0, -1)), math.Float32frombits(5), math.Float32frombits(0x80400000),
		0x1.008p-120, 0x1.fffffep-110, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32,
		0x1.fep127, 1 + 0x1p-8, 1 + 0x1p-8 + 0x1p-23, -3.0000002}
	X := make([]float32, 16*cols)
	for i := range X {
		switch rng.IntN(4) {
		case 0:
			X[i] = special[rng.IntN(len(special))]
		default:
			X[i] = math.Float32frombits(rng.Uint32() &^ (0xff << 23 & 0x40000000)) // finite, any exponent up to 2^1
		}
	}
	X[7] = float32(math.NaN())
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	defer amxBF16Pool.Put(s)
	b := alignedBytes(kc * 3 * 2048)
	for planes := 1; planes <= 3; planes++ {
		for nt := 1; nt <= 16; nt++ {
			for i := range b {
				b[i] = 0xa5
			}
			amxBF16Pack(&b[0], &X[0], 4*cols, nt, kc, planes, planes*2048, 2048, &s.tmp[0])
			for n := 0; n < 16; n++ {
				for j := 0; j < planes; j++ {
					for k := 0; k < 32*kc; k++ {
						got := amxBF16Unpacked(b, planes, n, j, k)
						var want uint16
						if n < nt {
							want = amxBF16Split(X[n*cols+k])[j]
						}
						if got != want && !(n < nt && math.IsNaN(float64(bf16ToF32(got))) && math.IsNaN(float64(bf16ToF32(want)))) {
							t.Fatalf("%d parts, %d tokens: token %d part %d element %d (x = %g): packed %#04x, want %#04x", planes, nt, n, j, k, X[n*cols+k], got, want)
						}
					}
				}
			}
		}
	}
}

// amxBF16Counts returns the TDPBF16PS and LDTILECFG (= TILERELEASE) instructions that
// amxBF16Product executes for rows [r0,r1) of a matrix with cols columns and nTok tokens in
// planes parts (amxBF16Rows' loops; TestAMXBF16Emulated compares them with the emulator's).
func amxBF16Counts(cols, nTok, r0, r1, planes int) (tdp, cfg int) {
	kc, tail := cols/32, 0
	if cols%32 != 0 {
		tail = 1
	}
	calls := tail
	if kc > 0 {
		calls++
	}
	bblock := (kc + tail) * planes * 2048
	group := 32 * max(1, amxBF16GroupBytes/bblock)
	for g0 := 0; g0 < nTok; g0 += group {
		n := min(nTok, g0+group) - g0
		for r := r0; r < r1; r += 32 {
			rt := 1
			if r1-r > 16 {
				rt = 2
			}
			for t0 := 0; t0 < n; t0 += 32 {
				ct := 1
				if n-t0 > 16 {
					ct = 2
				}
				tdp += (kc + tail) * planes * rt * ct
				cfg += calls
			}
		}
	}
	return tdp, cfg
}

// TestAMXBF16Model runs the tile product over many shapes (row, token and column tails, 1 to
// 64 tokens, products of row ranges that do not start on a 32-row block, token groups) and
// requires the bits of amxBF16Model, the tiles' operations in Go. The activations of a range
// are packed once per scratch and reused by the next range (the comparison with the kept
// copy); a change in the last element must be seen. It prints the tile instructions the
// products execute, which TestAMXBF16Emulated compares with the emulator's counts.
func TestAMXBF16Model(t *testing.T) {
	amxBF16Testable(t)
	rng := rand.New(rand.NewPCG(51, 52))
	tokens := []int{1, 2, 15, 16, 17, 31, 32, 33, 48, 64}
	tdp, cfg := 0, 0
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	defer amxBF16Pool.Put(s)
	run := func(m *Matrix, X []float32, nTok, planes int, split []int) []float32 {
		Y := make([]float32, nTok*m.Rows)
		for i := range Y {
			Y[i] = float32(math.NaN())
		}
		for i := 1; i < len(split); i++ {
			amxBF16Product(m, Y, X, nTok, split[i-1], split[i], s, planes)
			a, b := amxBF16Counts(m.Cols, nTok, split[i-1], split[i], planes)
			tdp, cfg = tdp+a, cfg+b
		}
		return Y
	}
	check := func(name string, m *Matrix, X []float32, nTok, planes int, got []float32) {
		t.Helper()
		want := make([]float32, nTok*m.Rows)
		amxBF16Model(m, want, X, nTok, 0, m.Rows, planes)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: token %d row %d: tiles %v, model %v", name, i/m.Rows, i%m.Rows, got[i], want[i])
			}
		}
	}
	n := 0
	for _, rows := range []int{1, 5, 16, 17, 32, 33, 67} {
		for _, cols := range []int{1, 31, 32, 64, 100, 1000} {
			m := bf16Matrix(t, rows, cols, rng, []int{0, 0, 1, 0})
			for k := 0; k < 2; k++ {
				nTok := tokens[n%len(tokens)]
				n++
				planes := 3 - n%3%2 // mostly 3, some 2
				X := bf16Acts(nTok, cols, rng)
				split := []int{0, rows}
				if rows > 16 {
					split = []int{0, rows / 3, rows - 7, rows}
				}
				name := fmt.Sprintf("%dx%d, %d tokens, %d parts", rows, cols, nTok, planes)
				check(name, m, X, nTok, planes, run(m, X, nTok, planes, split))
				X[len(X)-1] += 1 // the kept copy must not match any more
				check(name+", last value changed", m, X, nTok, planes, run(m, X, nTok, planes, []int{0, rows}))
			}
		}
	}
	// Token groups (amxBF16GroupBytes): 3072 columns take 32 tokens per group.
	m := bf16Matrix(t, 40, 3072, rng, nil)
	X := bf16Acts(70, 3072, rng)
	check("40x3072, 70 tokens", m, X, 70, 3, run(m, X, 70, 3, []int{0, 40}))
	fmt.Printf("amxbf16-expected tdpbf16ps=%d ldtilecfg=%d\n", tdp, cfg)
}

// TestAMXBF16SelfCheck runs the self-check the tiles must pass before their first use, and
// checks that it fails when the tiles' result differs from the model's (tiles of 2 parts).
func TestAMXBF16SelfCheck(t *testing.T) {
	amxBF16Testable(t)
	if err := amxBF16SelfCheck(amxBF16Parts); err != nil {
		t.Fatal(err)
	}
	if err := amxBF16SelfCheck(2); err == nil {
		t.Fatal("the self-check passes tiles that drop the third part")
	}
	if !amxBF16Checked() {
		t.Fatal("amxBF16Checked reports failure")
	}
}

// amxBF16Errors returns the maximum and mean of |y − ref| / Σ|w·x| over every output of Y
// for the product of m and X (the reference in float64 from the exact weights and
// activations).
func amxBF16Errors(m *Matrix, X, Y []float32, nTok int) (maxErr, meanErr float64) {
	cols := m.Cols
	w := make([]float64, cols)
	for r := 0; r < m.Rows; r++ {
		for k := range w {
			w[k] = float64(bf16ToF32(le16(m.Data[r*m.rowBytes+2*k:])))
		}
		for tok := 0; tok < nTok; tok++ {
			var ref, mag float64
			for k, x := range X[tok*cols : (tok+1)*cols] {
				p := w[k] * float64(x)
				ref += p
				mag += math.Abs(p)
			}
			e := 0.0
			if mag > 0 {
				e = math.Abs(float64(Y[tok*m.Rows+r])-ref) / mag
			} else if Y[tok*m.Rows+r] != 0 {
				e = math.Inf(1)
			}
			maxErr = max(maxErr, e)
			meanErr += e
		}
	}
	return maxErr, meanErr / float64(m.Rows*nTok)
}

// TestAMXBF16Accuracy measures the error of BF16 × float32 products against float64, relative
// to Σ|w·x| of each output, for the tiles over the 3-part split, the tiles over a 2-part split
// (h + m), the widen + FMA kernel (avx512vnni) and, for scale, bf16-rounded activations
// (--acts quant, VDPBF16PS). Every output of the 3-part tiles and of widen + FMA must be
// within 1e-6 (the 2-part split reaches 2.4e-6), and the tiles' mean error at most 1.5 times
// FMA's (the m and l parts' partial sums are added to the accumulator separately: two more
// float32 roundings per 32 columns). The figures are logged (go test -v -run AMXBF16Accuracy).
func TestAMXBF16Accuracy(t *testing.T) {
	amxBF16Testable(t)
	rng := rand.New(rand.NewPCG(61, 62))
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	defer amxBF16Pool.Put(s)
	for _, sh := range []struct{ rows, cols, nTok int }{{64, 1024, 48}, {48, 3072, 32}, {40, 4096 + 13, 20}} {
		m := bf16Matrix(t, sh.rows, sh.cols, rng, []int{0, 0, 0, 0, 0, 0, 0, 2})
		X := bf16Acts(sh.nTok, sh.cols, rng)
		Y := make([]float32, sh.nTok*sh.rows)
		errs := map[string][2]float64{}
		for _, planes := range []int{3, 2} {
			s.forget()
			amxBF16Product(m, Y, X, sh.nTok, 0, sh.rows, s, planes)
			mx, mean := amxBF16Errors(m, X, Y, sh.nTok)
			errs[fmt.Sprintf("tiles %d parts", planes)] = [2]float64{mx, mean}
		}
		for _, c := range []struct {
			name string
			mode ActMode
		}{{"widen + FMA", ActFloat}, {"bf16 activations", ActQuant}} {
			restore, err := SetImpl("avx512vnni")
			if err != nil {
				t.Skip(err)
			}
			m.Mode = c.mode
			var a Acts
			m.Prepare(&a, X, sh.nTok)
			m.MulActs(Y, &a, 0, sh.rows)
			restore()
			mx, mean := amxBF16Errors(m, X, Y, sh.nTok)
			errs[c.name] = [2]float64{mx, mean}
		}
		m.Mode = ActDefault
		for _, name := range []string{"tiles 3 parts", "tiles 2 parts", "widen + FMA", "bf16 activations"} {
			t.Logf("%dx%d, %d tokens: %-16s max %.3g mean %.3g", sh.rows, sh.cols, sh.nTok, name, errs[name][0], errs[name][1])
		}
		tiles, fma := errs["tiles 3 parts"], errs["widen + FMA"]
		for _, name := range []string{"tiles 3 parts", "widen + FMA"} {
			if e := errs[name][0]; e > 1e-6 {
				t.Errorf("%dx%d: %s: maximum error %.3g over the bound 1e-6", sh.rows, sh.cols, name, e)
			}
		}
		if tiles[1] > 1.5*fma[1] {
			t.Errorf("%dx%d: tiles' mean error %.3g over 1.5 times widen + FMA's (%.3g)", sh.rows, sh.cols, tiles[1], fma[1])
		}
	}
}

// TestAMXBF16Dispatch checks which products take the BF16 tiles under "amx": BF16 weights
// with float32 activations (the default mode) from amxBF16MinTokens tokens, not below, not
// with bf16-rounded activations (ActQuant) and never under avx512vnni; and that a product
// spread over a pool's workers (rows in chunks of 16) gives the bits of one call, which are
// amxBF16Model's.
func TestAMXBF16Dispatch(t *testing.T) {
	amxBF16Testable(t)
	rng := rand.New(rand.NewPCG(71, 72))
	m := bf16Matrix(t, 70, 96, rng, nil)
	for _, c := range []struct {
		impl  string
		mode  ActMode
		nTok  int
		tiles bool
	}{
		{"amx", ActDefault, amxBF16MinTokens, true},
		{"amx", ActFloat, amxBF16MinTokens + 21, true},
		{"amx", ActDefault, amxBF16MinTokens - 1, false},
		{"amx", ActDefault, 1, false},
		{"amx", ActQuant, 64, false},
		{"avx512vnni", ActDefault, 64, false},
	} {
		restore, err := SetImpl(c.impl)
		if err != nil {
			t.Fatal(err)
		}
		m.Mode = c.mode
		X := bf16Acts(c.nTok, m.Cols, rng)
		var a Acts
		m.Prepare(&a, X, c.nTok)
		Y := make([]float32, c.nTok*m.Rows)
		before := amxBF16TileProducts.Load()
		m.MulActs(Y, &a, 0, m.Rows)
		if got := amxBF16TileProducts.Load() > before; got != c.tiles {
			t.Errorf("%s %v, %d tokens: tiles %v, want %v", c.impl, c.mode, c.nTok, got, c.tiles)
		}
		if c.tiles {
			want := make([]float32, len(Y))
			amxBF16Model(m, want, X, c.nTok, 0, m.Rows, amxBF16Parts)
			p := NewPool(3)
			pooled := make([]float32, len(Y))
			p.RunDynamic(m.Rows, 16, func(_, lo, hi int) { m.MulActs(pooled, &a, lo, hi) })
			p.Close()
			for i := range Y {
				if math.Float32bits(Y[i]) != math.Float32bits(want[i]) || math.Float32bits(pooled[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%d tokens: token %d row %d: one call %v, pooled %v, model %v", c.nTok, i/m.Rows, i%m.Rows, Y[i], pooled[i], want[i])
				}
			}
		}
		restore()
	}
	m.Mode = ActDefault
}

// TestAMXBF16Encodings disassembles the BF16 tile kernels with GNU objdump and checks the
// BYTE-encoded instructions: every tile instruction of amxBF16Tile, in order, and the
// conversions of amxBF16Pack.
func TestAMXBF16Encodings(t *testing.T) {
	c := []string{"(%rax,%rcx,1)", "0x40(%rax,%rcx,1)", "(%rax,%rcx,1)", "0x40(%rax,%rcx,1)"}
	a4, a5 := "tileloadd (%rsi,%rdx,1),%tmm4", "tileloadd (%rdi,%rdx,1),%tmm5"
	b6, b7 := "tileloadd (%rbx,%rcx,1),%tmm6", "tileloadd 0x400(%rbx,%rcx,1),%tmm7"
	d0, d2, d1, d3 := "tdpbf16ps %tmm6,%tmm4,%tmm0", "tdpbf16ps %tmm6,%tmm5,%tmm2", "tdpbf16ps %tmm7,%tmm4,%tmm1", "tdpbf16ps %tmm7,%tmm5,%tmm3"
	want := []string{"ldtilecfg (%rcx)", "tilezero %tmm0", "tilezero %tmm1", "tilezero %tmm2", "tilezero %tmm3"}
	for i, m := range c {
		want = append(want, fmt.Sprintf("tileloadd %s,%%tmm%d", m, i))
	}
	want = append(want,
		a4, b6, d0, // one row tile, one column tile
		a4, a5, b6, d0, d2, // two row tiles
		a4, b6, d0, b7, d1, // two column tiles
		a4, a5, b6, d0, d2, b7, d1, d3) // both
	for i, m := range c {
		want = append(want, fmt.Sprintf("tilestored %%tmm%d,%s", i, m))
	}
	want = append(want, "tilerelease")
	re := regexp.MustCompile(`^((?:ldtilecfg|tilerelease|tilezero|tileloadd\w*|tilestored|tdp\w+)\b.*)$`)
	if got := disassembled(t, "amxBF16Tile", re); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tile instructions of amxBF16Tile:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cvt := []string{"vcvtne2ps2bf16 %zmm16,%zmm17,%zmm18", "vcvtne2ps2bf16 %zmm20,%zmm21,%zmm18", "vcvtne2ps2bf16 %zmm22,%zmm23,%zmm18"}
	re = regexp.MustCompile(`^(vcvtne\w*\b.*)$`)
	if got := disassembled(t, "amxBF16Pack", re); strings.Join(got, "\n") != strings.Join(cvt, "\n") {
		t.Errorf("conversions of amxBF16Pack:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(cvt, "\n"))
	}
}

// BenchmarkAMXBF16 measures BF16 × float32 products (the default mode of BF16 weights) on the
// AMX-BF16 tiles ("amx") and with widen + FMA ("avx512vnni"), interleaved in one run, for two
// Qwen3-0.6B matrix shapes and 16 to 512 tokens: whole matrices in one call, the activations
// prepared again for every product, inside the timing (under amx, Prepare packs the parts:
// once per batch, however many row ranges and matrices then share them). It
// reports the tiles' speed-up over widen + FMA (x_fma), their tok/s and GFLOP/s (2 per
// multiply-add of W·x).
//
//	go test -run - -bench AMXBF16 ./runtime/kernels/
func BenchmarkAMXBF16(b *testing.B) {
	amxBF16Testable(b)
	prev := amxBF16MinTokens
	amxBF16MinTokens = 1
	defer func() { amxBF16MinTokens = prev }()
	rng := rand.New(rand.NewPCG(2, 3))
	for _, sh := range []struct{ rows, cols int }{{1024, 1024}, {3072, 1024}} {
		m := bf16Matrix(b, sh.rows, sh.cols, rng, nil)
		for _, nTok := range benchBF16Tokens {
			b.Run(fmt.Sprintf("%dx%d/%dtok", sh.rows, sh.cols, nTok), func(b *testing.B) {
				X := bf16Acts(nTok, sh.cols, rng)
				Y := make([]float32, nTok*sh.rows)
				timeWith := func(impl string, n int) float64 {
					restore, _ := SetImpl(impl)
					defer restore()
					var a Acts
					m.Prepare(&a, X, nTok)
					m.MulActs(Y, &a, 0, sh.rows)
					var el time.Duration
					for range n {
						start := time.Now()
						m.Prepare(&a, X, nTok) // under amx the parts are packed here
						m.MulActs(Y, &a, 0, sh.rows)
						el += time.Since(start)
					}
					return el.Seconds() / float64(n)
				}
				var tiles, fma float64
				for range b.N {
					tiles += timeWith("amx", 3)
					fma += timeWith("avx512vnni", 3)
				}
				b.ReportMetric(fma/tiles, "x_fma")
				b.ReportMetric(float64(nTok)*float64(b.N)/tiles, "tok/s")
				b.ReportMetric(2*float64(sh.rows*sh.cols*nTok)*float64(b.N)/tiles/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkAMXBF16Pack measures, for 128 tokens of 1024 columns, the packing of 1 to 3 parts
// and the comparison that replaces it in a later row range of the scratch path (activations
// Prepare did not pack: amxBF16Scratch.pack), in CPU cycles per
// activation at the nominal 2.6 GHz.
func BenchmarkAMXBF16Pack(b *testing.B) {
	amxBF16Testable(b)
	const nTok, cols = 128, 1024
	X := bf16Acts(nTok, cols, rand.New(rand.NewPCG(4, 5)))
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	defer amxBF16Pool.Put(s)
	for _, c := range []struct {
		name   string
		planes int
		again  bool
	}{{"pack1", 1, false}, {"pack2", 2, false}, {"pack3", 3, false}, {"compare", 3, true}} {
		b.Run(c.name, func(b *testing.B) {
			s.pack(X, nTok, cols, c.planes)
			start := time.Now()
			for range b.N {
				if !c.again {
					s.forget()
				}
				s.pack(X, nTok, cols, c.planes)
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N)/(nTok*cols)*2.6e9, "cycles/x")
		})
	}
}

// BenchmarkAMXBF16Kernel measures amxBF16Tile alone (32 rows × 32 tokens × kc chunks of 32
// columns, 3 parts, over rb different row blocks: the weights from L1, L2 or further), in
// bf16 multiply-adds per second and as a share of 512 per cycle at the nominal 2.6 GHz.
func BenchmarkAMXBF16Kernel(b *testing.B) {
	amxBF16Testable(b)
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	defer amxBF16Pool.Put(s)
	for _, kc := range []int{4, 32, 96} {
		for _, blocks := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("kc%d/rb%d", kc, blocks), func(b *testing.B) {
				a := alignedBytes(32 * blocks * kc * 64)
				bb := alignedBytes(kc * 3 * 2048)
				cfg := s.config(16, 16)
				start := time.Now()
				for range b.N {
					for r := 0; r < blocks; r++ {
						amxBF16Tile(cfg, &s.c[0], 128, (*uint16)(unsafe.Pointer(&a[r*32*kc*64])), kc*64, &bb[0], 3*2048, 2048, kc, 3, amxBF16TwoRows|amxBF16TwoCols)
					}
				}
				macs := float64(b.N*blocks) * 32 * 32 * float64(kc*32) * 3 / time.Since(start).Seconds()
				b.ReportMetric(macs/1e9, "GMAC/s")
				b.ReportMetric(macs/2.6e9/512*100, "%peak")
			})
		}
	}
}

var benchBF16Tokens = []int{16, 64, 128, 512}

// TestAMXBF16PreparedParts checks the parts packed once per batch in Prepare (Acts.xp): they
// are the bytes a worker's scratch packs; products of two matrices sharing one PrepareOn
// (workers packing disjoint token ranges), over row ranges spread over a pool, give the bits
// of one whole product on the scratch path, which are amxBF16Model's; activations prepared
// again in the same Acts (the same slice changed in place, or another batch of the same
// shape) are the ones multiplied; activations prepared by an F32 matrix (not packed) take the
// scratch path; and a product of prepared activations allocates nothing.
func TestAMXBF16PreparedParts(t *testing.T) {
	amxBF16Testable(t)
	restore, err := SetImpl("amx")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	rng := rand.New(rand.NewPCG(81, 82))
	p := NewPool(3)
	defer p.Close()
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	defer amxBF16Pool.Put(s)
	for _, sh := range []struct{ rows, cols, nTok int }{{70, 1000, 70}, {37, 100, 35}, {40, 3072 + 5, 53}, {33, 64, amxBF16MinTokens}} {
		q, k := bf16Matrix(t, sh.rows, sh.cols, rng, []int{0, 0, 1, 0}), bf16Matrix(t, sh.rows+9, sh.cols, rng, nil)
		if !q.SharesActs(k) {
			t.Fatal("BF16 matrices of the same width do not share activations")
		}
		X := bf16Acts(sh.nTok, sh.cols, rng)
		var a Acts
		name := fmt.Sprintf("%dx%d, %d tokens", sh.rows, sh.cols, sh.nTok)
		for round := 0; round < 3; round++ {
			switch round {
			case 1:
				X[len(X)-1] += 1 // the same slice, changed in place
			case 2:
				X = bf16Acts(sh.nTok, sh.cols, rng)
			}
			q.PrepareOn(p, &a, X, sh.nTok)
			if len(a.xp) == 0 {
				t.Fatalf("%s: Prepare did not pack the parts", name)
			}
			s.pack(X, sh.nTok, sh.cols, amxBF16Parts)
			// The 16-token tiles the batch has (a block's second tile past the last token is
			// neither written nor read).
			chunks := (sh.cols + 31) / 32
			for o := 0; o < len(a.xp); o += 1024 {
				tok := o/(chunks*amxBF16Parts*2048)*32 + o/1024%2*16
				if tok < sh.nTok && !bytes.Equal(a.xp[o:o+1024], s.b[o:o+1024]) {
					t.Fatalf("%s, round %d: packed parts of token %d differ from the scratch's", name, round, tok)
				}
			}
			for _, m := range []*Matrix{q, k} {
				whole, want := make([]float32, sh.nTok*m.Rows), make([]float32, sh.nTok*m.Rows)
				s.forget()
				amxBF16Product(m, whole, X, sh.nTok, 0, m.Rows, s, amxBF16Parts)
				amxBF16Model(m, want, X, sh.nTok, 0, m.Rows, amxBF16Parts)
				pooled := make([]float32, len(whole))
				before := amxBF16TileProducts.Load()
				p.RunDynamic(m.Rows, 16, func(_, lo, hi int) { m.MulActs(pooled, &a, lo, hi) })
				ranges := make([]float32, len(whole))
				for _, r := range [][2]int{{0, 5}, {5, 21}, {21, 32}, {32, m.Rows}} {
					m.MulActs(ranges, &a, r[0], r[1])
				}
				if amxBF16TileProducts.Load() == before {
					t.Fatalf("%s: the products did not take the tiles", name)
				}
				for i := range whole {
					w := math.Float32bits(want[i])
					if math.Float32bits(whole[i]) != w || math.Float32bits(pooled[i]) != w || math.Float32bits(ranges[i]) != w {
						t.Fatalf("%s, round %d, %d rows: token %d row %d: whole %v, pooled %v, ranges %v, model %v",
							name, round, m.Rows, i/m.Rows, i%m.Rows, whole[i], pooled[i], ranges[i], want[i])
					}
				}
			}
		}
		// Prepared by an F32 matrix of the same width: no packed parts, the scratch's.
		f32, err := NewMatrix(F32, 1, sh.cols, make([]byte, 4*sh.cols))
		if err != nil {
			t.Fatal(err)
		}
		if !f32.SharesActs(q) {
			t.Fatal("F32 and BF16 matrices do not share float activations")
		}
		f32.Prepare(&a, X, sh.nTok)
		if len(a.xp) != 0 {
			t.Fatalf("%s: an F32 matrix's preparation packed BF16 parts", name)
		}
		got, want := make([]float32, sh.nTok*q.Rows), make([]float32, sh.nTok*q.Rows)
		q.MulActs(got, &a, 0, q.Rows)
		amxBF16Model(q, want, X, sh.nTok, 0, q.Rows, amxBF16Parts)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s, F32 preparation: token %d row %d: tiles %v, model %v", name, i/q.Rows, i%q.Rows, got[i], want[i])
			}
		}
	}
	// No allocation once the Acts and the scratch have grown.
	m := bf16Matrix(t, 64, 256, rng, nil)
	X := bf16Acts(40, 256, rng)
	Y := make([]float32, 40*64)
	var a Acts
	run := func() {
		m.Prepare(&a, X, 40)
		m.MulActs(Y, &a, 0, 32)
		m.MulActs(Y, &a, 32, 64)
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Errorf("Prepare and MulActs: %v allocations", n)
	}
}
