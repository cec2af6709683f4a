//go:build amd64 && !purego

package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// AMX-BF16 products of BF16 weights and float32 activations (ActFloat, the default mode of
// BF16 matrices), for the "amx" implementation (amx_bf16_amd64.s).
//
// Split. TDPBF16PS multiplies bf16 by bf16, so each float32 activation x is split into three
// bf16 parts, x = h + m + l: h = bf16(x), m = bf16(x − h), l = bf16(x − h − m), each rounded
// to nearest even (VCVTNE2PS2BF16). The subtractions are exact, and 3 × 8 significant bits
// hold all 24 of x, so the parts add up to x exactly; the product of a bf16 weight and a bf16
// part is exact in float32. W·x = W·h + W·m + W·l, summed in float32 by the tiles, therefore
// has the accuracy of float32 activations: only the order of the additions differs from the
// widen + FMA kernel (TestAMXBF16Accuracy measures both against float64). Corner cases, as
// the instructions define them (VCVTNE2PS2BF16 and TDPBF16PS treat denormal inputs as zero):
// a denormal x contributes nothing, and for |x| < 2^-110 or so the parts that would be
// denormal (m, l) are zero, an absolute error below 2^-126·|w| per product (flush-to-zero
// consistent); a denormal weight counts as zero. An infinite x gives h = ±inf and m = l = 0
// (so W·x is ±inf or NaN as with FMA), as does a finite x that rounds to bf16 infinity
// (|x| ≥ 2^128·(1 − 2^-9)); a NaN stays NaN. amxBF16Split is the definition in Go.
//
// Tiles. C = W·Xᵀ for a block of up to 32 weight rows × 32 tokens: A = the weights as they are
// stored (two row tiles of 16 rows × 32 bf16, stride the row's bytes: no repacking, no memory
// besides the matrix), B = the activations' parts in TDPBF16PS's pair layout (per 32-column
// chunk and part, two 1 KB tiles of 16 pairs × 16 tokens), packed once per batch in Prepare
// (Acts.xp, amxBF16Packed; PrepareOn spreads 16-token ranges over the workers; amxBF16Pack:
// the split, then a 16×16 dword transpose), which every row range of every BF16 matrix
// sharing the activations reads; activations Prepare did not pack (prepared by a matrix of
// other weights) are packed by each worker (see pack), C = 4 tiles of 16 rows × 16 tokens
// in float32, stored to a 32×32 scratch and transposed into Y (tokens × rows) by
// amxBF16StoreT. Each A tile loaded serves the three parts and both token tiles (6 products),
// each B tile both row tiles. amxBF16Tile is the general kernel, C (float32) += A (bf16, any
// row stride) · B (bf16 pairs), for other users (a Gram matrix XᵀX, say).
//
// Tails. Rows: the last tiles of the matrix are configured with fewer rows (reading past the
// product's range r1 is harmless, past the matrix is not). Tokens: the last tile's missing
// tokens are packed as zeros, and their columns of C are not stored. Columns past the last
// multiple of 32: the weights' and activations' tails are copied zero-padded into one more
// chunk (s.at, the packed activations), multiplied by a second call that adds to the stored C.
// Tokens are taken in groups whose packed parts stay in L2 (amxBF16GroupBytes).
//
// When. From amxBF16MinTokens tokens (measured crossover against widen + FMA; a decode step,
// one token, stays on the GEMV), where the CPU has AMX-BF16 and AVX512_BF16 and the tiles are
// permitted (amxUsable), after a self-check at first use (amxBF16Checked): a small product
// must give exactly the bits of amxBF16Model, the tiles' operations carried out in Go.

// amxBF16Parts is the number of bf16 parts x is split into (see above; 2 would be h + m:
// TestAMXBF16Accuracy shows it less accurate than widen + FMA).
const amxBF16Parts = 3

// amxBF16MinTokens is the batch from which BF16 × float32 products use the tiles
// (BenchmarkAMXBF16, one thread: at 4 tokens widen + FMA's 4×4 GEMM is 5–12 % faster, at 5
// the tiles 1.3–1.5×, at 8 1.6–1.8×, at 64 and more 3.5–4.4×).
var amxBF16MinTokens = 5

