//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AMX implementation ("amx") is the AVX-512 one with more kernels: batched ActQuant
// products of the types whose activations are Q8_0 blocks (Q4_0, IQ4_NL, Q5_0, Q8_0) or Q8_K
// super-blocks (Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS) can run on AMX-INT8 tiles; by default
// only those batches for which the tiles measured faster do (amxTileTokens: the block types
// from 512 tokens, the K-quants never), and the gqf group matrices' batches of 16 or more
// tokens (amx_group_amd64.go). Everything else, single-token products and Q4_1/Q5_1 included,
// is avx512Impl's.
//
// Tiles. For a block of up to 16 weight rows, amxBuildB lays the rows' signed int8 values
// (Q4_0 code−8, Q5_0 code−16, IQ4_NL's codebook, Q8_0 as stored) out as TDPBSSD's B operand
// (from the packed copy, in assembly: amx_buildb_amd64.s): block b of the rows is 8 tile rows of 64 bytes, tile row k holding,
// for each weight row n, its elements 32b+4k … 32b+4k+3 (VNNI order). That is the transpose
// of the rows seen as 32-bit words, so the B tiles of all blocks are one contiguous array.
// The A operand is the activations' ggml layout as it is (token t's block b at
// qs[t·cols + 32b]: a tile of nt rows, 32 bytes each, stride cols). One TDPBSSD per block
// gives the exact int32 block sums Σ_k q_w·q_a for nt tokens × nr rows.
//
// Floats. The sums are then scaled with the same float32 operations, in the same order, as
// the AVX-512 GEMV kernels do for one token (gemv_q8_amd64.s): lane j = b mod 16 of a
// (token, row) accumulates fma(float(sum_b), d_w·d_a, acc_j) over the blocks b ≡ j in
// increasing order, and the 16 lanes are added by HSUM_STORE's tree. The K-quants' lanes are
// the 16-element quarters of the sub-blocks, as in gemv_k_amd64.s: one TDPBSSD of depth 16
// per lane and super-block, then that kernel's per-lane scale and min operations (the B
// values are the codes, Q6_K's minus 32). An AMX product is therefore bit-identical to the
// avx512vnni one, token by token: MatMul keeps giving every token the bits MatVec gives it
// (TestBatchInvariance), and prefill the bits of decode. Before the first tile product, a
// self-check (amxChecked) holds the tiles to exactly that.
//
// Threads and permission. Linux enables AMX tile data per process on request
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), amxPermitted); the kernel then gives
// each thread its tile state on first use. Tile state never outlives one call of a tile
// kernel (LDTILECFG at its start, TILERELEASE before it returns), and Go does not preempt a
// goroutine inside an assembly function, so no goroutine needs to be locked to its thread.
// The implementation is listed only when the CPU reports AMX-TILE and AMX-INT8 and the
// request succeeds; elsewhere it is never selected.

// amxMinTokens is the smallest batch the tiles take (one full tile of tokens); the gqf group
// matrices use them from there (amx_group_amd64.go: 1.1 to 2.8 times avx512vnni's speed at
// 16 tokens, more beyond).
const amxMinTokens = 16

// amxTileTokens is, per ggml type, the batch from which ActQuant products use the tiles by
// default; a type not listed stays on the avx512vnni kernels at every batch size. Measured on
// a Sapphire Rapids-class AMX CPU (3072×1024, BenchmarkAMXSpeedup: time of avx512vnni over
// that of the tiles, interleaved in one run): the 32-element block types reach 1.1–1.4 from
// 512 tokens (0.4–0.6 at 16, 0.8–1.2 at 128–256), the K-quants stay between 0.8 and 1.05 up
// to 1024 tokens: their tiles, of 16-element lanes, use a quarter of each tile product. The
// "amx" implementation must never be slower than "avx512vnni" for a product it handles.
// Tests lower every entry to amxMinTokens (amxForceTiles) to exercise the tiles. Every type
// listed must be one the AMX kernels handle (amxTyped; amxMul relies on it).
var amxTileTokens = map[WType]int{Q4_0: 512, IQ4_NL: 512, Q5_0: 512, Q8_0: 512}

// amxForceTiles makes every AMX-handled type use the tiles from amxMinTokens (tests).
func amxForceTiles() (restore func()) {
	prev := amxTileTokens
	amxTileTokens = map[WType]int{}
	for _, k := range amxKernels {
		amxTileTokens[k.t] = amxMinTokens
	}
	return func() { amxTileTokens = prev }
}

