package kernels

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// gqf integer weights ("group matrices").
//
// NewGroupMatrix packs gqf's linear weight encodings (int4 groups, asymmetric or symmetric, and
// int8 per channel) into the layout every implementation reads (Matrix.Data then holds that
// packed form and nothing else). Blocks of 16 rows are interleaved so that one 32-bit lane of a
// vector holds one row: the products need no horizontal sums, and the AMX B tiles are byte
// extractions of the same data.
//
// Layout of one 16-row block (rows past Rows are zero rows; all offsets from the block start,
// which is 64-byte aligned; "lane j" is row 16·block + j):
//
//	int4, U = cols/G units of G elements:
//	  scales  [U][16]float32           unit u, lane j at 64u + 4j
//	  zeros   [U][16]uint8             asymmetric only: at 64U + 16u + j
//	  (zero padding to a multiple of 64 bytes: hdr bytes in all)
//	  codes   [cols/8][16]uint32       chunk c (elements 8c … 8c+7), lane j at hdr + 64c + 4j
//	int8:
//	  scales  [16]float32              lane j at 4j
//	  codes   [cols/4][16]uint32       chunk c (elements 4c … 4c+3), lane j at 64 + 64c + 4j
//
// An int4 dword holds the unsigned codes c of its 8 elements k0 … k7 at bits 0, 8, 16, 24 (k0
// … k3) and 4, 12, 20, 28 (k4 … k7): x & 0x0F0F0F0F is the bytes (k0, k1, k2, k3) and
// (x>>4) & 0x0F0F0F0F the bytes (k4 … k7), for VPDPBUSD and for AMX B tile rows (16 rows × 4
// consecutive elements), while (x>>s) & 0x000F000F for s = 0, 4, 8, 12 is the int16 pairs (k0,
// k2), (k4, k6), (k1, k3), (k5, k7) for VPDPWSSD. Codes are stored unsigned: u for asymmetric
// weights (w = u − z, z ≤ 15 stored per unit and lane), q + 8 for symmetric ones (w = c − 8).
// An int8 dword holds q + 128 for its 4 elements (w = c − 128).
//
// The arithmetic, identical in every implementation (generic Go, AVX-512, AMX), for row r and
// token x (see groupQuantA16 and groupQuantA8 for the activations):
//
//   - a16 (ActFloat, the default): per activation block b of the unit (int4: G; int8 per
//     channel: groupUnit16), d_b = float32(amax_b/32767), a_k = clamp(RoundToEven(x_k/d_b),
//     ±32767); I_b = Σ w_k·a_k in int32 (exact: |I_b| ≤ 256·15·32767 for int4, 512·128·32767
//     for int8); y = 0, then for each block in order y = float32(y + float32(float32(I_b) ·
//     float32(s_r,b · d_b))).
//   - a8 (ActQuant): d = float32(amax/127) over the whole row, a_k = clamp(RoundToEven(x_k/d),
//     ±127); per unit (int4: G; int8: the row) I_u = Σ w_k·a_k; acc = 0, for each unit acc =
//     float32(acc + float32(float32(I_u) · s_r,u)); y = float32(acc · d).
//
// d = 0 makes every a_k 0. A token whose activations hold a NaN or an infinity (amax not
// finite) gets NaN for every output: its d is NaN.

// GroupFormat describes a gqf integer weight encoding.
type GroupFormat struct {
	Bits   int  // 4 or 8
	Group  int  // elements per scale group; 0 means the whole row (int8 per channel)
	Signed bool // two's-complement codes (symmetric); false: unsigned int4 with per-group uint8 zero points
}

// String names the format: "gqf-int4-g128-asym", "gqf-int4-g64-sym", "gqf-int8-channel".
func (f GroupFormat) String() string {
	kind := "asym"
	if f.Signed {
		kind = "sym"
	}
	if f.Group == 0 {
		if f.Bits == 8 && f.Signed {
			return "gqf-int8-channel"
		}
		return fmt.Sprintf("gqf-int%d-channel-%s", f.Bits, kind)
	}
	return fmt.Sprintf("gqf-int%d-g%d-%s", f.Bits, f.Group, kind)
}

// check reports whether the kernels take f (the shape aside).
func (f GroupFormat) check() error {
	switch f.Bits {
	case 4:
		if f.Group == 0 {
			return fmt.Errorf("int4 needs a group size (0 given)")
		}
		if f.Group < 16 || f.Group > 256 || f.Group&(f.Group-1) != 0 {
			return fmt.Errorf("int4 group size %d is not one of 16, 32, 64, 128, 256", f.Group)
		}
	case 8:
		if f.Group != 0 {
			return fmt.Errorf("int8 weights are per channel (Group 0), not in groups of %d", f.Group)
		}
		if !f.Signed {
			return fmt.Errorf("int8 weights must be symmetric (Signed)")
		}
	default:
		return fmt.Errorf("%d-bit codes are not supported (4 or 8)", f.Bits)
	}
	return nil
}