// amxBF16On reports whether the CPU has the instructions of the BF16 tile kernels (the tile
// permission is amxImpl's: it is listed only where amxUsable).
var amxBF16On = cpu.X86.HasAMXBF16 && cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ

// amxBF16TileProducts counts the products run on the BF16 tiles (tests check which path a
// product took).
var amxBF16TileProducts atomic.Int64

//go:noescape
func amxBF16Tile(cfg *byte, c *float32, ldc int, a *uint16, lda int, b *byte, bchunk, bplane, kc, planes, flags int)

//go:noescape
func amxBF16Pack(dst *byte, x *float32, ldx, nt, kc, planes, dchunk, dplane int, tmp *byte)

//go:noescape
func amxBF16StoreT(y *float32, ldy int, c *float32, nr, nt int)

// Flags of amxBF16Tile.
const (
	amxBF16TwoRows = 1 // two row tiles (else one)
	amxBF16TwoCols = 2 // two column tiles
	amxBF16LoadC   = 4 // C += (else C =)
)

// amxBF16Scratch holds one worker's buffers: the packed activations of the last product
// (b, grown as needed; xc the float32 bytes they were packed from, nTok tokens of cols
// columns in planes parts) and, 64-byte aligned in fixed, the C block, the tails and the tile
// configuration.
type amxBF16Scratch struct {
	b                  []byte
	xc                 []byte
	nTok, cols, planes int

	fixed []byte
	c     []float32 // 32 × 32 (rows of 128 bytes)
	at    []byte    // the weights' column tail: 32 rows of 64 bytes
	xt    []float32 // the activations' column tail: 16 tokens of 32
	tmp   []byte    // amxBF16Pack's 3 KB
	cfg   []byte    // 64 bytes
	cfgM  [2]int    // the rows cfg was made for (0: none yet)
}

var amxBF16Pool = sync.Pool{New: func() any {
	s := &amxBF16Scratch{fixed: alignedBytes(4096 + 2048 + 2048 + 3072 + 64)}
	f := s.fixed
	s.c = unsafe.Slice((*float32)(unsafe.Pointer(&f[0])), 1024)
	s.at = f[4096:6144]
	s.xt = unsafe.Slice((*float32)(unsafe.Pointer(&f[6144])), 512)
	s.tmp = f[8192:11264]
	s.cfg = f[11264:11328]
	return s
}}

// config returns the tile configuration for row tiles of m0 and m1 rows (m1 = 0: one).
func (s *amxBF16Scratch) config(m0, m1 int) *byte {
	if s.cfgM != [2]int{m0, m1} {
		amxBF16Config(s.cfg, m0, m1)
		s.cfgM = [2]int{m0, m1}
	}
	return &s.cfg[0]
}

// amxBF16Config fills a palette-1 configuration of amxBF16Tile's tiles: tmm0, tmm1 (C) and
// tmm4 (A) m0 rows, tmm2, tmm3 and tmm5 m1 rows (unconfigured if 0), of 64 bytes; tmm6 and
// tmm7 (B) 16 rows of 64 bytes.
func amxBF16Config(cfg []byte, m0, m1 int) {
	clear(cfg[:64])
	cfg[0] = 1
	rows := [8]int{m0, m0, m1, m1, m0, m1, 16, 16}
	for i, r := range rows {
		if r > 0 {
			binary.LittleEndian.PutUint16(cfg[16+2*i:], 64)
			cfg[48+i] = byte(r)
		}
	}
}

// amxBF16Mul computes rows [r0,r1) of a BF16 × float32 product on the tiles and reports
// true, or reports false (to leave it to the AVX-512 kernels) when the batch is below
// amxBF16MinTokens or the tiles are not available. The activations' parts are a.xp where
// Prepare packed them (a matrix of BF16 weights prepared a, under amx: amxBF16Packed), else
// the scratch's (s.pack: activations prepared by another matrix of float activations).
func amxBF16Mul(m *Matrix, Y []float32, a *Acts, r0, r1 int) bool {
	if !amxBF16On || a.nTok < amxBF16MinTokens || !amxBF16Checked() {
		return false
	}
	amxBF16TileProducts.Add(1)
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	if len(a.xp) > 0 {
		amxBF16Groups(m, Y, a.xp, a.nTok, r0, r1, s, amxBF16Parts)
	} else {
		amxBF16Product(m, Y, a.f, a.nTok, r0, r1, s, amxBF16Parts)
	}
	amxBF16Pool.Put(s)
	return true
}

