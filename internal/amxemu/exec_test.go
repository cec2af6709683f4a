package amxemu

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// fakeMem is a flat memory [base, base+len(buf)); accesses outside fault.
type fakeMem struct {
	base uint64
	buf  []byte
}

func (m *fakeMem) span(addr uint64, n int) ([]byte, error) {
	if addr < m.base || addr-m.base+uint64(n) > uint64(len(m.buf)) {
		return nil, errors.New("EFAULT")
	}
	return m.buf[addr-m.base : addr-m.base+uint64(n)], nil
}

func (m *fakeMem) ReadAt(p []byte, addr uint64) error {
	s, err := m.span(addr, len(p))
	if err == nil {
		copy(p, s)
	}
	return err
}

func (m *fakeMem) WriteAt(p []byte, addr uint64) error {
	s, err := m.span(addr, len(p))
	if err == nil {
		copy(s, p)
	}
	return err
}

const memBase = 0x10000

// machine is a tile state with registers and memory for executing encoded instructions.
type machine struct {
	t   testing.TB
	s   tileState
	cpu cpuState
	mem *fakeMem
}

func newMachine(t testing.TB) *machine {
	return &machine{t: t, mem: &fakeMem{base: memBase, buf: make([]byte, 1<<16)}}
}

// run executes the encoded instruction code and returns the fault, if any.
func (m *machine) run(code string) error {
	m.t.Helper()
	in, ok := decode(hexBytes(m.t, code))
	if !ok {
		m.t.Fatalf("%s: not AMX", code)
	}
	return m.s.execute(&in, &m.cpu, m.mem)
}

// mustRun executes code and fails the test on a fault.
func (m *machine) mustRun(code string) {
	m.t.Helper()
	if err := m.run(code); err != nil {
		m.t.Fatalf("%s: %v", code, err)
	}
}

// config builds a palette-1 configuration from (tile, rows, colsb) triples.
func config(tiles ...[3]int) [64]byte {
	var c [64]byte
	c[0] = 1
	for _, t := range tiles {
		binary.LittleEndian.PutUint16(c[16+2*t[0]:], uint16(t[2]))
		c[48+t[0]] = byte(t[1])
	}
	return c
}

// loadCfg writes cfg at memBase and executes ldtilecfg (%rax) with rax = memBase.
func (m *machine) loadCfg(cfg [64]byte) error {
	copy(m.mem.buf, cfg[:])
	m.cpu.gpr[0] = memBase
	return m.run("c4 e2 78 49 00")
}

func TestLoadConfigValidation(t *testing.T) {
	mod := func(f func(c *[64]byte)) [64]byte {
		c := config([3]int{0, 16, 64}, [3]int{1, 3, 12})
		f(&c)
		return c
	}
	for _, v := range []struct {
		name string
		cfg  [64]byte
		want string // "" = accepted
	}{
		{"valid", mod(func(*[64]byte) {}), ""},
		{"start_row accepted", mod(func(c *[64]byte) { c[1] = 2 }), ""},
		{"palette 2", mod(func(c *[64]byte) { c[0] = 2 }), "palette_id 2"},
		{"reserved byte 2", mod(func(c *[64]byte) { c[2] = 1 }), "reserved byte 2"},
		{"reserved byte 15", mod(func(c *[64]byte) { c[15] = 1 }), "reserved byte 15"},
		{"reserved colsb of tmm8", mod(func(c *[64]byte) { c[32] = 4 }), "reserved byte 32"},
		{"reserved rows of tmm15", mod(func(c *[64]byte) { c[63] = 1 }), "reserved byte 63"},
		{"colsb 65", mod(func(c *[64]byte) { c[16] = 65 }), "tmm0: colsb 65 > 64"},
		{"colsb high byte", mod(func(c *[64]byte) { c[19] = 1 }), "tmm1: colsb 268 > 64"},
		{"rows 17", mod(func(c *[64]byte) { c[49] = 17 }), "tmm1: rows 17 > 16"},
		{"rows without colsb", mod(func(c *[64]byte) { c[50] = 2 }), "tmm2: rows 2 and colsb 0"},
		{"colsb without rows", mod(func(c *[64]byte) { c[30] = 8 }), "tmm7: rows 0 and colsb 8"},
		{"two problems", mod(func(c *[64]byte) { c[3] = 1; c[49] = 20 }), "reserved byte 3 is 0x01, must be zero; tmm1: rows 20 > 16"},
	} {
		m := newMachine(t)
		err := m.loadCfg(v.cfg)
		switch {
		case v.want == "" && err != nil:
			t.Errorf("%s: %v", v.name, err)
		case v.want != "" && (err == nil || !strings.Contains(err.Error(), v.want) || !strings.Contains(err.Error(), "#GP")):
			t.Errorf("%s: error %v, want #GP with %q", v.name, err, v.want)
		case v.want != "" && m.s.configured:
			t.Errorf("%s: tiles configured after #GP", v.name)
		}
	}
}

