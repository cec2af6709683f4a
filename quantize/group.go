package quantize

// Integer group codecs for gquant's own format (not GGUF block types): int4 in groups of G
// consecutive columns of a row, symmetric or asymmetric, and int8 per output channel (or per
// group), as compressed-tensors' W4A16 / W4A16_ASYM / W8A16 / W8A8 weight presets.
//
// Layout of a GroupTensor (rows × cols, row-major, like the HF weight [out, in]):
//   - codes: 4-bit codes are packed two per byte, column 2i in the low nibble and column 2i+1
//     in the high nibble; a row takes cols/2 bytes. 8-bit codes take one byte each.
//   - group k of row r covers columns [k·G, (k+1)·G) (G = cols for per-channel), unless GIdx
//     is set (GPTQ act-order without static groups), in which case column c is in group GIdx[c];
//     its scale is Scales[r·Groups()+k] and, when asymmetric, its zero point Zeros[r·Groups()+k].
//
// Reconstruction, with u the stored code:
//   - 4-bit symmetric:  u ∈ [0, 15],   w = (u − 8)·s     (q = u − 8 ∈ [−8, 7]); s is an fp16 value
//   - 4-bit asymmetric: u ∈ [0, 15],   w = (u − z)·s     z ∈ [0, 15] an integer zero point; s fp16
//   - 8-bit symmetric:  u is an int8 q ∈ [−127, 127], w = q·s; s float32
//   - 8-bit asymmetric: u ∈ [0, 255],  w = (u − z)·s     z ∈ [0, 255]; s float32
//
// The asymmetric zero point is an integer (GPTQ / compressed-tensors convention), not
// tinygemm's float zero (w = (u − 8)·s + zero): with an integer zero the value 0 is exactly
// representable (u = z), so zero weights, padding and GPTQ's dead columns stay exactly zero, and
// an integer kernel can use Σ(u − z)·x = Σu·x − z·Σx. The range [min, max] always includes 0.
//
// The symmetric 4-bit scale is chosen as ggml's Q4_0 does: s = m / −8 where m is the element of
// largest magnitude (so s may be negative), which maps m exactly onto −8 and uses all 16 levels.
// The symmetric 8-bit range is [−127, 127] (s = max|w| / 127), leaving −128 unused so that
// integer kernels may negate codes freely.

import (
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/half"
)

// GroupSpec describes an integer group encoding.
type GroupSpec struct {
	// Bits is 4 or 8.
	Bits int
	// Group is the number of consecutive columns sharing a scale: 16, 32, 64, 128 or 256;
	// 0 means one group per row (per output channel).
	Group int
	// Symmetric selects a zero point fixed at the middle of the range (no stored zeros).
	Symmetric bool
}

// String names the spec as gquant's presets do, e.g. "int4-sym-g128", "int8-sym-channel".
func (s GroupSpec) String() string {
	kind := "asym"
	if s.Symmetric {
		kind = "sym"
	}
	g := "channel"
	if s.Group > 0 {
		g = fmt.Sprintf("g%d", s.Group)
	}
	return fmt.Sprintf("int%d-%s-%s", s.Bits, kind, g)
}

// Validate checks the spec and that it fits a rows × cols weight.
func (s GroupSpec) Validate(rows, cols int) error {
	switch {
	case s.Bits != 4 && s.Bits != 8:
		return fmt.Errorf("%v: %d bits unsupported (want 4 or 8)", s, s.Bits)
	case s.Group != 0 && s.Group != 16 && s.Group != 32 && s.Group != 64 && s.Group != 128 && s.Group != 256:
		return fmt.Errorf("%v: group size %d unsupported (want 0, 16, 32, 64, 128 or 256)", s, s.Group)
	case rows <= 0 || cols <= 0:
		return fmt.Errorf("%v: shape %d × %d is empty", s, rows, cols)
	case s.Group > 0 && cols%s.Group != 0:
		return fmt.Errorf("%v: row length %d is not a multiple of the group size %d", s, cols, s.Group)
	case s.Bits == 4 && cols%2 != 0:
		return fmt.Errorf("%v: row length %d is odd; 4-bit rows pack two codes per byte", s, cols)
	}
	return nil
}

// groupLen is the number of columns per group for a row of cols.
func (s GroupSpec) groupLen(cols int) int {
	if s.Group == 0 {
		return cols
	}
	return s.Group
}

// codeRange is the range of stored codes (as ints; 8-bit symmetric codes are signed).
func (s GroupSpec) codeRange() (lo, hi int) {
	switch {
	case s.Bits == 8 && s.Symmetric:
		return -127, 127
	default:
		return 0, 1<<s.Bits - 1
	}
}

// roundScale rounds a scale to its storage precision: fp16 for 4-bit codes, float32 for 8-bit.
func (s GroupSpec) roundScale(v float32) float32 {
	if s.Bits == 4 {
		return half.F16ToF32(half.F32ToF16(v))
	}
	return v
}