// amxBF16Packed is amxImpl.floatPacked: the bytes of the packed parts of nTok tokens (the B
// tiles of amxBF16Tile, as pack lays them out) when m's products run on the tiles, else 0.
func amxBF16Packed(m *Matrix, nTok int) int {
	if m.Type != BF16 || m.grp != nil || m.actKind() != actF32 || !amxBF16On || nTok < amxBF16MinTokens || !amxBF16Checked() {
		return 0
	}
	return (nTok + 31) / 32 * ((m.Cols + 31) / 32) * amxBF16Parts * 2048
}

// amxBF16PackActs is amxImpl.floatPack: it packs tokens [t0,t1) of a.f into a.xp (t0 a
// multiple of 16; the bytes pack writes).
func amxBF16PackActs(a *Acts, t0, t1 int) {
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	amxBF16PackTokens(a.xp, a.f, t0, t1, a.cols, amxBF16Parts, s)
	amxBF16Pool.Put(s)
}

// amxBF16GroupBytes is the size of the packed activations of one token group: a product
// takes the tokens in groups of 32·k whose packed parts take at most this (at least one
// 32-token block), runs every row block over each group in turn, and so keeps the group in L2
// while the weights stream past (measured: 1 MiB; 512 tokens of 1024 columns in one group, 3
// MB, ran at half the speed).
const amxBF16GroupBytes = 1 << 20

// amxBF16Product computes rows [r0,r1) of Y = W·Xᵀ on the tiles, W the BF16 matrix m and X
// nTok rows of m.Cols float32 split into planes parts. The parts are packed into s (s.pack),
// unless s holds them already.
func amxBF16Product(m *Matrix, Y, X []float32, nTok, r0, r1 int, s *amxBF16Scratch, planes int) {
	s.pack(X, nTok, m.Cols, planes)
	amxBF16Groups(m, Y, s.b, nTok, r0, r1, s, planes)
}

// amxBF16Groups computes rows [r0,r1) of Y = W·Xᵀ from the packed parts B of X (pack's
// layout), token group after token group.
func amxBF16Groups(m *Matrix, Y []float32, B []byte, nTok, r0, r1 int, s *amxBF16Scratch, planes int) {
	kc, tail := m.Cols/32, m.Cols%32
	bblock := ((m.Cols + 31) / 32) * planes * 2048 // the B tiles of 32 tokens
	group := 32 * max(1, amxBF16GroupBytes/bblock)
	for g0 := 0; g0 < nTok; g0 += group {
		g1 := min(nTok, g0+group)
		amxBF16Rows(m, Y[g0*m.Rows:], B[g0/32*bblock:], g1-g0, r0, r1, s, planes, kc, tail, bblock)
	}
}

// pack splits nTok tokens X of cols columns into planes parts and lays them out as the B
// tiles of amxBF16Tile in s.b (amxBF16PackTokens). When s.b already holds the parts of the
// same values (the same shape and the same bytes as s.xc, the copy of X kept for that
// comparison), it does nothing: the workers of one product (the runtime hands each a
// succession of row ranges over the same activations) pack once each instead of once per
// range. The comparison reads X and the copy: a sixth of the cost of packing
// (BenchmarkAMXBF16Pack). This is the fallback for activations that Prepare did not pack
// (Acts.xp: prepared by a matrix other than BF16, or by prepareActs).
func (s *amxBF16Scratch) pack(X []float32, nTok, cols, planes int) {
	xb := unsafe.Slice((*byte)(unsafe.Pointer(&X[0])), 4*nTok*cols)
	if s.nTok == nTok && s.cols == cols && s.planes == planes && bytes.Equal(xb, s.xc) {
		return
	}
	bblock := ((cols + 31) / 32) * planes * 2048
	if n := (nTok + 31) / 32 * bblock; len(s.b) < n {
		s.b = alignedBytes(n)
	}
	s.xc = append(s.xc[:0], xb...)
	s.nTok, s.cols, s.planes = nTok, cols, planes
	amxBF16PackTokens(s.b, X, 0, nTok, cols, planes, s)
}