// amxTileProducts counts the products run on the tiles (tests check which path a product
// took).
var amxTileProducts atomic.Int64

// amxImpl is avx512Impl with the AMX batched kernels.
var amxImpl = func() *implTable {
	im := *avx512Impl
	im.name = "amx"
	im.mul = amxMul
	return &im
}()

// amxCapable reports whether the CPU has the AMX features the kernel uses (besides the
// AVX-512 ones of avx512Impl, which the post-processing also uses).
func amxCapable() bool {
	x := cpu.X86
	return x.HasAMXTile && x.HasAMXInt8 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI
}

// amxUsable reports, once, whether the AMX implementation may run here.
var amxUsable = sync.OnceValue(func() bool { return amxCapable() && amxPermitted() })

// amxKernels are the types whose ActQuant products the AMX kernels handle (in the order of
// the self-check, amxSelfCheck), each with its B-tile builder of amx_buildb_amd64.s (which
// takes the codes from the packed copy that the avx512vnni kernels read, pack.go) and its
// tile kernel of amx_amd64.s.
var amxKernels = []struct {
	t     WType
	build amxBuildFunc
	tile  amxTileFunc
}{
	{Q4_0, amxBuildBQ4_0, amxQ8Tile}, {IQ4_NL, amxBuildBIQ4_NL, amxQ8Tile},
	{Q5_0, amxBuildBQ5_0, amxQ8Tile}, {Q8_0, amxBuildBQ8_0, amxQ8Tile},
	{Q4_K, amxBuildBQ4_K, amxQ4KTile}, {Q5_K, amxBuildBQ5_K, amxQ4KTile},
	{Q6_K, amxBuildBQ6_K, amxQ6KTile}, {Q2_K, amxBuildBQ2_K, amxQ4KTile},
	{Q3_K, amxBuildBQ3_K, amxQ6KTile}, {IQ4_XS, amxBuildBIQ4_XS, amxQ6KTile},
}

// amxBuildFunc is the signature of the B-tile builders (amx_buildb_amd64.s).
type amxBuildFunc func(dst, src *byte, stride, groups int)

// amxKernelIndex returns t's index in amxKernels, or -1 for a type the AMX kernels do not
// handle.
func amxKernelIndex(t WType) int {
	for i, k := range amxKernels {
		if k.t == t {
			return i
		}
	}
	return -1
}

// amxTyped reports whether the AMX kernels handle ActQuant products of t.
func amxTyped(t WType) bool { return amxKernelIndex(t) >= 0 }

// amxScratch holds one worker's buffers.
type amxScratch struct {
	b    []byte    // B tiles: 512 bytes per 32-element block (256 per 16-element lane)
	kw   []uint32  // per block: 16 row scales; per K-quant lane: 32 words (amx_amd64.s)
	tk   []float32 // every token's factors, padded to whole tiles: d_a per block, or (float(bsum), d_a) per K-quant lane
	acc  []float32 // 16 tokens × 16 lanes × 16 rows
	cbuf []int32   // two C tiles, 16 × 16 each
	vals []uint8   // 16 rows of decoded values (without a packed copy)
	rows []byte    // a last block's packed rows, padded to 16 with zero rows
	cfg  [2][64]byte
}

var amxScratchPool = sync.Pool{New: func() any {
	return &amxScratch{acc: make([]float32, 16*16*16), cbuf: make([]int32, 2*16*16)}
}}

// amxConfig fills a palette-1 tile configuration for nt tokens, nr rows and k-element steps
// (32 for the block types, 16 for K-quant lanes), two sets of three tiles: tmm0 and tmm3 = C
// (nt rows of 4·nr bytes), tmm1 and tmm4 = A (nt rows of k bytes), tmm2 and tmm5 = B (k/4
// rows of 4·nr bytes).
func amxConfig(cfg *[64]byte, nt, nr, k int) {
	clear(cfg[:])
	cfg[0] = 1 // palette
	for set := 0; set < 6; set += 3 {
		binary.LittleEndian.PutUint16(cfg[16+2*set:], uint16(4*nr))
		binary.LittleEndian.PutUint16(cfg[18+2*set:], uint16(k))
		binary.LittleEndian.PutUint16(cfg[20+2*set:], uint16(4*nr))
		cfg[48+set], cfg[49+set], cfg[50+set] = byte(nt), byte(nt), byte(k/4)
	}
}