// BitsPerWeight is the storage cost per weight, codes plus scales and zeros (scale fp16 for
// 4 bits and float32 for 8 bits; zero points count 4 or 8 bits), for a row of cols.
func (s GroupSpec) BitsPerWeight(cols int) float64 {
	g := float64(s.groupLen(cols))
	scale := 16.0
	if s.Bits == 8 {
		scale = 32
	}
	extra := scale
	if !s.Symmetric {
		extra += float64(s.Bits)
	}
	return float64(s.Bits) + extra/g
}

// GroupTensor is a weight encoded with a GroupSpec; see the file comment for the layout.
type GroupTensor struct {
	Spec       GroupSpec
	Rows, Cols int
	// Q holds the codes, row-major (4-bit: two per byte, low nibble first).
	Q []byte
	// Scales holds Rows × Groups() scales; for 4-bit codes each is exactly an fp16 value.
	Scales []float32
	// Zeros holds Rows × Groups() integer zero points (asymmetric specs only; nil otherwise).
	Zeros []uint8
	// GIdx is nil when group k is columns [k·G, (k+1)·G); otherwise the group of each column
	// (GPTQ act-order without static groups).
	GIdx []int32
}

// Groups is the number of groups per row.
func (t *GroupTensor) Groups() int { return t.Cols / t.Spec.groupLen(t.Cols) }

// group is the group of column c.
func (t *GroupTensor) group(c int) int {
	if t.GIdx != nil {
		return int(t.GIdx[c])
	}
	return c / t.Spec.groupLen(t.Cols)
}

// ScalesF16 returns the scales as fp16 bit patterns (4-bit specs store them so).
func (t *GroupTensor) ScalesF16() []uint16 {
	out := make([]uint16, len(t.Scales))
	for i, s := range t.Scales {
		out[i] = half.F32ToF16(s)
	}
	return out
}

// code returns the stored code of (r, c) as an int (signed for 8-bit symmetric).
func (t *GroupTensor) code(r, c int) int {
	i := r*t.Cols + c
	if t.Spec.Bits == 4 {
		b := t.Q[i/2]
		if i%2 == 1 {
			b >>= 4
		}
		return int(b & 0xF)
	}
	if t.Spec.Symmetric {
		return int(int8(t.Q[i]))
	}
	return int(t.Q[i])
}

// setCode stores code u at (r, c).
func (t *GroupTensor) setCode(r, c, u int) {
	i := r*t.Cols + c
	if t.Spec.Bits == 4 {
		if i%2 == 0 {
			t.Q[i/2] = t.Q[i/2]&0xF0 | byte(u)
		} else {
			t.Q[i/2] = t.Q[i/2]&0x0F | byte(u)<<4
		}
		return
	}
	t.Q[i] = byte(int8(u)) // two's complement for signed codes, plain for unsigned
}

// zeroOf returns the zero point of group index gi (r·Groups()+k).
func (t *GroupTensor) zeroOf(gi int) int {
	switch {
	case !t.Spec.Symmetric:
		return int(t.Zeros[gi])
	case t.Spec.Bits == 4:
		return 8
	default:
		return 0
	}
}

// Dequantize reconstructs the rows × cols weights: (u − z)·s in float32.
func (t *GroupTensor) Dequantize() []float32 {
	out := make([]float32, t.Rows*t.Cols)
	ng := t.Groups()
	for r := 0; r < t.Rows; r++ {
		for c := 0; c < t.Cols; c++ {
			gi := r*ng + t.group(c)
			out[r*t.Cols+c] = float32(float32(t.code(r, c)-t.zeroOf(gi)) * t.Scales[gi])
		}
	}
	return out
}

// newGroupTensor allocates an empty tensor for spec and shape.
func newGroupTensor(spec GroupSpec, rows, cols int) *GroupTensor {
	t := &GroupTensor{Spec: spec, Rows: rows, Cols: cols}
	n := rows * cols
	if spec.Bits == 4 {
		t.Q = make([]byte, n/2)
	} else {
		t.Q = make([]byte, n)
	}
	ng := rows * t.Groups()
	t.Scales = make([]float32, ng)
	if !spec.Symmetric {
		t.Zeros = make([]uint8, ng)
	}
	return t
}

// grid is the quantization grid of one group: codes u ∈ [lo, hi], w = (u − zero)·scale.
type grid struct {
	scale    float32
	zero     int
	lo, hi   int
	overflow bool // the scale does not fit its storage type
}

// code rounds x onto the grid (half to even) and clamps.
func (g grid) code(x float32) int {
	if g.scale == 0 {
		return g.zero
	}
	v := math.RoundToEven(float64(x/g.scale)) + float64(g.zero)
	switch {
	case v < float64(g.lo):
		return g.lo
	case v > float64(g.hi):
		return g.hi
	}
	return int(v)
}

// value reconstructs code u.
// The explicit conversion keeps the product from being fused into a caller's subtraction.
func (g grid) value(u int) float32 { return float32(float32(u-g.zero) * g.scale) }

