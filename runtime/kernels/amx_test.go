//go:build amd64 && !purego

package kernels

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// amxChildEnv marks a test binary run by TestAMXEmulated: its kernels list the AMX
// implementation first although this CPU has no AMX, and the parent emulates the tile
// instructions (internal/amxemu).
const amxChildEnv = "GQUANT_TEST_AMX_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(amxChildEnv) == "1" && !amxUsable() {
		impls = append([]*implTable{amxImpl}, impls...)
	}
	defaults = amxTileTokens
	forceTiles = amxForceTiles
	if os.Getenv(amxChildEnv) == "1" {
		amxForceTiles() // the emulated child is there to run the tiles
	}
	os.Exit(m.Run())
}

// defaults is amxTileTokens as the package sets it.
var defaults map[WType]int

// TestAMXTileTokensTyped checks that every type amxTileTokens lists, by default and under
// amxForceTiles, is one the AMX kernels handle (amxMul does not check it again).
func TestAMXTileTokensTyped(t *testing.T) {
	check := func(name string, m map[WType]int) {
		for wt := range m {
			if !amxTyped(wt) {
				t.Errorf("%s amxTileTokens lists %v, which the AMX kernels do not handle", name, wt)
			}
		}
	}
	check("default", defaults)
	restore := amxForceTiles()
	check("forced", amxTileTokens)
	if len(amxTileTokens) != len(amxKernels) {
		t.Errorf("forced amxTileTokens lists %d types, amxKernels %d", len(amxTileTokens), len(amxKernels))
	}
	restore()
}

