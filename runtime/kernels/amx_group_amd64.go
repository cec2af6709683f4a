//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// AMX products of the gqf group matrices (amx_group_amd64.s). Batches of at least
// amxMinTokens tokens take them under the "amx" implementation: their activations are
// prepared token-major (glAMX; a16 split into high and low bytes), and each 16-row block's B
// tiles are built once, in the kernel, for all the 16-token tiles. The integer sums are exact
// and the float operations are those of the AVX-512 kernels, in the same order, so a token gets
// the same bits in any batch and under any implementation (TestGroupBatchInvariance); a
// self-check (amxGroupChecked) holds the tiles to that before their first use.

//go:noescape
func amxGroupA16(p *groupArgs)

//go:noescape
func amxGroupA8(p *groupArgs)

// amxGroupTiles reports whether the tile kernels take group activations of form g: int4
// always (G is 16 … 256: one tile product of G or 64 elements at a time); int8 when the
// activation block (a16) or the row (a8) is a multiple of 64 elements.
func amxGroupTiles(g groupActs) bool {
	return g.bits == 4 || g.unit%64 == 0
}

// groupLayoutAMX is the amx implementation's layout: glAMX for batches the tiles take, else
// avx512vnni's.
func groupLayoutAMX(k actKind, g groupActs, nTok, cols int) groupLayout {
	if nTok >= amxMinTokens && amxGroupTiles(g) && amxGroupChecked() {
		return glAMX
	}
	return glChunk
}

// amxGroupScratch is one worker's B tiles, C store, tile configuration and kernel arguments
// (here rather than on the stack: the kernels are passed as func values, through which the
// arguments would escape to the heap on every product).
type amxGroupScratch struct {
	b    []int8
	cbuf []int32
	cfg  []byte
	args groupArgs
}

var amxGroupPool = sync.Pool{New: func() any {
	s := &amxGroupScratch{}
	c := alignedBytes(4096 + 64)
	s.cbuf = unsafeInt32s(c[:4096])
	s.cfg = c[4096:]
	return s
}}

// amxGroupConfig fills a palette-1 configuration: tmm0, tmm1, tmm5, tmm6 C (16 rows of 64
// bytes), tmm2, tmm3 A (16 rows of k bytes), tmm4 B (k/4 rows of 64 bytes).
func amxGroupConfig(cfg []byte, k int) {
	clear(cfg[:64])
	cfg[0] = 1
	for i, colsb := range []int{64, 64, k, k, 64, 64, 64} {
		binary.LittleEndian.PutUint16(cfg[16+2*i:], uint16(colsb))
	}
	copy(cfg[48:], []byte{16, 16, 16, 16, byte(k / 4), 16, 16})
}

// amxGroupMul computes rows [r0,r1) of a group matrix's product on the tiles, or on the
// AVX-512 kernels when a is not in the tiles' layout.
func amxGroupMul(m *Matrix, Y []float32, a *Acts, r0, r1 int) bool {
	if a.glay != glAMX {
		return groupMulAVX512(m, Y, a, r0, r1)
	}
	s := amxGroupPool.Get().(*amxGroupScratch)
	defer amxGroupPool.Put(s)
	amxGroupProduct(m, Y, a, r0, r1, s, amxGroupA16, amxGroupA8)
	return true
}

