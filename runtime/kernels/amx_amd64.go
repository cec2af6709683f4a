//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AMX implementation ("amx") is the AVX-512 one with one more kernel: batched ActQuant
// products of the 32-element block types whose activations are Q8_0 blocks (Q4_0, IQ4_NL,
// Q5_0, Q8_0) run on AMX-INT8 tiles. Everything else, single-token products included, is
// avx512Impl's.
//
// Tiles. For a block of up to 16 weight rows, amxBuildB decodes every row to signed int8
// values (Q4_0 code−8, Q5_0 code−16, IQ4_NL's codebook, Q8_0 as stored) and lays them out as
// TDPBSSD's B operand: block b of the rows is 8 tile rows of 64 bytes, tile row k holding,
// for each weight row n, its elements 32b+4k … 32b+4k+3 (VNNI order). That is the transpose
// of the rows seen as 32-bit words, so the B tiles of all blocks are one contiguous array.
// The A operand is the activations' ggml layout as it is (token t's block b at
// qs[t·cols + 32b]: a tile of nt rows, 32 bytes each, stride cols). One TDPBSSD per block
// gives the exact int32 block sums Σ_k q_w·q_a for nt tokens × nr rows.
//
// Floats. The sums are then scaled with the same float32 operations, in the same order, as
// the AVX-512 GEMV kernels do for one token (gemv_q8_amd64.s): lane j = b mod 16 of a
// (token, row) accumulates fma(float(sum_b), d_w·d_a, acc_j) over the blocks b ≡ j in
// increasing order, and the 16 lanes are added by HSUM_STORE's tree. An AMX product is
// therefore bit-identical to the avx512vnni one, token by token: MatMul keeps giving every
// token the bits MatVec gives it (TestBatchInvariance), and prefill the bits of decode.
//
// Threads and permission. Linux enables AMX tile data per process on request
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), amxPermitted); the kernel then gives
// each thread its tile state on first use. Tile state never outlives one call of amxQ8Tile
// (LDTILECFG at its start, TILERELEASE before it returns), and Go does not preempt a
// goroutine inside an assembly function, so no goroutine needs to be locked to its thread.
// The implementation is listed only when the CPU reports AMX-TILE and AMX-INT8 and the
// request succeeds; elsewhere it is never selected.

// amxMinTokens is the batch from which products use the tiles (one full tile of tokens).
const amxMinTokens = 16

// amxImpl is avx512Impl with the AMX batched kernel.
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

// amxTyped reports whether the AMX kernel handles ActQuant products of t.
func amxTyped(t WType) bool {
	switch t {
	case Q4_0, IQ4_NL, Q5_0, Q8_0:
		return true
	}
	return false
}

// amxScratch holds one worker's buffers.
type amxScratch struct {
	b    []byte    // B tiles: nb × 512 bytes
	dw   []float32 // row scales: nb × 16
	acc  []float32 // 16 tokens × 16 lanes × 16 rows
	cbuf []int32   // one C tile, 16 × 16
	vals []int8    // one decoded row
	cfg  [2][64]byte
}

var amxScratchPool = sync.Pool{New: func() any {
	return &amxScratch{acc: make([]float32, 16*16*16), cbuf: make([]int32, 16*16)}
}}

// amxConfig fills a palette-1 tile configuration for nt tokens and nr rows: tmm0 = C (nt rows
// of 4·nr bytes), tmm1 = A (nt rows of 32 bytes), tmm2 = B (8 rows of 4·nr bytes).
func amxConfig(cfg *[64]byte, nt, nr int) {
	clear(cfg[:])
	cfg[0] = 1 // palette
	binary.LittleEndian.PutUint16(cfg[16:], uint16(4*nr))
	binary.LittleEndian.PutUint16(cfg[18:], 32)
	binary.LittleEndian.PutUint16(cfg[20:], uint16(4*nr))
	cfg[48], cfg[49], cfg[50] = byte(nt), byte(nt), 8
}