// groupTypeTag marks the WType values of gqf formats: "gq" in the high 16 bits, far outside
// ggml's type ids, so that nothing keyed on a ggml type can take one for a ggml type. The low
// bits hold the format: bits 8-11 Bits, bit 7 Signed, bits 0-3 log2(Group) (0: per channel).
const groupTypeTag WType = 0x67710000

// Type returns the WType of matrices in format f (Matrix.Type of NewGroupMatrix's result).
// Its String is f's. f must be a format NewGroupMatrix takes.
func (f GroupFormat) Type() WType {
	t := groupTypeTag | WType(f.Bits)<<8
	if f.Signed {
		t |= 1 << 7
	}
	if f.Group > 0 {
		t |= WType(bits.TrailingZeros(uint(f.Group)))
	}
	return t
}

// Group returns the gqf format of t, and whether t is one (GroupFormat.Type's values).
func (t WType) Group() (GroupFormat, bool) {
	if t&0xffff0000 != groupTypeTag {
		return GroupFormat{}, false
	}
	f := GroupFormat{Bits: int(t >> 8 & 15), Signed: t>>7&1 == 1}
	if lg := int(t & 15); lg > 0 {
		f.Group = 1 << lg
	}
	if f.check() != nil || f.Type() != t {
		return GroupFormat{}, false
	}
	return f, true
}

// groupInfo is the packed layout of a group matrix.
type groupInfo struct {
	f          GroupFormat
	units      int // scale units per row: int4 cols/G, int8 1
	hdr        int // bytes of a block's scales, zeros and padding (before the codes)
	blockBytes int // bytes of one 16-row block
	blocks     int // 16-row blocks
	unit16     int // activation block of the a16 mode: int4 G, int8 groupUnit16(cols)
}

// int8MaxCols bounds int8 rows: the a8 mode sums a whole row in int32 (|Σ w·a| ≤
// cols·128·127 < 2^31).
const int8MaxCols = 131072

// groupUnit16 returns the a16 activation block of int8 per-channel rows of cols elements: the
// largest divisor of cols that is at most 128 and a multiple of 4 if one of at least 32
// exists, else the largest divisor of cols that is at most 512 and a multiple of 4 (172 →
// 172; 4·131 → 4), or 0 when cols is not a multiple of 4. Every block sum fits in int32:
// 512·128·32767 < 2^31.
func groupUnit16(cols int) int {
	best := 0
	for u := 4; u <= min(cols, 128); u += 4 {
		if cols%u == 0 {
			best = u
		}
	}
	if best >= 32 {
		return best
	}
	for u := 4; u <= min(cols, 512); u += 4 {
		if cols%u == 0 {
			best = u
		}
	}
	return best
}

// NewGroupMatrix packs codes (rows×cols elements: Bits=4 two per byte low nibble first; Bits=8
// one int8 per byte), scales (one float32 per group, row-major: rows × cols/Group, or rows when
// Group is 0) and zeros (one uint8 per group, nil when Signed) into the kernels' layout. It
// copies what it needs and keeps no reference to codes, scales or zeros (the caller releases
// its file mapping afterwards). Bad arguments (lengths, a group that does not divide cols,
// Bits 4 with Group 0, unsupported shapes) are an error, never a panic.
//
// Supported: int4 with G = 16, 32, 64, 128 or 256 dividing cols, symmetric or asymmetric with
// zero points 0…15; int8 symmetric per channel (Group 0) with cols a multiple of 4, at most
// 131072. The result's Type is f.Type(), Data its packed form (Bytes), GroupFormat reports f;
// Mode ActDefault or ActFloat multiplies with 16-bit activations (a16), ActQuant with 8-bit
// ones (a8).
func NewGroupMatrix(f GroupFormat, rows, cols int, codes []byte, scales []float32, zeros []uint8) (*Matrix, error) {
	fail := func(format string, args ...any) (*Matrix, error) {
		return nil, fmt.Errorf("kernels: %v %dx%d: %s", f, rows, cols, fmt.Sprintf(format, args...))
	}
	if err := f.check(); err != nil {
		return fail("%v", err)
	}
	if rows <= 0 || cols <= 0 {
		return fail("shape is not positive")
	}
	g := &groupInfo{f: f, blocks: (rows + 15) / 16}
	var nCodes, nScales int
	switch f.Bits {
	case 4:
		if cols%f.Group != 0 {
			return fail("group size %d does not divide the row length", f.Group)
		}
		g.units, g.unit16 = cols/f.Group, f.Group
		g.hdr = 64 * g.units
		if !f.Signed {
			g.hdr += 16 * g.units
		}
		g.hdr = (g.hdr + 63) &^ 63
		g.blockBytes = g.hdr + 8*cols
		nCodes, nScales = rows*cols/2, rows*g.units
	case 8:
		if cols%4 != 0 {
			return fail("int8 rows must be a multiple of 4 long")
		}
		if cols > int8MaxCols {
			return fail("int8 rows longer than %d elements are not supported", int8MaxCols)
		}
		g.units, g.unit16 = 1, groupUnit16(cols)
		g.hdr = 64
		g.blockBytes = 64 + 16*cols
		nCodes, nScales = rows*cols, rows
	}
	if len(codes) != nCodes {
		return fail("%d code bytes, want %d", len(codes), nCodes)
	}
	if len(scales) != nScales {
		return fail("%d scales, want %d", len(scales), nScales)
	}
	if f.Signed {
		if len(zeros) != 0 {
			return fail("symmetric codes take no zero points (%d given)", len(zeros))
		}
	} else {
		if len(zeros) != nScales {
			return fail("%d zero points, want %d", len(zeros), nScales)
		}
		for i, z := range zeros {
			if z > 15 {
				return fail("zero point %d of group %d is outside the 4-bit codes [0, 15]", z, i)
			}
		}
	}
	m := &Matrix{Type: f.Type(), Rows: rows, Cols: cols, grp: g}
	data, buf := allocWeights(m, g.blocks*g.blockBytes)
	for b := 0; b < g.blocks; b++ {
		groupPackBlock(g, data[b*g.blockBytes:(b+1)*g.blockBytes], b, rows, cols, codes, scales, zeros)
	}
	m.Data, m.buf = data, buf
	return m, nil
}

