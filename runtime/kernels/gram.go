package kernels

import (
	"fmt"
	"math"
)

// AddGram: the Gram matrix XᵀX of a layer's inputs, the Hessian of GPTQ, as a GEMM.
//
// What is multiplied: x rounded to bf16 (gramBF16: nearest even, as VDPBF16PS's operands and
// llama.cpp's bf16 activations are; |x| < 2⁻⁵⁰ to 0). Products of bf16 values are exact in
// float32, and with no input below 2⁻⁵⁰ every product and partial sum is 0 or at least 2⁻¹¹⁴
// in magnitude (a multiple of it): no subnormal ever appears, so VDPBF16PS (which flushes
// them) and an FMA (which does not) give the same bits. GPTQ's own implementations take XᵀX
// of the model's bf16 activations too (llm-compressor, AutoGPTQ); docs/quality.md measures
// GPTQ with this Hessian against one of the float32 activations (no difference beyond noise).
//
// Order of the operations (what makes the bits): the triangle is cut into tiles of R rows × C
// columns of h (R = 12, C = 32 for every implementation: AVX-512-BF16, AVX-512, AVX2, generic),
// aligned on those multiples; tile (i, j) is computed when j+C > i (some of its elements are on
// or above the diagonal). The tokens are cut into blocks of gramBlock; a tile's sums over one
// block are computed in float32, one fused multiply-add per token in token order (element
// (i, j): acc = fma(x[t,i], x[t,j], acc) from acc = 0, one rounding each), then converted to
// float64 and added to h, block after block. Each element thus gets the same operations
// whatever the split among workers (the split is by rows of tiles) and whichever
// implementation runs: the AVX-512-BF16 kernel (VDPBF16PS over pairs of tokens, packed so that
// its two roundings, the pair's high half first, follow token order: gramPairsOK checks the
// CPU at start), the AVX-512 kernel (12 × 32 in ZMM registers), the AVX2 + FMA3 one (each tile
// as four 6 × 16 sub-tiles in YMM registers: an FMA has the same result at any vector width)
// and gramTileGo, which computes each float32 FMA exactly in float64; and x[t,i]·x[t,j] =
// x[t,j]·x[t,i] makes the elements computed below the diagonal equal to their mirror images.
// (The tiles being the same, the implementations write the same elements below the diagonal
// too: h has the same bits.)
//
// Cache blocking: per token block, each worker takes the columns in panels of gramPanel: it
// packs the panel's columns it needs (block × gramPanel values, 512 KiB as float32, half as
// bf16 pairs, which stay in L2 while its rows of tiles pass over them) and the broadcast side
// of its rows of tiles that start in the panel (R columns of x over the block's tokens, kept in
// s.rows for the later panels), then runs its tiles in the panel. The float32 kernels read x
// rounded by the driver beforehand (s.xr); the pair kernel's packing rounds.
const (
	gramBlock = 256 // tokens summed in float32 before the float64 addition
	gramPanel = 512 // columns of x per cache panel (a multiple of every implementation's C)

	gramPackTokens = 16 // rows of x packed together (read along the rows, not down the columns)
)

// parallelGramWork is the multiply-adds below which AddGram stays on the calling goroutine.
var parallelGramWork = 1 << 22

// gramTileFunc is a tile kernel: h[r·ldh + j] += float64(Σ_{t<k} a[R·t + r]·b[t·ldb + j]) for
// r < rows and j < cols, the sum in float32 by one FMA per token in order (see above). a is the
// packed broadcast side (R per token, zero past rows), b the packed columns of x. For a pair
// implementation, t counts packed rows, each a pair of tokens (a dword per column: the first
// token's bf16 in the high half, the second's in the low half). k ≥ 1, 1 ≤ rows ≤ R,
// 1 ≤ cols ≤ C.
type gramTileFunc func(h []float64, ldh int, a, b []float32, ldb, k, rows, cols int)

// gramPackFunc copies k rows of up to 32 floats from src (row stride lds) to dst (row stride
// ldd): dst[t·ldd + j] = src[t·lds + j] for the columns j of lmask, 0 for the other columns of
// smask (a superset of lmask); only the columns of smask are written. k ≥ 1. A pair
// implementation's packing writes (k+1)/2 rows of dwords instead, row p the pair of tokens
// 2p and 2p+1 (0 past k) rounded by gramBF16.
type gramPackFunc func(dst []float32, ldd int, src []float32, lds, k, lmask, smask int)