// amxBF16PackTokens splits tokens [t0,t1) of X (all the batch's tokens, cols columns each; t0
// a multiple of 16) into planes parts and lays them out as the B tiles of amxBF16Tile in dst:
// 32 tokens after 32, per 32-column chunk (the last zero-padded), per part, the two 16-token
// tiles. It uses s's tails and amxBF16Pack's buffer.
func amxBF16PackTokens(dst []byte, X []float32, t0, t1, cols, planes int, s *amxBF16Scratch) {
	kc, tail := cols/32, cols%32
	bchunk := planes * 2048
	bblock := ((cols + 31) / 32) * bchunk
	for ; t0 < t1; t0 += 16 {
		nt := min(16, t1-t0)
		d := dst[t0/32*bblock+t0/16%2*1024:]
		if kc > 0 {
			amxBF16Pack(&d[0], &X[t0*cols], 4*cols, nt, kc, planes, bchunk, 2048, &s.tmp[0])
		}
		if tail > 0 {
			for i := 0; i < nt; i++ {
				xt := s.xt[32*i : 32*i+32]
				clear(xt[copy(xt, X[(t0+i)*cols+32*kc:(t0+i+1)*cols]):])
			}
			amxBF16Pack(&d[kc*bchunk], &s.xt[0], 128, nt, 1, planes, bchunk, 2048, &s.tmp[0])
		}
	}
}

// forget makes s pack on its next product (benchmarks of the packing, tests of it).
func (s *amxBF16Scratch) forget() { s.nTok = 0 }

// amxBF16Rows computes rows [r0,r1) of Y for the nTok tokens packed in B.
func amxBF16Rows(m *Matrix, Y []float32, B []byte, nTok, r0, r1 int, s *amxBF16Scratch, planes, kc, tail, bblock int) {
	rows, rb := m.Rows, m.rowBytes
	bchunk := planes * 2048
	ntb := (nTok + 31) / 32
	for r := r0; r < r1; r += 32 {
		nr := min(32, r1-r)
		m0, m1, rowFlag := min(16, rows-r), 0, 0
		if nr > 16 {
			m1, rowFlag = min(16, rows-r-16), amxBF16TwoRows
		}
		cfg := s.config(m0, m1)
		if tail > 0 {
			for i := 0; i < m0+m1; i++ {
				at := s.at[64*i : 64*i+64]
				o := (r+i)*rb + 64*kc
				clear(at[copy(at, m.Data[o:o+2*tail]):])
			}
		}
		w := (*uint16)(unsafe.Pointer(&m.Data[r*rb]))
		for tb := 0; tb < ntb; tb++ {
			nt := min(32, nTok-32*tb)
			flags := rowFlag
			if nt > 16 {
				flags |= amxBF16TwoCols
			}
			b := B[tb*bblock:]
			if kc > 0 {
				amxBF16Tile(cfg, &s.c[0], 128, w, rb, &b[0], bchunk, 2048, kc, planes, flags)
				flags |= amxBF16LoadC
			}
			if tail > 0 {
				amxBF16Tile(cfg, &s.c[0], 128, (*uint16)(unsafe.Pointer(&s.at[0])), 64, &b[kc*bchunk], bchunk, 2048, 1, planes, flags)
			}
			amxBF16StoreT(&Y[32*tb*rows+r], 4*rows, &s.c[0], nr, nt)
		}
	}
}