// groupPackBlock writes 16-row block b (rows 16b … 16b+15 of the caller's arrays; rows past
// rows stay zero) into blk.
func groupPackBlock(g *groupInfo, blk []byte, b, rows, cols int, codes []byte, scales []float32, zeros []uint8) {
	f := g.f
	for j := 0; j < 16 && 16*b+j < rows; j++ {
		r := 16*b + j
		put32 := func(o int, v uint32) { *(*uint32)(unsafe.Pointer(&blk[o])) = v }
		if f.Bits == 8 {
			put32(4*j, math.Float32bits(scales[r]))
			row := codes[r*cols : (r+1)*cols]
			for c := 0; c < cols/4; c++ {
				v := *(*uint32)(unsafe.Pointer(&row[4*c])) ^ 0x80808080
				put32(64+64*c+4*j, v)
			}
			continue
		}
		for u := 0; u < g.units; u++ {
			put32(64*u+4*j, math.Float32bits(scales[r*g.units+u]))
			if !f.Signed {
				blk[64*g.units+16*u+j] = zeros[r*g.units+u]
			}
		}
		row := codes[r*cols/2 : (r+1)*cols/2]
		flip := byte(0)
		if f.Signed {
			flip = 0x88 // q + 8 in both nibbles: two's complement nibble n → n ^ 8
		}
		for c := 0; c < cols/8; c++ {
			// Bytes 4c … 4c+3 of the row hold elements 8c … 8c+7, low nibble first.
			var e [8]byte
			for i := 0; i < 4; i++ {
				x := row[4*c+i] ^ flip
				e[2*i], e[2*i+1] = x&15, x>>4
			}
			var v uint32
			for i := 0; i < 4; i++ {
				v |= uint32(e[i]|e[i+4]<<4) << (8 * i)
			}
			put32(g.hdr+64*c+4*j, v)
		}
	}
}

// GroupFormat returns the gqf format of m, and whether m is a group matrix (made by
// NewGroupMatrix).
func (m *Matrix) GroupFormat() (GroupFormat, bool) {
	if m.grp == nil {
		return GroupFormat{}, false
	}
	return m.grp.f, true
}

// Bytes returns the size of the weight data a product of m streams, which is what one token of
// decode reads: for a group matrix len(Data) (its packed form, on the heap: codes, scales and
// zero points, rows padded to a multiple of 16); for a ggml matrix the repacked copy's size
// once built (Pack) and read by the current implementation, else len(Data).
func (m *Matrix) Bytes() int {
	if m.grp == nil {
		if p := m.pk.Load(); p != nil && m.mode() == ActQuant && current.packs != nil && current.packs(m.Type) {
			return len(p.data)
		}
	}
	return len(m.Data)
}

// groupActs identifies the activation form of a group matrix's products beyond the column
// count: the activation block (unit) and the code width, on which the assembly layouts depend.
type groupActs struct {
	bits, unit int
}

// groupActs returns m's activation form (the zero value for a ggml matrix).
func (m *Matrix) groupActs() groupActs {
	g := m.grp
	if g == nil {
		return groupActs{}
	}
	if m.mode() == ActQuant {
		if g.f.Bits == 8 {
			return groupActs{bits: 8, unit: m.Cols}
		}
		return groupActs{bits: 4, unit: g.f.Group}
	}
	return groupActs{bits: g.f.Bits, unit: g.unit16}
}