// gramImpl is an implementation of AddGram: its tile geometry (R = rows, C = cols, both ≤ 32,
// C dividing gramPanel), its tile kernel and the packing that feeds it. Another kernel (say
// AMX-BF16 tiles, for "amx") is another gramImpl returned by gramFor; the driver (AddGram,
// work) is shared.
type gramImpl struct {
	name       string // for the tests and benchmarks
	rows, cols int
	pairs      bool // packs pairs of tokens as bf16 (and rounds them); else reads s.xr
	tile       gramTileFunc
	pack       gramPackFunc
}

// slots returns the packed rows of k tokens.
func (g gramImpl) slots(k int) int {
	if g.pairs {
		return (k + 1) / 2
	}
	return k
}

// gramGo is the generic implementation, the operations of the AVX-512 one.
var gramGo = gramImpl{"go", 12, 32, false, gramTileGo, gramPackGo}

// gramBF16 returns the value AddGram multiplies for x: 0 where |x| < 2⁻⁵⁰, else roundBF16(x)
// (llama.cpp's ggml_compute_fp32_to_bf16: nearest even; a NaN quieted, truncated).
func gramBF16(x float32) float32 {
	if math.Float32bits(x)&0x7fffffff < gramFlush {
		return 0
	}
	return roundBF16(x)
}

// gramFlush is the bits of 2⁻⁵⁰, below which gramBF16 gives 0.
const gramFlush = (127 - 50) << 23

// gramRoundGo sets dst[i] = gramBF16(src[i]).
func gramRoundGo(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = gramBF16(v)
	}
}

// gramPackGo is the generic gramPackFunc.
func gramPackGo(dst []float32, ldd int, src []float32, lds, k, lmask, smask int) {
	for t := 0; t < k; t++ {
		d, s := dst[t*ldd:], src[t*lds:]
		for j := 0; smask>>j != 0; j++ {
			switch {
			case lmask>>j&1 != 0:
				d[j] = s[j]
			case smask>>j&1 != 0:
				d[j] = 0
			}
		}
	}
}

// GramScratch is AddGram's reusable working memory: the packed copies of x and the state of
// the job handed to the pool. The zero value is ready to use; AddGram grows it as needed
// (with m = min(n, 256) tokens: m·c floats shared by the workers, and m·min(c, 512) floats per
// worker, 4 MiB in all for c = 3072 on two workers, half that with the pair kernel; and for the
// float32 kernels a token block of x rounded, m·c floats) and a call that finds it large enough
// does not allocate. The caller owns it: one GramScratch serves one AddGram call at a time (calls
// that may run concurrently need one each), and it may be dropped between calls.
type GramScratch struct {
	xr     []float32   // x rounded by gramBF16 (the float32 kernels)
	rows   []float32   // the broadcast side of every row of tiles (each worker packs its rows)
	panels [][]float32 // per worker: the packed columns of the current panel

	// The job of the current call, read by the workers.
	h     []float64
	x     []float32
	n, c  int
	parts int
	impl  gramImpl
	run   func(w, lo, hi int) // s.work, made once
	round func(w, lo, hi int) // s.roundPart, made once
}

// NewGram returns a zero c × c float64 matrix for AddGram whose pages AddGram's tiles add to
// have been written once; the pages below the tiles are left untouched (not resident). A
// tile's first access to a page of fresh memory is the read of its read-modify-write, which
// maps the shared zero page; the write then faults again, copies and flushes the TLB of every
// CPU of the process (an interrupt each). Written first, a page costs one fault: on the
// Qwen3-0.6B shape this took calibrate --hessian's system time from 9.9 s to 1.8 s. pool (nil:
// the calling goroutine only) shares the rows among its workers: the faults of different pages
// proceed in parallel.
func NewGram(c int, pool *Pool) []float64 {
	h := make([]float64, c*c)
	R, C := gramGo.rows, gramGo.cols // every implementation's tiles
	write := func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			// Row i's tiles start at column multiples of C above i0 − C (i0: i's tile row).
			first, end := i*c+max(0, i-i%R-C), (i+1)*c
			for p := first; p < end; p += 512 { // one element per 4 KiB page
				h[p] = 0
			}
			h[end-1] = 0
		}
	}
	if pool == nil || c*c < parallelGramWork {
		write(0, 0, c)
	} else {
		pool.Run(c, 64, write)
	}
	return h
}

