//go:build amd64 && !purego

package kernels

import "unsafe"

// groupArgs is the argument block of the group kernels (gemm_group_amd64.s, amx_group_amd64.s);
// they read its fields at the GA_ offsets of group_amd64.h, which are go_asm.h's.
type groupArgs struct {
	y        *float32       // output of the first block's lane 0 for the tile's first token
	ldy      int            // bytes between consecutive tokens' outputs (rows·4)
	w        *byte          // first block
	wstride  int            // bytes per block
	blocks   int            // blocks to compute
	mask     uint64         // lanes (rows) of each block to store
	act      unsafe.Pointer // the tile's first token's first chunk (glChunk) or code (glAMX)
	actStep  int            // bytes from one chunk of a token to its next (glChunk)
	gd       *float32       // the tile's first token's d (of block 0, a16)
	gs       *int32         // the tile's first token's Σa of block or unit 0 (glChunk)
	metaStep int            // bytes from one block's d and Σa to the next's (glChunk: 4·nTok)
	hdr      int            // offset of the codes in a block
	units    int            // activation blocks (a16) or units (a8) per row
	chunks   int            // chunks per activation block or unit
	sstep    int            // bytes from one unit's scales to the next's (int4 64, int8 0)
	zoff     int            // offset of the zero points in a block (0: zconst for all)
	zconst   int            // the zero point of symmetric int4 (8) and int8 (128)

	// AMX (amx_group_amd64.s).
	b      *int8          // B tiles of the current block (scratch of 16·cols bytes)
	lda    int            // bytes between tokens' activation rows (cols)
	kstep  int            // elements per tile product (64, or G when smaller)
	ntiles int            // 16-token tiles (activations padded to whole tiles)
	cfg    *byte          // tile configuration
	cbuf   *int32         // the C tiles' store: 4 KB
	act2   unsafe.Pointer // a16: the low bytes (act: the high bytes)
	ntlast int            // tokens of the last tile
	unit   int            // elements per activation block (a16) or unit (a8)
}

//go:noescape
func groupA16I4x8(p *groupArgs)

//go:noescape
func groupA16I4x4(p *groupArgs)

//go:noescape
func groupA16I4x1(p *groupArgs)

//go:noescape
func groupA8I4x8(p *groupArgs)

//go:noescape
func groupA8I4x4(p *groupArgs)

//go:noescape
func groupA8I4x1(p *groupArgs)

//go:noescape
func groupA16I8x8(p *groupArgs)

//go:noescape
func groupA16I8x4(p *groupArgs)

//go:noescape
func groupA16I8x1(p *groupArgs)

//go:noescape
func groupA8I8x8(p *groupArgs)

//go:noescape
func groupA8I8x4(p *groupArgs)

//go:noescape
func groupA8I8x1(p *groupArgs)

// groupKernel returns the index, for groupCall, of the AVX-512 kernel of a8 (else a16)
// activations and int8 (else int4) weights for tiles of 8 tokens; the next two are those for
// tiles of 4 and of 1.
func groupKernel(a8, int8 bool) int { return 3 * (2*b2i(a8) + b2i(int8)) }

// groupCall runs AVX-512 kernel k (groupKernel) on p. The kernels are called directly, not
// through func values, so that p does not escape to the heap.
func groupCall(k int, p *groupArgs) {
	switch k {
	case 0:
		groupA16I4x8(p)
	case 1:
		groupA16I4x4(p)
	case 2:
		groupA16I4x1(p)
	case 3:
		groupA16I8x8(p)
	case 4:
		groupA16I8x4(p)
	case 5:
		groupA16I8x1(p)
	case 6:
		groupA8I4x8(p)
	case 7:
		groupA8I4x4(p)
	case 8:
		groupA8I4x1(p)
	case 9:
		groupA8I8x8(p)
	case 10:
		groupA8I8x4(p)
	case 11:
		groupA8I8x1(p)
	default:
		panic("kernels: no group kernel")
	}
}

// groupRowBlocks is how many 16-row blocks a multi-token product passes through each token tile
// before moving on: their weights stay in L1/L2 while the tiles go over them.
const groupRowBlocks = 4

// groupLayoutAVX512 is the avx512vnni implementation's layout: chunk-major for every batch.
func groupLayoutAVX512(k actKind, g groupActs, nTok, cols int) groupLayout { return glChunk }

// groupArgsFor fills the fields of p that depend only on the matrix and the activations.
func groupArgsFor(p *groupArgs, m *Matrix, a *Acts) {
	g := m.grp
	*p = groupArgs{ldy: 4 * m.Rows, wstride: g.blockBytes, hdr: g.hdr, metaStep: 4 * a.nTok}
	elems := 8 // elements per chunk
	if g.f.Bits == 8 {
		elems = 4
		p.zconst = 128
	} else {
		p.sstep = 64
		if g.f.Signed {
			p.zconst = 8
		} else {
			p.zoff = 64 * g.units
		}
	}
	width := 1 // activation bytes per element
	if a.kind == actG16 {
		width = 2
	}
	p.actStep = a.nTok * elems * width
	p.units = a.cols / a.grp.unit
	p.chunks = a.grp.unit / elems
}