func TestConfigStoreReleaseAndZeroing(t *testing.T) {
	m := newMachine(t)
	// Unconfigured: sttilecfg stores 64 zero bytes.
	for i := range 64 {
		m.mem.buf[0x100+i] = 0xee
	}
	m.cpu.gpr[3] = memBase + 0x100
	m.mustRun("c4 e2 79 49 03") // sttilecfg (%rbx)
	for i, b := range m.mem.buf[0x100:0x140] {
		if b != 0 {
			t.Fatalf("unconfigured sttilecfg: byte %d = %#x", i, b)
		}
	}
	cfg := config([3]int{2, 5, 20}, [3]int{7, 16, 64})
	cfg[1] = 3 // start_row
	if err := m.loadCfg(cfg); err != nil {
		t.Fatal(err)
	}
	m.mustRun("c4 e2 79 49 03")
	if got := [64]byte(m.mem.buf[0x100:0x140]); got != cfg {
		t.Fatalf("sttilecfg stored % x, want % x", got, cfg)
	}
	// LDTILECFG zeroes tile data, also on reconfiguration.
	m.s.data[2][0][0], m.s.data[5][15][63] = 1, 1
	if err := m.loadCfg(cfg); err != nil {
		t.Fatal(err)
	}
	if m.s.data != ([numTiles][maxRows][bytesPerRow]byte{}) {
		t.Fatal("ldtilecfg did not zero the tile data")
	}
	// Palette 0 and TILERELEASE return to INIT.
	m.s.data[2][0][0] = 1
	m.mustRun("c4 e2 78 49 c0") // tilerelease
	if m.s.configured || m.s.data[2][0][0] != 0 {
		t.Fatal("tilerelease left state behind")
	}
	if err := m.loadCfg(cfg); err != nil {
		t.Fatal(err)
	}
	if err := m.loadCfg([64]byte{0: 0, 5: 9}); err != nil { // palette 0: other bytes ignored
		t.Fatal(err)
	}
	if m.s.configured {
		t.Fatal("palette 0 left the tiles configured")
	}
}