// TestAMXTileTokens checks the default choice of the ggml tiles: a batch of a listed type
// below its entry, and any batch of an unlisted type, runs on the avx512vnni kernels; a batch
// at its entry on the tiles.
func TestAMXTileTokens(t *testing.T) {
	if !hasImpl("amx") {
		t.Skip("no AMX on this CPU")
	}
	prev := amxTileTokens
	amxTileTokens = defaults
	defer func() { amxTileTokens = prev }()
	rng := rand.New(rand.NewPCG(91, 92))
	for _, c := range []struct {
		wt    WType
		nTok  int
		tiles bool
	}{{Q4_0, 511, false}, {Q4_0, 512, true}, {Q8_0, 512, true}, {Q4_K, 1024, false}, {Q6_K, 64, false}, {Q4_0, 64, false}} {
		cols := 256
		var data []byte
		for r := 0; r < 16; r++ {
			data = append(data, genRow(c.wt, cols, rng, 0)...)
		}
		m, err := NewMatrix(c.wt, 16, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		X := make([]float32, c.nTok*cols)
		for i := range X {
			X[i] = float32(rng.NormFloat64())
		}
		before := amxTileProducts.Load()
		product(t, "amx", m, X, c.nTok, nil)
		if got := amxTileProducts.Load() > before; got != c.tiles {
			t.Errorf("%v, %d tokens: tiles %v, want %v (defaults %v)", c.wt, c.nTok, got, c.tiles, defaults)
		}
	}
}

// TestAMXEncodings disassembles the AMX kernels with GNU objdump, an assembler independent of the
// hand-written BYTE encodings, and checks every tile instruction and its operands.
func TestAMXEncodings(t *testing.T) {
	// Per kernel: the pair of steps on both tile sets, then the single step.
	want := func(fn string) []string {
		da, db := "0x200", "0x2000" // 16 blocks of 32 bytes (A) and of 512 (B)
		if fn != "amxQ8Tile" {
			da, db = "0x100", "0x1000" // 16 lanes of 16 bytes and of 256
		}
		return []string{
			"ldtilecfg (%rcx)",
			"tilezero %tmm0",
			"tilezero %tmm3",
			"tileloadd (%rsi,%rdx,1),%tmm1",
			"tileloadd (%rbx,%rax,1),%tmm2",
			"tileloadd " + da + "(%rsi,%rdx,1),%tmm4",
			"tileloadd " + db + "(%rbx,%rax,1),%tmm5",
			"tdpbssd %tmm2,%tmm1,%tmm0",
			"tdpbssd %tmm5,%tmm4,%tmm3",
			"tilestored %tmm0,(%rdi,%rax,1)",
			"tilestored %tmm3,(%rcx,%rax,1)",
			"tilezero %tmm0",
			"tileloadd (%rsi,%rdx,1),%tmm1",
			"tileloadd (%rbx,%rax,1),%tmm2",
			"tdpbssd %tmm2,%tmm1,%tmm0",
			"tilestored %tmm0,(%rdi,%rax,1)",
			"tilerelease",
		}
	}
	re := regexp.MustCompile(`^((?:ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|tilestored|tdp\w+)\b.*)$`)
	for _, fn := range []string{"amxQ8Tile", "amxQ4KTile", "amxQ6KTile"} {
		got := disassembled(t, fn, re)
		if w := want(fn); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("tile instructions of %s:\n%s\nwant:\n%s", fn, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
}

// disassembled returns, as GNU objdump writes them (operands in AT&T order, spaces
// normalised), the instructions of the package function fn that match re, skipping the test
// when objdump is not installed. The assembly function and its ABI wrapper share the name;
// both are disassembled (the wrapper holds none of the instructions looked for). Bytes that
// objdump cannot decode fail the test.
func disassembled(t *testing.T, fn string, re *regexp.Regexp) []string {
	t.Helper()
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("GNU objdump not installed")
	}
	codes, err := funcCode(os.Args[0], "github.com/gquant/gquant/runtime/kernels."+fn)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, code := range codes {
		bin := filepath.Join(t.TempDir(), fmt.Sprintf("%s%d.bin", fn, i))
		if err := os.WriteFile(bin, code, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(objdump, "-D", "-b", "binary", "-m", "i386:x86-64", "--no-show-raw-insn", bin).Output()
		if err != nil {
			t.Fatalf("objdump: %v", err)
		}
		if bytes.Contains(out, []byte("(bad)")) {
			t.Errorf("objdump finds undecodable bytes in %s:\n%s", fn, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			// "  1c:\tinstruction operands"
			if _, ins, ok := strings.Cut(line, ":\t"); ok {
				if m := re.FindStringSubmatch(strings.TrimSpace(ins)); m != nil {
					got = append(got, strings.Join(strings.Fields(m[1]), " "))
				}
			}
		}
	}
	return got
}

// funcCode returns the machine code of every function called name in the Go binary bin,
// located through the binary's pclntab (go test strips the ELF symbol table).
func funcCode(bin, name string) ([][]byte, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return nil, fmt.Errorf("%s: no .gopclntab or .text section", bin)
	}
	pd, err := pcln.Data()
	if err != nil {
		return nil, err
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(pd, text.Addr))
	if err != nil {
		return nil, err
	}
	td, err := text.Data()
	if err != nil {
		return nil, err
	}
	var codes [][]byte
	for _, fn := range tab.Funcs {
		if fn.Name != name {
			continue
		}
		if fn.Entry < text.Addr || fn.End > text.Addr+uint64(len(td)) || fn.End <= fn.Entry {
			return nil, fmt.Errorf("%s: %s at [%#x,%#x) is outside .text", bin, name, fn.Entry, fn.End)
		}
		codes = append(codes, td[fn.Entry-text.Addr:fn.End-text.Addr])
	}
	if codes == nil {
		return nil, fmt.Errorf("%s: function %s not found", bin, name)
	}
	return codes, nil
}

// TestAMXNotSelectedWithoutAMX checks that the AMX implementation is listed only where the
// CPU has the tiles (or in the emulated child).
func TestAMXNotSelectedWithoutAMX(t *testing.T) {
	if os.Getenv(amxChildEnv) == "1" {
		t.Skip("emulated child")
	}
	listed := false
	for _, name := range Impls() {
		listed = listed || name == "amx"
	}
	if listed != amxUsable() {
		t.Fatalf("amx listed: %v, usable: %v (CPU AMX-TILE %v, AMX-INT8 %v)", listed, amxUsable(), amxCapable(), amxCapable())
	}
}

// TestAMXProducts runs batched products through the AMX implementation for every type it
// handles (and Q4_1, which it leaves to the AVX-512 kernels) and shapes with partial row
// blocks, partial token tiles and more than 16 blocks (lanes reused): each result must equal
// the avx512vnni one bit for bit, and the float64 reference within rounding. It prints how many TDPBSSD the products must execute, which
// TestAMXEmulated compares with the emulator's count.
func TestAMXProducts(t *testing.T) {
	if !hasImpl("amx") {
		t.Skip("no AMX on this CPU (TestAMXEmulated runs this test under an emulator)")
	}
	defer amxForceTiles()()
	rng := rand.New(rand.NewPCG(11, 12))
	tiles, calls := 0, 0
	for _, wt := range []WType{Q4_0, IQ4_NL, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS, Q4_1} {
		for _, shape := range []struct{ rows, cols, nTok int }{
			{16, 32, 16}, {40, 544, 17}, {23, 1056, 33}, {64, 96, 48},
		} {
			cols := shape.cols
			if wt.BlockSize() == 256 {
				cols = 256 * (1 + shape.cols/512) // 1, 2 and 3 super-blocks
			}
			var data []byte
			for r := 0; r < shape.rows; r++ {
				data = append(data, genRow(wt, cols, rng, r%4)...)
			}
			m, err := NewMatrix(wt, shape.rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			X := make([]float32, shape.nTok*cols)
			for i := range X {
				X[i] = float32(rng.NormFloat64())
			}
			X[cols+5] = 60 // an outlier in one block
			want := product(t, "avx512vnni", m, X, shape.nTok, nil)
			split := []int{0, shape.rows / 3, shape.rows}
			got := product(t, "amx", m, X, shape.nTok, split)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v %dx%d, %d tokens: token %d row %d: amx %v, avx512vnni %v", wt, shape.rows, cols, shape.nTok, i/shape.rows, i%shape.rows, got[i], want[i])
				}
			}
			if shape.rows == 64 {
				// Rows spread over a pool: tiles used by several threads at once.
				got := pooledProduct(t, m, X, shape.nTok)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v pooled: token %d row %d: amx %v, avx512vnni %v", wt, i/shape.rows, i%shape.rows, got[i], want[i])
					}
				}
				split = append(split, split[len(split)-1]+shape.rows) // counted as one more range of all rows
			}
			for _, tok := range []int{0, 1, shape.nTok - 1} {
				for _, r := range []int{0, shape.rows - 1} {
					ref, mag := refQuantDot(m, r, X[tok*cols:(tok+1)*cols])
					if v := got[tok*shape.rows+r]; !close64(v, ref, mag, 2e-6*math.Sqrt(float64(cols))) {
						t.Errorf("%v %dx%d: token %d row %d: amx %v, reference %v", wt, shape.rows, cols, tok, r, v, ref)
					}
				}
			}
			if amxTyped(wt) {
				nt := (shape.nTok + 15) / 16
				for i := 1; i < len(split); i++ {
					c := (split[i] - split[i-1] + 15) / 16 * nt
					calls += c
					k := 32
					if wt.BlockSize() == 256 {
						k = 16 // one tile product per 16-element lane
					}
					tiles += c * (cols / k)
				}
			}
		}
	}
	// The self-check, run here and (once) before the first tile product above: 10 types ×
	// 2 row blocks × 2 token tiles, twice.
	restore, _ := SetImpl("amx")
	err := amxSelfCheck(amxTileFor)
	restore()
	if err != nil {
		t.Fatalf("AMX self-check: %v", err)
	}
	for _, wt := range []WType{Q4_0, IQ4_NL, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS} {
		steps := 96 / 32
		if wt.BlockSize() == 256 {
			steps = 512 / 16
		}
		calls += 2 * 2 * 2
		tiles += 2 * 2 * 2 * steps
	}
	if os.Getenv(amxChildEnv) == "1" {
		fmt.Printf("amx-expected tdpbssd=%d ldtilecfg=%d\n", tiles, calls)
	}
}