// amxGroupProduct runs the tile kernels k16 (a16) or k8 (a8) over rows [r0,r1).
func amxGroupProduct(m *Matrix, Y []float32, a *Acts, r0, r1 int, s *amxGroupScratch, k16, k8 func(*groupArgs)) {
	cols, n := a.cols, a.nTok
	if cap(s.b) < 16*cols {
		s.b = make([]int8, 16*cols)
	}
	nPad := (n + 15) &^ 15
	p := &s.args
	groupArgsFor(p, m, a) // the fields the AVX-512 kernels share (units and chunks: int4 only)
	p.metaStep = 4 * nPad // d of each of the padded tokens
	p.lda, p.unit, p.ntiles = cols, a.grp.unit, nPad/16
	p.b, p.cbuf, p.cfg = &s.b[0], &s.cbuf[0], &s.cfg[0]
	p.kstep = min(64, p.unit)
	p.ntlast = n - 16*(p.ntiles-1)
	k := k8
	if a.kind == actG16 {
		k = k16
		p.act, p.act2 = ptr(a.gh), ptr(a.gl)
	} else {
		p.act = ptr(a.g8)
	}
	p.gd = &a.gd[0]
	amxGroupConfig(s.cfg, p.kstep)
	groupSpans(r0, r1, r0/16, (r1-1)/16, func(b0, b1 int, mask uint64) {
		p.y = &Y[16*b0]
		p.w = &m.Data[b0*p.wstride]
		p.blocks, p.mask = b1-b0, mask
		k(p)
	})
	*p = groupArgs{} // keeps no pointer to the caller's data in the pool
}

// amxGroupChecked runs, once, before the first group product on the tiles, a self-check: a
// product of each kernel variant must equal the AVX-512 one bit for bit, or the tiles are not
// used for group matrices (a warning goes to stderr). Set in init so that the package's
// initialization does not depend on it.
var amxGroupChecked func() bool

func init() {
	amxImpl.groupLayout = groupLayoutAMX
	amxImpl.groupMul = amxGroupMul
	amxGroupChecked = amxCheckOnce("AMX self-check of the gqf kernels", func() error {
		return amxGroupSelfCheck(amxGroupA16, amxGroupA8)
	})
}

// amxGroupSelfCheck multiplies 19 tokens by a 20-row matrix of several formats (pseudo-random
// codes, scales and zero points; int4 groups of 16, 64 and 256, int8 rows of 256) in both modes
// with the tile kernels k16 and k8 and with the AVX-512 kernels, and returns an error at the
// first result whose bits differ.
func amxGroupSelfCheck(k16, k8 func(*groupArgs)) error {
	const rows, nTok = 20, 19
	rng := rand.New(rand.NewPCG(0x9e3779b9, 0x7f4a7c15))
	for _, c := range []struct {
		f    GroupFormat
		cols int
	}{{GroupFormat{4, 16, false}, 64}, {GroupFormat{4, 64, true}, 192}, {GroupFormat{4, 256, false}, 512}, {GroupFormat{8, 0, true}, 256}} {
		codes := make([]byte, rows*c.cols*c.f.Bits/8)
		for i := range codes {
			codes[i] = byte(rng.Uint32())
		}
		ng := rows
		if c.f.Bits == 4 {
			ng = rows * c.cols / c.f.Group
		}
		scales := make([]float32, ng)
		for i := range scales {
			scales[i] = float32(rng.NormFloat64()) / 64
		}
		var zeros []uint8
		if !c.f.Signed {
			zeros = make([]uint8, ng)
			for i := range zeros {
				zeros[i] = uint8(rng.IntN(16))
			}
		}
		m, err := NewGroupMatrix(c.f, rows, c.cols, codes, scales, zeros)
		if err != nil {
			return err
		}
		X := make([]float32, nTok*c.cols)
		for i := range X {
			X[i] = float32(rng.NormFloat64())
		}
		for _, mode := range []ActMode{ActFloat, ActQuant} {
			m.Mode = mode
			var ac, at Acts
			groupPrepareLayout(&ac, m, X, nTok, glChunk, amxImpl)
			groupPrepareLayout(&at, m, X, nTok, glAMX, amxImpl)
			want, got := make([]float32, nTok*rows), make([]float32, nTok*rows)
			groupMulAVX512(m, want, &ac, 0, rows)
			s := amxGroupPool.Get().(*amxGroupScratch)
			amxGroupProduct(m, got, &at, 0, rows, s, k16, k8)
			amxGroupPool.Put(s)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					return fmt.Errorf("%v %v: token %d row %d: tiles %v, AVX-512 %v", c.f, mode, i/rows, i%rows, got[i], want[i])
				}
			}
		}
	}
	return nil
}