// AddGram adds the upper triangle (j ≥ i) of XᵀX over the n rows of x (n × c, row-major
// float32) rounded to bf16 to h (c × c, row-major float64): h[i·c + j] += Σ_t r(x[t·c + i])·
// r(x[t·c + j]) with r = gramBF16 (nearest even; |x| < 2⁻⁵⁰ to 0).
//
// Below the diagonal, an element is either left untouched or given exactly the additions its
// mirror image above the diagonal gets (the same bits): those of row i in the columns from
// i − 39 or so (i rounded down to a multiple of 12, then of 32) to i − 1. So h stays symmetric
// where it is written; mirroring the upper triangle into the lower one is the caller's job.
//
// Sums are in float32 over blocks of 256 tokens (by fused multiply-adds, in token order) and
// in float64 across blocks and calls (gram.go has the exact order). The result has the same
// bits for every pool size, and the assembly (AVX-512-BF16, AVX-512F, or AVX2 + FMA3) and the
// generic Go code give the same bits (NaN payloads aside). The AVX-512-BF16 kernel serves the assembly
// implementations (Impl "amx", "avx512vnni") where the CPU has AVX512_BF16 (and its VDPBF16PS
// passes gramPairsOK), the AVX-512 kernel where it does not; the AVX2 one the "generic"
// implementation (the only one of CPUs without AVX-512) where the CPU has AVX2 and FMA3,
// unless GQUANT_NOASM=1 (or -tags purego). Per thread (BenchmarkAddGram) the generic code,
// a scalar float64 loop, runs at about 3 GFLOP/s, the AVX2 kernel near the 2 × 8-lane FMA peak
// (about 100 GFLOP/s at 3.8 GHz), the AVX-512 one about 1.5× faster where the CPU has two
// 512-bit FMA units, and the AVX-512-BF16 one 2× the AVX-512 one (185–195 GFLOP/s on a Zen 5
// core).
//
// pool (nil: the calling goroutine only) spreads the rows of h among its workers, balanced by
// the area of the triangle; it must not be running another job. s is the caller's reusable
// scratch (nil: a temporary one, allocated by this call).
func AddGram(h []float64, x []float32, n, c int, pool *Pool, s *GramScratch) {
	if n < 0 || c < 0 || len(h) < c*c || len(x) < n*c {
		panic(fmt.Sprintf("kernels: AddGram: h of %d and x of %d elements for n = %d, c = %d", len(h), len(x), n, c))
	}
	if n == 0 || c == 0 {
		return
	}
	addGram(h, x, n, c, pool, s, gramFor(current))
}

// addGram is AddGram (arguments checked, n, c ≥ 1) with Gram implementation g.
func addGram(h []float64, x []float32, n, c int, pool *Pool, s *GramScratch, g gramImpl) {
	if s == nil {
		s = new(GramScratch)
	}
	if !g.pairs && n > gramBlock {
		// The float32 kernels read x rounded (s.xr): one token block at a time, so that s.xr
		// holds one block. Blocks are summed apart anyway: the same bits as one call.
		for t0 := 0; t0 < n; t0 += gramBlock {
			k := min(gramBlock, n-t0)
			addGram(h, x[t0*c:(t0+k)*c], k, c, pool, s, g)
		}
		return
	}
	workers := 1
	if pool != nil && c*c*n >= parallelGramWork {
		workers = min(pool.Workers(), (c+g.rows-1)/g.rows)
	}
	ms := g.slots(min(n, gramBlock))
	if need := (c + g.rows - 1) / g.rows * g.rows * ms; len(s.rows) < need {
		s.rows = make([]float32, need)
	}
	for w := range workers {
		if w == len(s.panels) {
			s.panels = append(s.panels, nil)
		}
		if need := ms * min(gramPanel, (c+g.cols-1)/g.cols*g.cols); len(s.panels[w]) < need {
			s.panels[w] = make([]float32, need)
		}
	}
	s.x, s.n, s.c = x[:n*c], n, c
	if !g.pairs { // the float32 kernels read x rounded
		s.xr = growF32(s.xr, n*c)
		if workers == 1 {
			s.roundPart(0, 0, n)
		} else {
			if s.round == nil {
				s.round = s.roundPart
			}
			pool.Run(n, 1, s.round)
		}
		s.x = s.xr[:n*c]
	}
	s.h, s.parts, s.impl = h[:c*c], workers, g
	if workers == 1 {
		s.work(0, 0, 1)
	} else {
		if s.run == nil {
			s.run = s.work
		}
		pool.Run(workers, 1, s.run)
	}
	s.h, s.x, s.impl = nil, nil, gramImpl{}
}

// roundPart rounds rows [lo, hi) of x into s.xr.
func (s *GramScratch) roundPart(_, lo, hi int) {
	c := s.c
	gramRoundGo(s.xr[lo*c:hi*c], s.x[lo*c:hi*c])
}