// product computes m × X under implementation impl, over the row ranges split (nil: all rows
// at once).
func product(t *testing.T, impl string, m *Matrix, X []float32, nTok int, split []int) []float32 {
	restore, err := SetImpl(impl)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	if split == nil {
		split = []int{0, m.Rows}
	}
	m.Mode = ActQuant
	var a Acts
	m.Prepare(&a, X, nTok)
	Y := make([]float32, nTok*m.Rows)
	for i := range Y {
		Y[i] = float32(math.NaN())
	}
	for i := 1; i < len(split); i++ {
		m.MulActs(Y, &a, split[i-1], split[i])
	}
	return Y
}

// pooledProduct computes m × X under "amx" with the rows handed out in chunks of 16 to the
// workers of a pool of 3.
func pooledProduct(t *testing.T, m *Matrix, X []float32, nTok int) []float32 {
	restore, err := SetImpl("amx")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	p := NewPool(3)
	defer p.Close()
	m.Mode = ActQuant
	var a Acts
	m.Prepare(&a, X, nTok)
	Y := make([]float32, nTok*m.Rows)
	p.RunDynamic(m.Rows, 16, func(_, lo, hi int) { m.MulActs(Y, &a, lo, hi) })
	return Y
}

func hasImpl(name string) bool {
	for _, n := range Impls() {
		if n == name {
			return true
		}
	}
	return false
}