// groupMulAVX512 computes rows [r0,r1) of a group matrix's product from chunk-major
// activations: per groupRowBlocks blocks, tiles of 8, then 4, then single tokens.
func groupMulAVX512(m *Matrix, Y []float32, a *Acts, r0, r1 int) bool {
	if a.glay != glChunk {
		return false
	}
	var p groupArgs
	groupArgsFor(&p, m, a)
	k := groupKernel(a.kind == actG8, m.grp.f.Bits == 8)
	elems := a.grp.unit / p.chunks
	n := a.nTok
	b0, b1 := r0/16, (r1-1)/16
	step := groupRowBlocks
	if n == 1 {
		step = b1 - b0 + 1 // decode: one pass over all rows
	}
	for rb := b0; rb <= b1; rb += step {
		re := min(rb+step-1, b1)
		t := 0
		for ; t+8 <= n; t += 8 {
			groupTile(k, &p, m, Y, a, t, elems, rb, re, r0, r1)
		}
		for ; t+4 <= n; t += 4 {
			groupTile(k+1, &p, m, Y, a, t, elems, rb, re, r0, r1)
		}
		for ; t < n; t++ {
			groupTile(k+2, &p, m, Y, a, t, elems, rb, re, r0, r1)
		}
	}
	return true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// groupTile runs kernel k (groupCall) for the tile of tokens from t over blocks [rb, re], storing only the
// rows of [r0,r1).
func groupTile(k int, p *groupArgs, m *Matrix, Y []float32, a *Acts, t, elems, rb, re, r0, r1 int) {
	if a.kind == actG16 {
		p.act = unsafe.Pointer(&a.g16[t*elems])
	} else {
		p.act = unsafe.Pointer(&a.g8[t*elems])
	}
	p.gd, p.gs = &a.gd[t], &a.gs[t]
	groupSpans(r0, r1, rb, re, func(b0, b1 int, mask uint64) {
		p.y = &Y[t*m.Rows+16*b0]
		p.w = &m.Data[b0*p.wstride]
		p.blocks, p.mask = b1-b0, mask
		groupCall(k, p)
	})
}

// groupSpans calls f for the blocks [rb, re] as runs of blocks with one lane mask each (the
// rows of [r0,r1)): a first or last block that the range cuts is a run of its own.
func groupSpans(r0, r1, rb, re int, f func(b0, b1 int, mask uint64)) {
	mask := func(b int) uint64 {
		lo, hi := max(r0-16*b, 0), min(r1-16*b, 16)
		return (uint64(1)<<hi - 1) &^ (uint64(1)<<lo - 1)
	}
	b, end := rb, re+1
	if mk := mask(b); mk != 0xffff {
		f(b, b+1, mk)
		b++
	}
	full := end
	if full > b && mask(full-1) != 0xffff {
		full--
	}
	if full > b {
		f(b, full, 0xffff)
	}
	if full < end {
		f(full, end, mask(full))
	}
}

// ptr returns the address of s's first element.
func ptr[T any](s []T) unsafe.Pointer { return unsafe.Pointer(&s[0]) }

// unsafeInt32s views b (4-byte aligned, a multiple of 4 long) as int32s.
func unsafeInt32s(b []byte) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

//go:noescape
func groupQuant16Asm(x *float32, q *int16, d *float32, s *int32, unit, blocks int, perm *[16]uint16)

//go:noescape
func groupQuant8Asm(x *float32, q *int8, s *int32, unit, units int) float32

//go:noescape
func groupSplitHL(q *int16, hi, lo *byte, n int)

// groupQuant16AVX512 is groupQuant16Go in assembly.
func groupQuant16AVX512(q []int16, d []float32, sums []int32, x []float32, unit int, perm *[16]uint16) {
	if len(d) == 0 {
		return
	}
	_, _ = q[len(d)*unit-1], x[len(d)*unit-1]
	var s *int32
	if sums != nil {
		_ = sums[len(d)-1]
		s = &sums[0]
	}
	groupQuant16Asm(&x[0], &q[0], &d[0], s, unit, len(d), perm)
}

// groupQuant8AVX512 is groupQuant8Go in assembly.
func groupQuant8AVX512(q []int8, sums []int32, x []float32, unit int) float32 {
	_ = q[len(x)-1]
	var s *int32
	if sums != nil {
		_ = sums[len(x)/unit-1]
		s = &sums[0]
	}
	return groupQuant8Asm(&x[0], &q[0], s, unit, len(x)/unit)
}

// groupSplitAVX512 is groupSplitGo in assembly.
func groupSplitAVX512(q []int16, hi, lo []byte) {
	_, _ = hi[len(q)-1], lo[len(q)-1]
	groupSplitHL(&q[0], &hi[0], &lo[0], len(q))
}