func amxMul(m *Matrix, pk *packed, Y []float32, a *Acts, r0, r1 int) bool {
	min, ok := amxTileTokens[m.Type]
	if !ok || a.nTok < max(min, amxMinTokens) || (a.kind != actQ8_0 && a.kind != actQ8_K) || !amxChecked() {
		return avx512Mul(m, pk, Y, a, r0, r1)
	}
	amxTileProducts.Add(1)
	s := amxScratchPool.Get().(*amxScratch)
	defer amxScratchPool.Put(s)
	amxProduct(m, pk, Y, a, r0, r1, s, amxTileFor(m.Type))
	return true
}

// amxTileFor returns the tile kernel of an AMX-handled type (it panics for another).
func amxTileFor(t WType) amxTileFunc { return amxKernels[amxKernelIndex(t)].tile }

// amxChecked runs, once, before the first product on the tiles, a self-check: a small product
// of every AMX-handled type on the tiles must equal the AVX-512 one bit for bit, or the
// tiles are not used (a warning goes to stderr). It guards against a CPU whose tiles do not
// behave as the kernels were tested to expect (under internal/amxemu here). Set in init, not
// in its declaration, so that the package's initialization does not depend on it.
var amxChecked func() bool

func init() {
	amxChecked = amxCheckOnce("AMX self-check", func() error { return amxSelfCheck(amxTileFor) })
}

// amxCheckOnce returns a function that runs check on its first call and reports, then and
// after, whether it passed; when it fails, a warning that the check called name failed and the
// AVX-512 kernels are used instead goes to stderr.
func amxCheckOnce(name string, check func() error) func() bool {
	return sync.OnceValue(func() bool {
		if err := check(); err != nil {
			fmt.Fprintf(os.Stderr, "gquant: kernels: %s failed, using the AVX-512 kernels instead: %v\n", name, err)
			return false
		}
		return true
	})
}

// amxSelfCheck multiplies 19 tokens by a 20-row matrix of each AMX-handled type (fixed
// pseudo-random codes and scales) with tiles(t)'s kernel and with the AVX-512 kernels, and
// returns an error at the first result whose bits differ. The activations are prepared by
// the current implementation, which must be amx or avx512vnni.
func amxSelfCheck(tiles func(WType) amxTileFunc) error {
	const rows, nTok = 20, 19
	x := uint64(0x9e3779b97f4a7c15)
	next := func() uint64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x }
	for _, k := range amxKernels {
		t := k.t
		cols := 96
		if t.BlockSize() == 256 {
			cols = 512
		}
		rb, _ := t.RowBytes(cols)
		data := make([]byte, rows*rb)
		for i := range data {
			data[i] = byte(next())
		}
		// Finite, modest scales: 2^-6 to 2^-3 (and mins) in fp16.
		bs := t.TypeSize()
		for b := 0; b < len(data)/bs; b++ {
			blk := data[b*bs : (b+1)*bs]
			scale := func(o int) { binary.LittleEndian.PutUint16(blk[o:], 0x2400+uint16(next()%0x0c00)) }
			switch t {
			case Q4_K, Q5_K:
				scale(0)
				scale(2)
			case Q6_K:
				scale(208)
			case Q2_K:
				scale(80)
				scale(82)
			case Q3_K:
				scale(108)
			default:
				scale(0)
			}
		}
		m, err := NewMatrix(t, rows, cols, data)
		if err != nil {
			return err
		}
		X := make([]float32, nTok*cols)
		for i := range X {
			X[i] = float32(int64(next()%2001)-1000) / 250
		}
		m.Mode = ActQuant
		var a Acts
		prepareActs(&a, m.actKind(), X, nTok, cols)
		want := make([]float32, nTok*rows)
		pk := packMatrix(m)
		avx512Mul(m, pk, want, &a, 0, rows)
		got := make([]float32, nTok*rows)
		s := amxScratchPool.Get().(*amxScratch)
		amxProduct(m, pk, got, &a, 0, rows, s, tiles(t))
		amxScratchPool.Put(s)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				return fmt.Errorf("%v: token %d row %d: tiles %v, AVX-512 %v", t, i/rows, i%rows, got[i], want[i])
			}
		}
	}
	return nil
}

// amxTileFunc is the signature of the tile kernels (amx_amd64.s): kw and tk are the
// per-row and per-token factors of the weight type (amxQ8Tile: the block scales d_w and the
// activation scales a.d).
type amxTileFunc func(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsteps, nt int, y *float32, ldy int, mask uint64)