// BenchmarkAMXBuildB measures the B-tile preparation of the AMX kernels (the row factors
// from the ggml rows, the tiles from the packed copy by amx_buildb_amd64.s, for every row
// block of a Qwen3-0.6B FFN matrix) beside the avx512vnni product of a
// 512-token prompt with the same matrix, measured in the same run: the ratio bounds the
// share of an AMX product that goes to its preparation (it runs on any AVX-512 machine).
func BenchmarkAMXBuildB(b *testing.B) {
	const rows, cols, nTok = 3072, 1024, 512
	for _, wt := range []WType{Q4_0, Q8_0, Q4_K, Q6_K} {
		rng := rand.New(rand.NewPCG(1, uint64(wt)))
		var data []byte
		for r := 0; r < rows; r++ {
			data = append(data, genRow(wt, cols, rng, 0)...)
		}
		m, err := NewMatrix(wt, rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(wt.String(), func(b *testing.B) {
			if !hasImpl("avx512vnni") {
				b.Skip("no AVX-512")
			}
			restore, _ := SetImpl("avx512vnni")
			defer restore()
			X := make([]float32, nTok*cols)
			for i := range X {
				X[i] = float32(rng.NormFloat64())
			}
			var a Acts
			m.Mode = ActQuant
			m.Prepare(&a, X, nTok)
			Y := make([]float32, nTok*rows)
			m.MulActs(Y, &a, 0, rows) // pack
			start := time.Now()
			const reps = 3
			for range reps {
				m.MulActs(Y, &a, 0, rows)
			}
			gemm := time.Since(start) / reps
			s := &amxScratch{}
			k, words := 32, 16
			if wt.BlockSize() == 256 {
				k, words = 16, 32
			}
			s.b, s.kw, s.vals = make([]byte, 8192*((cols+255)/256)), make([]uint32, cols/k*words), make([]uint8, 16*cols)
			pk := m.packedFor(avx512Impl)
			b.ResetTimer()
			for range b.N {
				for rb := 0; rb < rows; rb += 16 {
					amxBuildB(m, pk, rb, 16, s)
				}
			}
			build := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(build)/float64(gemm), "build/avx512-gemm")
			b.ReportMetric(float64(gemm.Microseconds()), "avx512-gemm-µs")
		})
	}
}

// TestAMXSelfCheck checks that the self-check run before the first tile product catches a
// tile kernel that computes something else (here a Go stand-in that adds one token's block
// twice): it needs no AMX, since the stand-in replaces the tile kernels. Under the emulator
// (TestAMXProducts' child) the real kernels pass it.
func TestAMXSelfCheck(t *testing.T) {
	if !hasImpl("avx512vnni") {
		t.Skip("no AVX-512")
	}
	restore, _ := SetImpl("avx512vnni")
	defer restore()
	broken := func(WType) amxTileFunc {
		return func(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsteps, nt int, y *float32, ldy int, mask uint64) {
			*y = 1 // one wrong value: the first row of the tile's first token
		}
	}
	if err := amxSelfCheck(broken); err == nil || !strings.Contains(err.Error(), "Q4_0: token 0 row 0") {
		t.Fatalf("self-check of a broken tile kernel: %v", err)
	}
}