func amxMul(m *Matrix, pk *packed, Y []float32, a *Acts, r0, r1 int) bool {
	if a.nTok < amxMinTokens || a.kind != actQ8_0 || !amxTyped(m.Type) {
		return avx512Mul(m, pk, Y, a, r0, r1)
	}
	s := amxScratchPool.Get().(*amxScratch)
	defer amxScratchPool.Put(s)
	amxProduct(m, Y, a, r0, r1, s, amxQ8Tile)
	return true
}

// amxTileFunc is the signature of amxQ8Tile (tests substitute a Go model of it).
type amxTileFunc func(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, dw *float32, da *float32, nb, nt int, y *float32, ldy int, mask uint64)

// amxProduct computes rows [r0,r1) of Y for every token of a, 16 rows at a time.
func amxProduct(m *Matrix, Y []float32, a *Acts, r0, r1 int, s *amxScratch, tile amxTileFunc) {
	cols, rows, nTok := a.cols, m.Rows, a.nTok
	nb := cols / 32
	if cap(s.b) < nb*512 {
		s.b, s.dw, s.vals = make([]byte, nb*512), make([]float32, nb*16), make([]int8, cols)
	}
	s.b, s.dw, s.vals = s.b[:nb*512], s.dw[:nb*16], s.vals[:cols]
	for rb := r0; rb < r1; rb += 16 {
		nr := min(16, r1-rb)
		amxBuildB(m, rb, nr, s)
		amxConfig(&s.cfg[0], 16, nr)
		mask := uint64(1)<<nr - 1
		for t0 := 0; t0 < nTok; t0 += 16 {
			nt := min(16, nTok-t0)
			cfg := &s.cfg[0]
			if nt < 16 {
				cfg = &s.cfg[1]
				amxConfig(cfg, nt, nr)
			}
			clear(s.acc[:nt*256])
			tile(&cfg[0], &s.acc[0], &s.cbuf[0], &a.qs[t0*cols], cols, (*int8)(unsafe.Pointer(&s.b[0])), &s.dw[0], &a.d[t0*nb], nb, nt, &Y[t0*rows+rb], rows, mask)
		}
	}
}

// amxBuildB writes the B tiles and row scales of rows [rb, rb+nr) of m into s (rows past nr
// are left out: the tiles are 4·nr bytes wide and their scales zero).
func amxBuildB(m *Matrix, rb, nr int, s *amxScratch) {
	cols, nb := m.Cols, m.Cols/32
	clear(s.dw)
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&s.b[0])), len(s.b)/4)
	for n := 0; n < nr; n++ {
		row := m.Data[(rb+n)*m.rowBytes : (rb+n+1)*m.rowBytes]
		amxDecodeRow(m.Type, s.vals, s.dw, n, row, nb)
		src := unsafe.Slice((*uint32)(unsafe.Pointer(&s.vals[0])), cols/4)
		for q, w := range src {
			words[16*q+n] = w
		}
	}
}

// amxDecodeRow decodes one ggml row of nb blocks into signed values (vals) and its block
// scales (dw[16b+n]).
func amxDecodeRow(t WType, vals []int8, dw []float32, n int, row []byte, nb int) {
	bs := t.TypeSize()
	for b := 0; b < nb; b++ {
		blk := row[b*bs : (b+1)*bs]
		dw[16*b+n] = f16ToF32(le16(blk))
		v := vals[32*b : 32*b+32]
		switch t {
		case Q8_0:
			for j := range v {
				v[j] = int8(blk[2+j])
			}
		case Q4_0:
			for j := 0; j < 16; j++ {
				c := blk[2+j]
				v[j], v[j+16] = int8(c&15)-8, int8(c>>4)-8
			}
		case IQ4_NL:
			for j := 0; j < 16; j++ {
				c := blk[2+j]
				v[j], v[j+16] = kvaluesIQ4NL[c&15], kvaluesIQ4NL[c>>4]
			}
		case Q5_0:
			qh := binary.LittleEndian.Uint32(blk[2:])
			for j := 0; j < 16; j++ {
				c := blk[6+j]
				v[j] = int8(c&15|uint8(qh>>j&1)<<4) - 16
				v[j+16] = int8(c>>4|uint8(qh>>(j+16)&1)<<4) - 16
			}
		}
	}
}