// amxProduct computes rows [r0,r1) of Y for every token of a, 16 rows at a time.
func amxProduct(m *Matrix, pk *packed, Y []float32, a *Acts, r0, r1 int, s *amxScratch, tile amxTileFunc) {
	cols, rows, nTok := a.cols, m.Rows, a.nTok
	kq := m.Type.BlockSize() == 256
	k, words, steps := 32, 16, cols/32 // block types: one step per block, 16 scale words
	if kq {
		k, words, steps = 16, 32, cols/256 // K-quants: 16 lanes per super-block, 32 words each
	}
	lanes := cols / k
	bb := 16 * cols // B tiles; the builders write whole groups of 16 blocks
	if !kq {
		bb = 8192 * ((cols + 511) / 512)
	}
	if cap(s.b) < bb || cap(s.kw) < lanes*words || cap(s.vals) < 16*cols {
		s.b, s.kw, s.vals = make([]byte, bb), make([]uint32, lanes*words), make([]uint8, 16*cols)
	}
	s.b, s.kw, s.vals = s.b[:bb], s.kw[:lanes*words], s.vals[:16*cols]
	// The activation factors of every token, once per call, padded with zeros to whole tiles
	// of 16 tokens (C rows past a tail tile's tokens are stale and must count for nothing):
	// d_a per block, or (float(bsum), d_a) per K-quant lane.
	nPad := (nTok + 15) &^ 15
	stride := steps
	if kq {
		stride = 2 * lanes
	}
	tkAll := a.d
	if kq || nPad != nTok {
		if cap(s.tk) < nPad*stride {
			s.tk = make([]float32, nPad*stride)
		}
		tkAll = s.tk[:nPad*stride]
		if kq {
			amxTokenFactors(a, tkAll)
		} else {
			clear(tkAll[copy(tkAll, a.d[:nTok*steps]):])
		}
	}
	kw := (*float32)(unsafe.Pointer(&s.kw[0]))
	build := amxBuilder(m.Type)
	for rb := r0; rb < r1; rb += 16 {
		nr := min(16, r1-rb)
		amxBuildBWith(build, m, pk, rb, nr, s)
		amxConfig(&s.cfg[0], 16, nr, k)
		mask := uint64(1)<<nr - 1
		for t0 := 0; t0 < nTok; t0 += 16 {
			nt := min(16, nTok-t0)
			cfg := &s.cfg[0]
			if nt < 16 {
				cfg = &s.cfg[1]
				amxConfig(cfg, nt, nr, k)
			}
			tile(&cfg[0], &s.acc[0], &s.cbuf[0], &a.qs[t0*cols], cols, (*int8)(unsafe.Pointer(&s.b[0])), kw, &tkAll[t0*stride], steps, nt, &Y[t0*rows+rb], rows, mask)
		}
	}
}

// amxTokenFactors writes, for every token of Q8_K activations a, the pair (float(bsum), d_a)
// of each 16-element lane into tk (token t's lane L at tk[2·(t·lanes+L)]); the pairs of the
// tokens past a.nTok (padding to a whole tile) are zeros.
func amxTokenFactors(a *Acts, tk []float32) {
	lanes := a.cols / 16
	clear(tk[2*a.nTok*lanes:])
	for t := 0; t < a.nTok; t++ {
		bs := a.bsums[t*lanes : (t+1)*lanes]
		d := a.d[t*(lanes/16):]
		out := tk[2*t*lanes : 2*(t+1)*lanes]
		for l, v := range bs {
			out[2*l], out[2*l+1] = float32(v), d[l/16]
		}
	}
}

// amxBuilder returns the B-tile builder of t (amxKernels), or nil.
func amxBuilder(t WType) amxBuildFunc {
	if i := amxKernelIndex(t); i >= 0 {
		return amxKernels[i].build
	}
	return nil
}

// amxBuildB writes the B tiles and row factors of rows [rb, rb+nr) of m into s: the factors
// from the ggml rows (amxDecodeRow), the B tiles (word q of row n at word 16q+n) from the
// packed copy pk by the type's builder, which decodes and transposes 16 rows at a time (a
// block cut by the matrix's end is copied to s.rows first, with zero rows after it). Without a
// packed copy (pk nil) every row is decoded into s.vals and amxTranspose16 makes the tiles.
// Rows past nr are left out: the tiles are 4·nr bytes wide, and their factors are zero.
func amxBuildB(m *Matrix, pk *packed, rb, nr int, s *amxScratch) {
	amxBuildBWith(amxBuilder(m.Type), m, pk, rb, nr, s)
}