// TestAMXBuildB checks the assembly B-tile builders (from the packed copy) against the Go
// decoding of the ggml rows, byte for byte, for every AMX-handled type, full and cut row
// blocks and rows with several groups (and a last, partial one for the 32-element types).
func TestAMXBuildB(t *testing.T) {
	if !hasImpl("avx512vnni") {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(81, 82))
	for _, wt := range []WType{Q4_0, IQ4_NL, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS} {
		cols := 1056 // 33 blocks: two groups, the second with one block
		if wt.BlockSize() == 256 {
			cols = 768
		}
		const rows = 21
		var data []byte
		for r := 0; r < rows; r++ {
			data = append(data, genRow(wt, cols, rng, r%4)...)
		}
		m, err := NewMatrix(wt, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		pk := packMatrix(m)
		k, words := 32, 16
		if wt.BlockSize() == 256 {
			k, words = 16, 32
		}
		mk := func() *amxScratch {
			return &amxScratch{b: make([]byte, 8192*((cols+511)/512)), kw: make([]uint32, cols/k*words), vals: make([]uint8, 16*cols)}
		}
		for _, blk := range [][2]int{{0, 16}, {16, 5}} {
			fast, slow := mk(), mk()
			amxBuildB(m, pk, blk[0], blk[1], fast)
			amxBuildB(m, nil, blk[0], blk[1], slow)
			for q := 0; q < cols/4; q++ { // B word q of row n at word 16q+n; rows past nr don't count
				for n := 0; n < blk[1]; n++ {
					i := 4 * (16*q + n)
					if string(fast.b[i:i+4]) != string(slow.b[i:i+4]) {
						t.Fatalf("%v rows %v: B word %d of row %d: % x, Go decoding % x", wt, blk, q, n, fast.b[i:i+4], slow.b[i:i+4])
					}
				}
			}
			for i := range fast.kw {
				if fast.kw[i] != slow.kw[i] {
					t.Fatalf("%v rows %v: factor %d differs", wt, blk, i)
				}
			}
		}
	}
}

// BenchmarkAMXSpeedup measures, per ggml type and batch size, the tiles (forced from
// amxMinTokens) against the avx512vnni kernels on Qwen3-0.6B's FFN shape, interleaved in one
// run, and reports speedup = avx512vnni's time over the tiles' (the products without the
// activations' preparation). amxTileTokens's entries come from it:
//
//	go test -run - -bench AMXSpeedup -benchtime 10x ./runtime/kernels/
func BenchmarkAMXSpeedup(b *testing.B) {
	if !hasImpl("amx") {
		b.Skip("no AMX on this CPU")
	}
	defer amxForceTiles()()
	const rows, cols = 3072, 1024
	for _, wt := range []WType{Q4_0, IQ4_NL, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS} {
		m := benchMatrices(b, wt, rows, cols)[0]
		for _, nTok := range []int{16, 64, 128, 256, 512, 1024} {
			b.Run(fmt.Sprintf("%v/%dtok", wt, nTok), func(b *testing.B) {
				X := make([]float32, nTok*cols)
				for i := range X {
					X[i] = float32(i%11) - 5
				}
				Y := make([]float32, nTok*rows)
				var at, av Acts
				restore, _ := SetImpl("amx")
				m.Pack()
				m.Prepare(&at, X, nTok)
				restore()
				restore, _ = SetImpl("avx512vnni")
				m.Prepare(&av, X, nTok)
				restore()
				var tt, tv time.Duration
				for b.Loop() {
					restore, _ := SetImpl("amx")
					t0 := time.Now()
					m.MulActs(Y, &at, 0, rows)
					t1 := time.Now()
					restore()
					restore, _ = SetImpl("avx512vnni")
					m.MulActs(Y, &av, 0, rows)
					tt, tv = tt+t1.Sub(t0), tv+time.Since(t1)
					restore()
				}
				b.ReportMetric(tt.Seconds()*1e6/float64(b.N), "tiles-µs")
				b.ReportMetric(tv.Seconds()*1e6/float64(b.N), "avx512-µs")
				b.ReportMetric(float64(tv)/float64(tt), "speedup")
			})
		}
	}
}
