package gqf

import (
	"fmt"
	"math"
	"strings"
)

// maxProblems bounds the problems one error lists.
const maxProblems = 8

// problems collects validation failures into one error.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	if len(p) > maxProblems {
		p = append(p[:maxProblems:maxProblems], fmt.Sprintf("and %d more problems", len(p)-maxProblems))
	}
	return fmt.Errorf("%s", strings.Join(p, "; "))
}

// Bits returns the bit width of one element of a data type (0 for an unknown type).
func (d DataType) Bits() int {
	switch d {
	case DataType_INT4, DataType_UINT4:
		return 4
	case DataType_INT8, DataType_UINT8:
		return 8
	case DataType_F16, DataType_BF16, DataType_INT16, DataType_UINT16:
		return 16
	case DataType_F32, DataType_INT32:
		return 32
	case DataType_INT64:
		return 64
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DataType) IsFloat() bool { return d == DataType_F32 || d == DataType_F16 || d == DataType_BF16 }

// IsCode reports whether d is an integer code type of quantized data.
func (d DataType) IsCode() bool {
	switch d {
	case DataType_INT4, DataType_UINT4, DataType_INT8, DataType_UINT8, DataType_INT16, DataType_UINT16:
		return true
	}
	return false
}

// Signed reports whether d is a signed integer type.
func (d DataType) Signed() bool {
	switch d {
	case DataType_INT4, DataType_INT8, DataType_INT16, DataType_INT32, DataType_INT64:
		return true
	}
	return false
}

// CodeRange is the range of codes of an integer type.
func (d DataType) CodeRange() (lo, hi int64) {
	b := d.Bits()
	if d.Signed() {
		return -(1 << (b - 1)), 1<<(b-1) - 1
	}
	return 0, 1<<b - 1
}

// elements returns the element count of a shape, or an error for a non-positive dimension
// or an overflow.
func elements(shape []int64) (uint64, error) {
	n := uint64(1)
	for _, d := range shape {
		if d <= 0 || d > 1<<40 {
			return 0, fmt.Errorf("shape %v: dimension %d out of range", shape, d)
		}
		n *= uint64(d)
		if n > 1<<48 {
			return 0, fmt.Errorf("shape %v: too many elements", shape)
		}
	}
	return n, nil
}

// validate checks the manifest against a data section of dataSize bytes.
func (m *Manifest) validate(dataSize uint64) error {
	var ps problems
	if m.Config == nil || len(m.Config.ConfigJson) == 0 {
		ps.add("config: missing")
	}
	seen := map[string]bool{}
	for i, t := range m.Tensors {
		name := t.Name
		if name == "" {
			name = fmt.Sprintf("tensor #%d", i)
			ps.add("%s: empty name", name)
		}
		if seen[t.Name] {
			ps.add("%s: listed twice", name)
		}
		seen[t.Name] = true
		if err := t.validate(dataSize); err != nil {
			ps.add("%s: %v", name, err)
		}
	}
	if m.Graph != nil {
		m.Graph.validate(seen, &ps)
	}
	if e := m.LinearInputs; e != nil {
		if err := CheckDynamic(e); err != nil {
			ps.add("linear_inputs: %v", err)
		}
	}
	return ps.err()
}

// validate checks a tensor's encoding and that its buffers have the sizes the encoding needs
// and lie inside the data section.
func (t *Tensor) validate(dataSize uint64) error {
	n, err := elements(t.Shape)
	if err != nil {
		return err
	}
	e := t.Encoding
	if e == nil {
		return fmt.Errorf("encoding: missing")
	}
	inside := func(what string, b *Buffer, want uint64) error {
		if b == nil {
			if want > 0 {
				return fmt.Errorf("%s: missing (want %d bytes)", what, want)
			}
			return nil
		}
		if want == 0 {
			return fmt.Errorf("%s: present but the encoding has none", what)
		}
		if b.Size != want {
			return fmt.Errorf("%s: %d bytes, want %d for shape %v", what, b.Size, want, t.Shape)
		}
		if b.Offset > dataSize || b.Size > dataSize-b.Offset {
			return fmt.Errorf("%s: bytes [%d, %d) run past the end of the data section (%d bytes)", what, b.Offset, b.Offset+b.Size, dataSize)
		}
		return nil
	}
	want, err := e.sizes(t.Shape, n)
	if err != nil {
		return fmt.Errorf("encoding: %v", err)
	}
	for _, c := range []struct {
		what string
		b    *Buffer
		want uint64
	}{{"data", t.Data, want.data}, {"scales", t.Scales, want.scales}, {"zeros", t.Zeros, want.zeros}, {"block scales", t.BlockScales, want.blockScales}} {
		if err := inside(c.what, c.b, c.want); err != nil {
			return err
		}
	}
	return nil
}

// bufferSizes are the byte sizes of a tensor's buffers under an encoding.
type bufferSizes struct{ data, scales, zeros, blockScales uint64 }

// sizes checks an encoding of a stored tensor and returns the sizes of its buffers.
func (e *Encoding) sizes(shape []int64, n uint64) (bufferSizes, error) {
	var s bufferSizes
	bits := e.Dtype.Bits()
	if bits == 0 {
		return s, fmt.Errorf("dtype %v is unknown", e.Dtype)
	}
	if e.Bits != uint32(bits) && !(e.Dtype.IsCode() && e.Bits > 0 && e.Bits < uint32(bits)) {
		return s, fmt.Errorf("bits %d do not fit dtype %v", e.Bits, e.Dtype)
	}
	if n*uint64(bits)%8 != 0 {
		return s, fmt.Errorf("%d elements of %d bits do not fill whole bytes", n, bits)
	}
	s.data = n * uint64(bits) / 8
	scaleBytes := uint64(e.ScaleType.Bits() / 8)
	zeroBytes := uint64(e.ZeroType.Bits() / 8)
	checkScaleZero := func() error {
		if e.ScaleType != DataType_F32 && e.ScaleType != DataType_F16 {
			return fmt.Errorf("scale type %v is unsupported (want F32 or F16)", e.ScaleType)
		}
		if !e.Dtype.IsCode() {
			return fmt.Errorf("dtype %v is not an integer code type", e.Dtype)
		}
		if e.Symmetric != e.Dtype.Signed() {
			return fmt.Errorf("symmetric %v with dtype %v (stored symmetric codes are signed, asymmetric ones unsigned)", e.Symmetric, e.Dtype)
		}
		if !e.Symmetric && e.ZeroType != DataType_UINT8 && e.ZeroType != DataType_UINT16 {
			return fmt.Errorf("zero type %v is unsupported (want UINT8 or UINT16)", e.ZeroType)
		}
		if !e.Symmetric && e.ZeroType.Bits() < bits {
			return fmt.Errorf("zero type %v is narrower than the codes", e.ZeroType)
		}
		return nil
	}
	perGroup := func(groups uint64) {
		s.scales = groups * scaleBytes
		if !e.Symmetric {
			s.zeros = groups * zeroBytes
		}
	}
	switch e.Granularity {
	case Granularity_FLOAT:
		if e.Dtype.IsCode() {
			return s, fmt.Errorf("granularity FLOAT with integer code type %v", e.Dtype)
		}
	case Granularity_PER_TENSOR:
		if !e.Dtype.IsCode() {
			return s, fmt.Errorf("dtype %v is not an integer code type", e.Dtype)
		}
		if err := checkActivation(e); err != nil {
			return s, err
		}
	case Granularity_PER_CHANNEL:
		if err := checkScaleZero(); err != nil {
			return s, err
		}
		if len(shape) != 2 || e.Axis != 0 {
			return s, fmt.Errorf("per-channel encodings need a matrix and axis 0 (shape %v, axis %d)", shape, e.Axis)
		}
		if bits == 4 && shape[1]%2 != 0 {
			return s, fmt.Errorf("4-bit rows of odd length %d", shape[1])
		}
		perGroup(uint64(shape[0]))
	case Granularity_PER_BLOCK, Granularity_LPBQ:
		if err := checkScaleZero(); err != nil {
			return s, err
		}
		if len(shape) != 2 || e.Axis != 0 {
			return s, fmt.Errorf("block encodings need a matrix and axis 0 (shape %v, axis %d)", shape, e.Axis)
		}
		if e.BlockSize == 0 || shape[1]%int64(e.BlockSize) != 0 || (bits == 4 && e.BlockSize%2 != 0) {
			return s, fmt.Errorf("block size %d does not divide rows of %d", e.BlockSize, shape[1])
		}
		blocks := uint64(shape[0]) * uint64(shape[1]) / uint64(e.BlockSize)
		if e.Granularity == Granularity_PER_BLOCK {
			perGroup(blocks)
			break
		}
		if !e.Symmetric {
			return s, fmt.Errorf("LPBQ encodings are symmetric")
		}
		if e.DecompressedBits <= e.Bits || e.DecompressedBits-e.Bits > 8 {
			return s, fmt.Errorf("LPBQ decompressed bits %d with %d-bit codes (want bits < decompressed ≤ bits+8)", e.DecompressedBits, e.Bits)
		}
		s.scales = uint64(shape[0]) * scaleBytes
		s.blockScales = blocks
	default:
		return s, fmt.Errorf("granularity %v is unknown", e.Granularity)
	}
	return s, nil
}

// checkActivation checks a per-tensor encoding (inline scale and offset).
func checkActivation(e *Encoding) error {
	if e.Granularity != Granularity_PER_TENSOR {
		return fmt.Errorf("granularity %v, want PER_TENSOR", e.Granularity)
	}
	if !e.Dtype.IsCode() {
		return fmt.Errorf("dtype %v is not an integer code type", e.Dtype)
	}
	if e.Bits == 0 || e.Bits > uint32(e.Dtype.Bits()) {
		return fmt.Errorf("bits %d do not fit dtype %v", e.Bits, e.Dtype)
	}
	if len(e.Scale) != 1 || len(e.Offset) != 1 {
		return fmt.Errorf("%d scales and %d offsets, want 1 each", len(e.Scale), len(e.Offset))
	}
	s := float64(e.Scale[0])
	if !(s > 0) || math.IsInf(s, 0) {
		return fmt.Errorf("scale %g is not positive and finite", s)
	}
	// float = (q + offset)·scale: zero must be representable, q = −offset in the code range.
	lo, hi := e.Dtype.CodeRange()
	if e.Bits < uint32(e.Dtype.Bits()) {
		if e.Dtype.Signed() {
			lo, hi = -(1 << (e.Bits - 1)), 1<<(e.Bits-1)-1
		} else {
			hi = 1<<e.Bits - 1
		}
	}
	if q := -int64(e.Offset[0]); q < lo || q > hi {
		return fmt.Errorf("offset %d puts zero outside the codes [%d, %d]", e.Offset[0], lo, hi)
	}
	return nil
}

// CheckDynamic validates a run-time (PER_TOKEN) encoding: signed codes, symmetric, a bit
// width of 2 to the dtype's, and no stored scale or offset.
func CheckDynamic(e *Encoding) error {
	switch {
	case e.Granularity != Granularity_PER_TOKEN:
		return fmt.Errorf("granularity %v, want PER_TOKEN", e.Granularity)
	case !e.Dtype.IsCode() || !e.Dtype.Signed():
		return fmt.Errorf("dtype %v is not a signed integer code type", e.Dtype)
	case !e.Symmetric:
		return fmt.Errorf("dynamic encodings are symmetric")
	case e.Bits < 2 || e.Bits > uint32(e.Dtype.Bits()):
		return fmt.Errorf("bits %d do not fit dtype %v", e.Bits, e.Dtype)
	case len(e.Scale) != 0 || len(e.Offset) != 0:
		return fmt.Errorf("dynamic encodings store no scale or offset")
	}
	return nil
}

// knownOps is the vocabulary (Ops) as a set.
var knownOps = func() map[string]bool {
	m := map[string]bool{}
	for _, op := range Ops {
		m[op] = true
	}
	return m
}()

// validate checks that every node is of a known op, reads defined tensors and that every
// node output has one activation entry with a valid encoding.
func (g *Graph) validate(tensors map[string]bool, ps *problems) {
	defined := map[string]bool{}
	for _, in := range g.Inputs {
		defined[in.Name] = true
	}
	acts := map[string]*Value{}
	for _, a := range g.Activations {
		if acts[a.Name] != nil {
			ps.add("graph: activation %s: listed twice", a.Name)
		}
		acts[a.Name] = a
		if a.Encoding != nil {
			if err := checkActivation(a.Encoding); err != nil {
				ps.add("graph: activation %s: encoding: %v", a.Name, err)
			}
		}
	}
	for i, nd := range g.Nodes {
		name := nd.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
		}
		if !knownOps[nd.Op] {
			ps.add("graph: node %s: op %q is not in the QNN vocabulary gqf uses", name, nd.Op)
		}
		for _, in := range nd.Inputs {
			if !defined[in] && !tensors[in] {
				ps.add("graph: node %s: input %s is not defined before it", name, in)
			}
		}
		if len(nd.Outputs) == 0 {
			ps.add("graph: node %s: no outputs", name)
		}
		for _, out := range nd.Outputs {
			if defined[out] || tensors[out] {
				ps.add("graph: node %s: output %s is defined twice", name, out)
			}
			defined[out] = true
			if acts[out] == nil {
				ps.add("graph: node %s: output %s has no activation entry", name, out)
			}
		}
	}
	for _, a := range g.Activations {
		if !defined[a.Name] {
			ps.add("graph: activation %s: no node produces it", a.Name)
		}
	}
	for _, out := range g.Outputs {
		if !defined[out] {
			ps.add("graph: output %s: not produced", out)
		}
	}
}