// Clip search: the range is shrunk by factors 1, 1−step, … down to clipMin, as AWQ's
// auto_clip (max_shrink 0.5, 20 steps) does.
const (
	clipSteps = 20
	clipMin   = 0.5
)

// fitGrid chooses the grid of one group from its values x. Without importance it is plain
// min-max (round to nearest); with importance imp (len(x) non-negative weights) it also tries
// ranges shrunk by the clip factors and keeps the one with the least Σ imp·(x − x̂)²
// (the unshrunk range wins ties).
func (s GroupSpec) fitGrid(x, imp []float32) grid {
	best := s.gridFor(x, 1)
	if imp == nil || best.scale == 0 {
		return best
	}
	bestErr := groupErr(best, x, imp)
	for i := 1; i <= clipSteps; i++ {
		p := 1 - float32(i)*(1-clipMin)/clipSteps
		g := s.gridFor(x, p)
		if g.scale == 0 {
			continue
		}
		if e := groupErr(g, x, imp); e < bestErr {
			best, bestErr = g, e
		}
	}
	return best
}

// gridFor is the min-max grid of x with its range shrunk by p ∈ (0, 1].
func (s GroupSpec) gridFor(x []float32, p float32) grid {
	lo, hi := s.codeRange()
	g := grid{lo: lo, hi: hi}
	switch {
	case s.Symmetric && s.Bits == 4:
		g.zero = 8
		var m, amax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, m = a, v
			}
		}
		if amax >= groupMaxEps {
			g.scale = s.roundScale(p * m / -8)
		}
	case s.Symmetric:
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		if amax >= groupMaxEps {
			g.scale = s.roundScale(p * amax / float32(hi))
		}
	default:
		var mn, mx float32 // the range always includes 0
		for _, v := range x {
			mn, mx = min(mn, v), max(mx, v)
		}
		mn, mx = p*mn, p*mx
		if mx-mn >= groupMaxEps {
			g.scale = s.roundScale((mx - mn) / float32(hi))
		}
		if g.scale != 0 {
			g.zero = int(min(float64(hi), max(0, math.RoundToEven(float64(-mn/g.scale)))))
		}
	}
	if math.IsInf(float64(g.scale), 0) {
		g.overflow = true
	}
	return g
}

// groupErr is Σ imp·(x − x̂)² in float64.
func groupErr(g grid, x, imp []float32) float64 {
	var e float64
	for i, v := range x {
		d := float64(v - g.value(g.code(v)))
		e += float64(float64(imp[i]) * d * d)
	}
	return e
}

// checkFinite reports the first NaN or infinity of w (rows × cols) by position.
func checkFinite(w []float32, cols int) error {
	for i, v := range w {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("weight [%d, %d] is %g", i/cols, i%cols, v)
		}
	}
	return nil
}

// QuantizeGroups encodes the rows × cols weights w with spec. imatrix is nil (plain RTN,
// min-max) or holds cols non-negative importance weights, one per input column (for example
// an imatrix entry or diag(XᵀX)); then each group's range is also searched over shrink factors
// for the least importance-weighted squared error.
func QuantizeGroups(spec GroupSpec, w []float32, rows, cols int, imatrix []float32) (*GroupTensor, error) {
	if err := spec.Validate(rows, cols); err != nil {
		return nil, err
	}
	if len(w) != rows*cols {
		return nil, fmt.Errorf("%v: %d weights for a %d × %d matrix", spec, len(w), rows, cols)
	}
	if imatrix != nil {
		if len(imatrix) != cols {
			return nil, fmt.Errorf("%v: importance has %d values, want %d (one per column)", spec, len(imatrix), cols)
		}
		for j, v := range imatrix {
			if !(v >= 0) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%v: importance [%d] is %g (want finite and ≥ 0)", spec, j, v)
			}
		}
	}
	if err := checkFinite(w, cols); err != nil {
		return nil, fmt.Errorf("%v: %w", spec, err)
	}
	t := newGroupTensor(spec, rows, cols)
	gl, ng := spec.groupLen(cols), t.Groups()
	for r := 0; r < rows; r++ {
		for k := 0; k < ng; k++ {
			x := w[r*cols+k*gl : r*cols+(k+1)*gl]
			var imp []float32
			if imatrix != nil {
				imp = imatrix[k*gl : (k+1)*gl]
			}
			g := spec.fitGrid(x, imp)
			if err := t.setGrid(r, k, g); err != nil {
				return nil, err
			}
			for i, v := range x {
				t.setCode(r, k*gl+i, g.code(v))
			}
		}
	}
	return t, nil
}

// setGrid records the scale and zero point of group k of row r.
func (t *GroupTensor) setGrid(r, k int, g grid) error {
	if g.overflow {
		return fmt.Errorf("%v: row %d group %d: the scale overflows fp16 (weights too large for 4-bit codes)", t.Spec, r, k)
	}
	gi := r*t.Groups() + k
	t.Scales[gi] = g.scale
	if t.Zeros != nil {
		t.Zeros[gi] = uint8(g.zero)
	}
	return nil
}