// amxBuildBWith is amxBuildB with m.Type's builder (amxBuilder) looked up by the caller.
func amxBuildBWith(build amxBuildFunc, m *Matrix, pk *packed, rb, nr int, s *amxScratch) {
	cols := m.Cols
	clear(s.kw)
	if pk != nil && build != nil {
		for n := 0; n < nr; n++ {
			amxDecodeRow(m.Type, nil, s.kw, n, m.Data[(rb+n)*m.rowBytes:(rb+n+1)*m.rowBytes], cols)
		}
		src := pk.data[rb*pk.rowBytes:]
		if nr < 16 {
			s.rows = growU8(s.rows, 16*pk.rowBytes)
			clear(s.rows[copy(s.rows, src[:nr*pk.rowBytes]):])
			src = s.rows
		}
		build(&s.b[0], &src[0], pk.rowBytes, pk.groups)
		return
	}
	for n := 0; n < nr; n++ {
		row := m.Data[(rb+n)*m.rowBytes : (rb+n+1)*m.rowBytes]
		amxDecodeRow(m.Type, s.vals[n*cols:(n+1)*cols], s.kw, n, row, cols)
	}
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&s.b[0])), len(s.b)/4)
	chunks := cols / 64
	if chunks > 0 {
		amxTranspose16(&words[0], &s.vals[0], cols, chunks)
	}
	for q := 16 * chunks; q < cols/4; q++ { // a last half chunk (cols ≡ 32 mod 64)
		for n := 0; n < nr; n++ {
			words[16*q+n] = binary.LittleEndian.Uint32(s.vals[n*cols+4*q:])
		}
	}
}

// amxDecodeRow decodes one ggml row into signed int8 values (vals, as bytes) and writes row
// n's factors into kw: per 32-element block its scale d_w (kw[16b+n]); per K-quant lane L
// (kw[32L+n], kw[32L+16+n]) Q4_K, Q5_K float(sc)·d and float(m)·dmin, Q6_K the int32 scale
// and d, computed as the GEMV kernels compute them. With vals nil it writes only the factors
// (amxBuildB then takes the values from the packed copy).
func amxDecodeRow(t WType, vals []uint8, kw []uint32, n int, row []byte, cols int) {
	f := math.Float32bits
	switch t {
	case Q2_K, Q3_K, IQ4_XS:
		// Signed values (Q2_K codes 0..3; Q3_K code−4; IQ4_XS codebook values) and the lane
		// factors of the GEMV kernels: Q2_K sc·d and m·dmin (as amxQ4KTile reads them), Q3_K
		// and IQ4_XS the int scale minus 32 and d (as amxQ6KTile reads them).
		if vals != nil {
			codes(t, vals, row, cols)
		}
		bs := t.TypeSize()
		for g := 0; g < cols/256; g++ {
			blk := row[g*bs : (g+1)*bs]
			w := kw[512*g:]
			var v []uint8
			if vals != nil {
				v = vals[256*g : 256*g+256]
			}
			switch t {
			case Q2_K:
				d, dmin := f16ToF32(le16(blk[80:])), f16ToF32(le16(blk[82:]))
				for l := 0; l < 16; l++ {
					sc := blk[l]
					w[32*l+n], w[32*l+16+n] = f(float32(float32(sc&15)*d)), f(float32(float32(sc>>4)*dmin))
				}
			case Q3_K:
				d := f16ToF32(le16(blk[108:]))
				for l := 0; l < 16; l++ {
					w[32*l+n], w[32*l+16+n] = uint32(int32(q3KScale(blk[96:108], l)-32)), f(d)
				}
				for i := range v {
					v[i] -= 4
				}
			case IQ4_XS:
				d := f16ToF32(le16(blk))
				for l := 0; l < 16; l++ {
					w[32*l+n], w[32*l+16+n] = uint32(int32(iq4XSScale(blk, l/2)-32)), f(d)
				}
				for i, c := range v {
					v[i] = uint8(kvaluesIQ4NL[c])
				}
			}
		}
		return
	case Q4_K, Q5_K, Q6_K:
		if vals != nil {
			amxCodesK(t, vals, row, cols)
		}
		bs := t.TypeSize()
		for g := 0; g < cols/256; g++ {
			blk := row[g*bs : (g+1)*bs]
			w := kw[512*g:]
			if t == Q6_K {
				d := f16ToF32(le16(blk[208:]))
				for l := 0; l < 16; l++ {
					w[32*l+n], w[32*l+16+n] = uint32(int32(int8(blk[192+l]))), f(d)
				}
				continue
			}
			d, dmin := f16ToF32(le16(blk)), f16ToF32(le16(blk[2:]))
			for j := 0; j < 8; j++ {
				sc, mn := scaleMinK4(j, blk[4:16])
				ds, dm := float32(float32(sc)*d), float32(float32(mn)*dmin)
				w[64*j+n], w[64*j+16+n] = f(ds), f(dm)
				w[64*j+32+n], w[64*j+48+n] = f(ds), f(dm)
			}
		}
		return
	}
	bs := t.TypeSize()
	if vals != nil && (t == IQ4_NL || t == Q5_0) {
		codes(t, vals, row, cols) // unsigned codes, mapped to values below
	}
	for b := 0; b < cols/32; b++ {
		blk := row[b*bs : (b+1)*bs]
		kw[16*b+n] = f(f16ToF32(le16(blk)))
		if vals == nil {
			continue
		}
		v := vals[32*b : 32*b+32]
		switch t {
		case Q8_0:
			copy(v, blk[2:34])
		case Q4_0:
			// Eight codes at a time: c−8 per byte, as ((c|0x80) − 8) ^ 0x80 (no borrow
			// crosses a byte).
			const eight = 0x0808080808080808
			for h := 0; h < 2; h++ {
				x := binary.LittleEndian.Uint64(blk[2+8*h:])
				binary.LittleEndian.PutUint64(v[8*h:], ((x&swarLo4|swarHigh)-eight)^swarHigh)
				binary.LittleEndian.PutUint64(v[16+8*h:], ((x>>4&swarLo4|swarHigh)-eight)^swarHigh)
			}
		case IQ4_NL:
			for i, c := range v {
				v[i] = uint8(kvaluesIQ4NL[c])
			}
		case Q5_0:
			for i := range v {
				v[i] -= 16
			}
		}
	}
}