// amxBF16Round converts f to bf16 as VCVTNE2PS2BF16 does: round to nearest even, a denormal
// to a zero of its sign, a NaN made quiet.
func amxBF16Round(f float32) uint16 {
	u := math.Float32bits(f)
	switch {
	case u&0x7f800000 == 0:
		return uint16(u>>16) & 0x8000
	case u&0x7fffffff > 0x7f800000:
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// amxBF16Split returns the bf16 parts h, m, l of x (see the top of this file): the values
// amxBF16Pack writes.
func amxBF16Split(x float32) [3]uint16 {
	h := amxBF16Round(x)
	hf := bf16ToF32(h)
	if math.IsInf(float64(hf), 0) {
		return [3]uint16{h, 0, 0}
	}
	r := x - hf
	m := amxBF16Round(r)
	return [3]uint16{h, m, amxBF16Round(r - bf16ToF32(m))}
}

// amxBF16Model computes rows [r0,r1) of the product of m (BF16) and nTok rows of X with the
// operations of the tiles, in Go: per token and row, C = +0; for each 32-column chunk (the
// column tail zero-padded) and each of the planes parts, in that order, TDPBF16PS's two
// float32 partial sums (even and odd elements) start at +0 and add the 16 products each in
// order, and C += (even + odd). A bf16 product is exact in float32, so each step is the
// instruction's fused multiply-add; denormal weights count as zero. Where no intermediate
// result is denormal (TDPBF16PS flushes them, Go does not), the bits are the hardware's.
func amxBF16Model(m *Matrix, Y, X []float32, nTok, r0, r1, planes int) {
	cols := m.Cols
	k := (cols + 31) &^ 31
	w, x := make([]float32, k), make([][3]float32, k)
	for t := 0; t < nTok; t++ {
		clear(x)
		for i, v := range X[t*cols : (t+1)*cols] {
			p := amxBF16Split(v)
			x[i] = [3]float32{bf16ToF32(p[0]), bf16ToF32(p[1]), bf16ToF32(p[2])}
		}
		for r := r0; r < r1; r++ {
			for i := range cols {
				v := le16(m.Data[r*m.rowBytes+2*i:])
				if v&0x7f80 == 0 {
					v &= 0x8000
				}
				w[i] = bf16ToF32(v)
			}
			var c float32
			for i := 0; i < k; i += 32 {
				for j := 0; j < planes; j++ {
					var even, odd float32
					for p := i; p < i+32; p += 2 {
						even += w[p] * x[p][j]
						odd += w[p+1] * x[p+1][j]
					}
					c += even + odd
				}
			}
			Y[t*m.Rows+r] = c
		}
	}
}

// amxBF16Checked runs, once, before the first BF16 product on the tiles, a self-check: a
// product with every kind of tail (rows, tokens, columns) must give exactly amxBF16Model's
// bits, or the BF16 products stay on the AVX-512 kernels (a warning goes to stderr). Set in
// init so that the package's initialization does not depend on it.
var amxBF16Checked func() bool

// amxBF16Impl is the implementation whose BF16 × float32 products take the tiles: amxImpl, set
// in init (avx512Mul, which asks, is part of amxImpl's initializer).
var amxBF16Impl *implTable

func init() {
	amxBF16Impl = amxImpl
	amxImpl.floatPacked, amxImpl.floatPack, amxImpl.floatPackUnit = amxBF16Packed, amxBF16PackActs, 16
	amxBF16Checked = amxCheckOnce("AMX-BF16 self-check", func() error { return amxBF16SelfCheck(amxBF16Parts) })
}

// amxBF16SelfCheck multiplies 35 tokens by a 37 × 100 BF16 matrix (pseudo-random weights and
// activations of modest range) on the tiles, with the activations split into planes parts,
// and in amxBF16Model with amxBF16Parts, and returns an error at the first result whose bits
// differ.
func amxBF16SelfCheck(planes int) error {
	const rows, cols, nTok = 37, 100, 35
	rng := rand.New(rand.NewPCG(0x9e3779b9, 0xbf16))
	data := make([]byte, 2*rows*cols)
	for i := 0; i < len(data); i += 2 {
		binary.LittleEndian.PutUint16(data[i:], f32ToBF16(float32(rng.NormFloat64())))
	}
	m, err := NewMatrix(BF16, rows, cols, data)
	if err != nil {
		return err
	}
	X := make([]float32, nTok*cols)
	for i := range X {
		X[i] = float32(rng.NormFloat64())
	}
	want, got := make([]float32, nTok*rows), make([]float32, nTok*rows)
	amxBF16Model(m, want, X, nTok, 0, rows, amxBF16Parts)
	s := amxBF16Pool.Get().(*amxBF16Scratch)
	s.forget()
	amxBF16Product(m, got, X, nTok, 0, rows, s, planes)
	amxBF16Pool.Put(s)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Errorf("token %d row %d: tiles %v, model %v", i/rows, i%rows, got[i], want[i])
		}
	}
	return nil
}