func TestTileLoadStore(t *testing.T) {
	m := newMachine(t)
	if err := m.loadCfg(config([3]int{1, 3, 12}, [3]int{6, 16, 64})); err != nil {
		t.Fatal(err)
	}
	const src, stride = 0x1000, 100
	for i := range 0x800 {
		m.mem.buf[src+i] = byte(i*7 + 1)
	}
	// Garbage in the tile must not survive outside the loaded rows/bytes.
	for r := range maxRows {
		for c := range bytesPerRow {
			m.s.data[1][r][c] = 0xaa
		}
	}
	m.cpu.gpr[6], m.cpu.gpr[2] = memBase+src, stride // rsi, rdx
	m.mustRun("c4 e2 7b 4b 0c 16")                   // tileloadd (%rsi,%rdx,1),%tmm1
	for r := range maxRows {
		for c := range bytesPerRow {
			want := byte(0)
			if r < 3 && c < 12 {
				want = byte((r*stride+c)*7 + 1)
			}
			if got := m.s.data[1][r][c]; got != want {
				t.Fatalf("tmm1[%d][%d] = %#x, want %#x", r, c, got, want)
			}
		}
	}
	// tilestored writes exactly rows x colsb bytes at the stride.
	const dst, dstStride = 0x4000, 40
	for i := range 0x400 {
		m.mem.buf[dst+i] = 0x55
	}
	m.cpu.gpr[7], m.cpu.gpr[1] = memBase+dst, dstStride/2 // rdi, rcx (scale 2)
	m.mustRun("c4 e2 7a 4b 0c 4f")                        // tilestored %tmm1,(%rdi,%rcx,2)
	for i := range 0x400 {
		r, c := i/dstStride, i%dstStride
		want := byte(0x55)
		if r < 3 && c < 12 {
			want = byte((r*stride+c)*7 + 1)
		}
		if m.mem.buf[dst+i] != want {
			t.Fatalf("memory at dst+%d = %#x, want %#x", i, m.mem.buf[dst+i], want)
		}
	}
	// A fault on a row is reported.
	m.cpu.gpr[6] = memBase + 0xffc0
	if err := m.run("c4 e2 7b 4b 0c 16"); err == nil || !strings.Contains(err.Error(), "memory fault reading row 1") {
		t.Fatalf("load across the end of memory: %v", err)
	}
}

func TestTileLoadStartRow(t *testing.T) {
	m := newMachine(t)
	cfg := config([3]int{0, 4, 8})
	cfg[1] = 2
	if err := m.loadCfg(cfg); err != nil {
		t.Fatal(err)
	}
	m.s.data[0][0][0], m.s.data[0][1][7], m.s.data[0][2][0] = 9, 9, 9
	for i := range 64 {
		m.mem.buf[0x200+i] = byte(i + 1)
	}
	m.cpu.gpr[0], m.cpu.gpr[1] = memBase+0x200, 16
	m.mustRun("c4 e2 7b 4b 04 08") // tileloadd (%rax,%rcx,1),%tmm0
	if m.s.data[0][0][0] != 9 || m.s.data[0][1][7] != 9 {
		t.Error("rows below start_row were changed")
	}
	if m.s.data[0][2][0] != 33 || m.s.data[0][3][7] != 56 {
		t.Errorf("rows 2, 3 = %v %v", m.s.data[0][2][:8], m.s.data[0][3][:8])
	}
	if m.s.startRow != 0 {
		t.Error("start_row not reset")
	}
	cfg[1] = 4 // start_row >= rows
	if err := m.loadCfg(cfg); err != nil {
		t.Fatal(err)
	}
	if err := m.run("c4 e2 7b 4b 04 08"); err == nil || !strings.Contains(err.Error(), "start_row 4 >= tmm0 rows 4") {
		t.Errorf("start_row beyond rows: %v", err)
	}
}

func TestTileUseFaults(t *testing.T) {
	m := newMachine(t)
	m.cpu.gpr[0] = memBase
	for _, code := range []string{"c4 e2 7b 4b 04 20", "c4 e2 7a 4b 04 20", "c4 e2 7b 49 c0", "c4 e2 6b 5e c1"} {
		if err := m.run(code); err == nil || !strings.Contains(err.Error(), "#UD: tiles not configured") {
			t.Errorf("%s before ldtilecfg: %v", code, err)
		}
	}
	if err := m.loadCfg(config([3]int{0, 2, 8}, [3]int{1, 2, 6})); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct{ code, want string }{
		{"c4 e2 7b 4b 14 20", "tmm2 is not configured"},              // tileloadd (%rax,%riz,1),%tmm2
		{"c4 e2 7b 4b 0c 20", "tmm1 colsb 6 is not a multiple of 4"}, // tmm1
		{"c4 62 7b 4b 04 20", "tmm8 does not exist"},                 // VEX.R: tmm8
		{"c4 e2 7b 49 f8", "tmm7 is not configured"},                 // tilezero %tmm7
		{"c4 e2 63 5c ca", "not emulated"},                           // tdpfp16ps
	} {
		if err := m.run(v.code); err == nil || !strings.Contains(err.Error(), v.want) {
			t.Errorf("%s: %v, want %q", v.code, err, v.want)
		}
	}
	m.s.data[0][1][3] = 5
	m.mustRun("c4 e2 7b 49 c0") // tilezero %tmm0
	if m.s.data[0] != ([maxRows][bytesPerRow]byte{}) {
		t.Error("tilezero left data")
	}
}