// SWAR masks: eight bytes at a time.
const (
	swarLo4  = 0x0f0f0f0f0f0f0f0f
	swarLo2  = 0x0303030303030303
	swarHigh = 0x8080808080808080
)

// amxCodesK writes the values of one K-quant row: Q4_K and Q5_K their codes (codes), Q6_K
// its codes minus 32 as int8 (eight at a time; c−32 = ((c|0x80) − 32) ^ 0x80 per byte, no
// borrow crossing a byte).
func amxCodesK(t WType, vals []uint8, row []byte, cols int) {
	le := binary.LittleEndian
	switch t {
	case Q4_K:
		for g := 0; g < cols/256; g++ {
			qs, v := row[144*g+16:144*g+144], vals[256*g:256*g+256]
			for j := 0; j < 4; j++ {
				for w := 0; w < 4; w++ {
					x := le.Uint64(qs[32*j+8*w:])
					le.PutUint64(v[64*j+8*w:], x&swarLo4)
					le.PutUint64(v[64*j+32+8*w:], x>>4&swarLo4)
				}
			}
		}
	case Q6_K:
		const off = 0x2020202020202020
		for g := 0; g < cols/256; g++ {
			blk, v := row[210*g:210*g+210], vals[256*g:256*g+256]
			for n := 0; n < 2; n++ {
				ql, qh, o := blk[64*n:], blk[128+32*n:], v[128*n:]
				for l := 0; l < 32; l += 8 {
					x0, x1, h := le.Uint64(ql[l:]), le.Uint64(ql[l+32:]), le.Uint64(qh[l:])
					le.PutUint64(o[l:], ((x0&swarLo4|(h&swarLo2)<<4|swarHigh)-off)^swarHigh)
					le.PutUint64(o[l+32:], ((x1&swarLo4|(h>>2&swarLo2)<<4|swarHigh)-off)^swarHigh)
					le.PutUint64(o[l+64:], ((x0>>4&swarLo4|(h>>4&swarLo2)<<4|swarHigh)-off)^swarHigh)
					le.PutUint64(o[l+96:], ((x1>>4&swarLo4|(h>>6&swarLo2)<<4|swarHigh)-off)^swarHigh)
				}
			}
		}
	default:
		codes(t, vals, row, cols)
	}
}