// gramSplit returns the first row of part p of parts (p = parts: c) for tiles of R rows × C
// columns: a multiple of R, chosen so that the parts have about the same tile area.
func gramSplit(c, R, C, p, parts int) int {
	if p <= 0 {
		return 0
	}
	if p >= parts {
		return c
	}
	total := 0
	for i := 0; i < c; i += R {
		total += c - i/C*C
	}
	goal := total * p / parts // parts ≤ MaxWorkers, total < c²: no overflow
	acc := 0
	for i := 0; i < c; i += R {
		acc += c - i/C*C
		if acc >= goal {
			return min(i+R, c)
		}
	}
	return c
}

// work is part w of the job (lo, hi unused: one part per worker).
func (s *GramScratch) work(w, _, _ int) {
	h, x, n, c, g := s.h, s.x, s.n, s.c, s.impl
	R, C := g.rows, g.cols
	i0, i1 := gramSplit(c, R, C, w, s.parts), gramSplit(c, R, C, w+1, s.parts)
	if i0 >= i1 {
		return
	}
	// The part's rows of tiles, packed: m × R values each at (i−i0)·m in its share of s.rows,
	// with m the first block's packed rows (tokens, or pairs of them), so that the shares
	// never overlap. k is a block's tokens, kk its packed rows.
	m := g.slots(min(n, gramBlock))
	a, panel := s.rows[i0*m:(i1+R-1)/R*R*m], s.panels[w]
	for t0 := 0; t0 < n; t0 += gramBlock {
		k := min(gramBlock, n-t0)
		kk := g.slots(k)
		xb := x[t0*c:]
		for p0 := 0; p0 < c; p0 += gramPanel {
			p1 := min(p0+gramPanel, c)
			jlo := max(p0, i0/C*C) // the first column of the panel that the part's tiles use
			if jlo >= p1 {
				continue
			}
			// The panel's columns from jlo, tile by tile: kk × C values each; and the rows of
			// tiles that start in the panel (first used here), while those rows of x are in
			// cache. (gramPackTokens is even: a pair never straddles two calls.)
			ilo := i0 + max(0, p0-i0+R-1)/R*R // the first row of tiles in [p0, p1)
			for tc := 0; tc < k; tc += gramPackTokens {
				kc, sc := min(gramPackTokens, k-tc), g.slots(tc)
				for j := jlo; j < p1; j += C {
					g.pack(panel[(j-jlo)*kk+sc*C:], C, xb[tc*c+j:], c, kc, 1<<min(C, c-j)-1, 1<<C-1)
				}
				for i := ilo; i < min(i1, p1); i += R {
					g.pack(a[(i-i0)*m+sc*R:], R, xb[tc*c+i:], c, kc, 1<<min(R, c-i)-1, 1<<R-1)
				}
			}
			for i := i0; i < min(i1, p1); i += R {
				rows, ai := min(R, c-i), a[(i-i0)*m:]
				for j := max(jlo, i/C*C); j < p1; j += C {
					g.tile(h[i*c+j:], c, ai, panel[(j-jlo)*kk:], C, kk, rows, min(C, c-j))
				}
			}
		}
	}
}

// gramTileGo is the generic tile kernel (R = 12, C = 32): the operations of the assembly
// (gramTile12x32, gramTile6x16, gramTile12x32BF16) for operands rounded by gramBF16. Their
// products are exact in float64 and hold 16 significant bits: a float32 value (or beyond the
// float32 range, where the FMA overflows too). A float32 FMA with an exact product is a float32
// addition, and a float32 sum computed in float64 and then rounded to float32 is correctly
// rounded (float64 has more than 2·24 + 2 bits: the double rounding is innocuous, Figueroa
// 1995). So each token's step is float32(a·b + acc) in float64.
func gramTileGo(h []float64, ldh int, a, b []float32, ldb, k, rows, cols int) {
	const R, C = 12, 32
	var acc [R][C]float32
	var bv [C]float64
	a = a[:k*R]
	for t := 0; t < k; t++ {
		bt := bv[:cols]
		for j, v := range b[t*ldb : t*ldb+cols] {
			bt[j] = float64(v)
		}
		for r, v := range a[t*R : t*R+rows] {
			gramRowGo(acc[r][:len(bt)], bt, float64(v))
		}
	}
	for r := 0; r < rows; r++ {
		hr := h[r*ldh : r*ldh+cols]
		for j, v := range acc[r][:len(hr)] {
			hr[j] += float64(v)
		}
	}
}

// gramRowGo sets acc[j] = float32(av·b[j] + acc[j]) (the sum in float64).
// (Not inlined: inside gramTileGo its loop variables would live on the stack.)
//
//go:noinline
func gramRowGo(acc []float32, b []float64, av float64) {
	b = b[:len(acc)]
	for j := range acc {
		acc[j] = float32(av*b[j] + float64(acc[j]))
	}
}