func TestMatmulShapeChecks(t *testing.T) {
	// tdpbssd %tmm2,%tmm1,%tmm0: C = tmm0 (M x N dwords), A = tmm1 (M x K), B = tmm2 (K x N).
	const tdp = "c4 e2 6b 5e c1"
	for _, v := range []struct {
		name string
		cfg  [64]byte
		want string
	}{
		{"ok", config([3]int{0, 5, 12}, [3]int{1, 5, 28}, [3]int{2, 7, 12}), ""},
		{"C colsb != B colsb", config([3]int{0, 5, 12}, [3]int{1, 5, 28}, [3]int{2, 7, 16}), "dest tmm0 colsb 12 != B tmm2 colsb 16"},
		{"C rows != A rows", config([3]int{0, 4, 12}, [3]int{1, 5, 28}, [3]int{2, 7, 12}), "dest tmm0 rows 4 != A tmm1 rows 5"},
		{"A colsb/4 != B rows", config([3]int{0, 5, 12}, [3]int{1, 5, 28}, [3]int{2, 6, 12}), "A tmm1 colsb/4 7 != B tmm2 rows 6"},
		{"A colsb not dwords", config([3]int{0, 5, 12}, [3]int{1, 5, 27}, [3]int{2, 7, 12}), "tmm1 colsb 27 is not a multiple of 4"},
		{"B unconfigured", config([3]int{0, 5, 12}, [3]int{1, 5, 28}), "tmm2 is not configured"},
	} {
		m := newMachine(t)
		if err := m.loadCfg(v.cfg); err != nil {
			t.Fatal(err)
		}
		err := m.run(tdp)
		if v.want == "" && err != nil || v.want != "" && (err == nil || !strings.Contains(err.Error(), v.want)) {
			t.Errorf("%s: %v, want %q", v.name, err, v.want)
		}
	}
	m := newMachine(t)
	if err := m.loadCfg(config([3]int{0, 4, 16}, [3]int{1, 4, 16}, [3]int{2, 4, 16})); err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"c4 e2 7b 5e c0", "c4 e2 7b 5e c1", "c4 e2 73 5e c1"} { // repeated tiles
		if err := m.run(code); err == nil || !strings.Contains(err.Error(), "distinct") {
			t.Errorf("%s: %v, want distinct-tiles #UD", code, err)
		}
	}
}

// fillTile fills the configured part of tile t with random bytes and the rest with garbage.
func fillTile(s *tileState, r *rand.Rand, t int) {
	for row := range maxRows {
		for c := range bytesPerRow {
			s.data[t][row][c] = byte(r.IntN(256))
		}
	}
}

// checkMatmulResult compares the M x N dword result in tile c with want and checks that the
// rest of the tile is zero.
func checkMatmulResult(t *testing.T, s *tileState, c, M, N int, want func(m, n int) uint32) {
	t.Helper()
	for m := range maxRows {
		for b := range bytesPerRow {
			if m < M && b < 4*N {
				continue
			}
			if s.data[c][m][b] != 0 {
				t.Fatalf("byte %d of row %d outside the %dx%d result is %#x", b, m, M, N, s.data[c][m][b])
			}
		}
	}
	for m := range M {
		for n := range N {
			if got, w := binary.LittleEndian.Uint32(s.data[c][m][4*n:]), want(m, n); got != w {
				t.Fatalf("C[%d][%d] = %#08x, want %#08x", m, n, got, w)
			}
		}
	}
}

func TestDotInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ops := []struct {
		code             string // dest tmm3, A tmm4, B tmm5
		aSigned, bSigned bool
	}{
		{"c4 e2 53 5e dc", true, true},   // tdpbssd %tmm5,%tmm4,%tmm3
		{"c4 e2 52 5e dc", true, false},  // tdpbsud
		{"c4 e2 51 5e dc", false, true},  // tdpbusd
		{"c4 e2 50 5e dc", false, false}, // tdpbuud
	}
	for trial := range 40 {
		op := ops[trial%4]
		M, K, N := 1+r.IntN(16), 1+r.IntN(16), 1+r.IntN(16)
		m := newMachine(t)
		if err := m.loadCfg(config([3]int{3, M, 4 * N}, [3]int{4, M, 4 * K}, [3]int{5, K, 4 * N})); err != nil {
			t.Fatal(err)
		}
		for _, tile := range []int{3, 4, 5} {
			fillTile(&m.s, r, tile)
		}
		if trial%5 == 0 { // accumulators near the int32 limits: the sum must wrap
			for i := range M {
				binary.LittleEndian.PutUint32(m.s.data[3][i][:], math.MaxInt32-3)
			}
		}
		before := m.s
		m.mustRun(op.code)
		val := func(b byte, signed bool) int64 {
			if signed {
				return int64(int8(b))
			}
			return int64(b)
		}
		checkMatmulResult(t, &m.s, 3, M, N, func(i, j int) uint32 {
			acc := int64(int32(binary.LittleEndian.Uint32(before.data[3][i][4*j:])))
			for k := range 4 * K {
				acc += val(before.data[4][i][k], op.aSigned) * val(before.data[5][k/4][4*j+k%4], op.bSigned)
			}
			return uint32(acc) // wraps like int32
		})
	}
}

func TestDotBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	bf16 := func() uint16 {
		if r.IntN(30) == 0 {
			return uint16(r.IntN(0x80)) | uint16(r.IntN(2))<<15 // zero or denormal
		}
		return uint16(r.IntN(2))<<15 | uint16(100+r.IntN(55))<<7 | uint16(r.IntN(128))
	}
	for range 20 {
		M, K, N := 1+r.IntN(16), 1+r.IntN(16), 1+r.IntN(16)
		m := newMachine(t)
		if err := m.loadCfg(config([3]int{1, M, 4 * N}, [3]int{2, M, 4 * K}, [3]int{3, K, 4 * N})); err != nil {
			t.Fatal(err)
		}
		fillTile(&m.s, r, 1)
		for _, tile := range []int{2, 3} {
			for row := range maxRows {
				for c := 0; c < bytesPerRow; c += 2 {
					binary.LittleEndian.PutUint16(m.s.data[tile][row][c:], bf16())
				}
			}
		}
		for row := range M { // finite accumulators
			for n := range N {
				binary.LittleEndian.PutUint32(m.s.data[1][row][4*n:], math.Float32bits(float32(r.NormFloat64())))
			}
		}
		before := m.s
		m.mustRun("c4 e2 62 5c ca") // tdpbf16ps %tmm3,%tmm2,%tmm1
		bf := func(tile, row, idx int) uint32 {
			return uint32(binary.LittleEndian.Uint16(before.data[tile][row][2*idx:])) << 16
		}
		// The SDM's loop order, evaluated with the big.Float reference.
		checkMatmulResult(t, &m.s, 1, M, N, func(i, j int) uint32 {
			var even, odd uint32
			for k := range K {
				even = refFMA32(bf(2, i, 2*k), bf(3, k, 2*j), even)
				odd = refFMA32(bf(2, i, 2*k+1), bf(3, k, 2*j+1), odd)
			}
			one := math.Float32bits(1)
			return refFMA32(binary.LittleEndian.Uint32(before.data[1][i][4*j:]), one, refFMA32(even, one, odd))
		})
	}
}
