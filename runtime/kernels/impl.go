package kernels

import (
	"fmt"
	"os"
)

// implTable is one implementation of the kernels. Fields left nil fall back to generic Go.
type implTable struct {
	name string
	// mul computes rows [r0,r1) of Y (nTok×Rows) from a, reading m's packed form when
	// packs(m.Type) holds; it returns false when it has no kernel for m.Type and a.kind.
	mul func(m *Matrix, pk *packed, Y []float32, a *Acts, r0, r1 int) bool
	// wantsIL reports whether Prepare must fill a's interleaved copies for kind k.
	wantsIL func(k actKind) bool
	// packs reports whether ActQuant products of type t read a repacked copy of the weights.
	packs func(t WType) bool
	// accel reports whether the implementation has kernels other than the generic Go ones
	// for weights of type t in activation mode mode (resolved: ActFloat or ActQuant; nil:
	// none).
	accel func(t WType, mode ActMode) bool
	// groupLayout chooses the layout of group-matrix activations (kind actG16 or actG8) for a
	// batch of nTok tokens (nil: glNatural); groupMul computes a group matrix's product from
	// activations in that layout, returning false to leave it to the generic code (which
	// takes glNatural only); groupAccel reports whether it has kernels for format f in mode
	// (ActFloat: a16, ActQuant: a8).
	groupLayout func(k actKind, g groupActs, nTok, cols int) groupLayout
	groupMul    func(m *Matrix, Y []float32, a *Acts, r0, r1 int) bool
	groupAccel  func(f GroupFormat, mode ActMode) bool
	// groupQuant16, groupQuant8 and groupSplit quantize (and split) group-matrix activations
	// as groupQuant16Go, groupQuant8Go and groupSplitGo do, bit for bit (nil: those).
	groupQuant16 func(q []int16, d []float32, sums []int32, x []float32, unit int, perm *[16]uint16)
	groupQuant8  func(q []int8, sums []int32, x []float32, unit int) float32
	groupSplit   func(q []int16, hi, lo []byte)
	// bf16Dot: products of BF16 weights and bf16-rounded activations of at least
	// bf16DotMinTokens tokens use VDPBF16PS, reading Acts.bf.
	bf16Dot bool
	// floatPacked returns the bytes of the packed form (Acts.xp) of nTok float32 activation
	// tokens that m's products read, or 0 when they read none (nil: never); floatPack fills
	// tokens [t0,t1) of it from Acts.f, t0 a multiple of floatPackUnit tokens and t1 too
	// unless it is the batch's end, so that workers may pack disjoint ranges concurrently.
	floatPacked   func(m *Matrix, nTok int) int
	floatPack     func(a *Acts, t0, t1 int)
	floatPackUnit int

	// quantActs converts tokens [t0,t1) of a quantized activation batch (sized by Acts.size)
	// from X, returning false when it does not handle a's kind.
	quantActs func(a *Acts, X []float32, t0, t1 int) bool

	// Vector operations (vec.go); nil: generic Go.
	softmax  func(x *float32, n int)
	siluMul  func(dst, gate, u *float32, n int)
	dotRows  func(y, q, k *float32, stride, rows, n int, scale float32)
	axpyRows func(out, p, v *float32, stride, rows, n int)

	// Attention tiles (attn.go); nil: generic Go. attnScores computes 4 queries' scores
	// against nblk key blocks; attnValues adds nq (4 or 1) queries' weighted value rows, for
	// hd a multiple of 16.
	// (The pointers come in arrays by value: a pointer to an array would make the caller's
	// escape to the heap, a call through a function value being opaque to escape analysis.)
	attnScores func(s, q [4]*float32, k *float32, blkStride, nblk, hd int, scale float32)
	attnValues func(o, p [4]*float32, nq int, v *float32, ldv, rows, hd int)

	// Sums of float64 exponentials (expsum.go); nil: generic Go.
	expSums func(x, y *float32, n int, mx, my float64) (sx, sy, w float64)
	expSum  func(x *float32, n int, m float64) float64

	sumSquares func(x *float32, n int) float64
	// colSums is AddColumnSums over blocks of 32 columns; toBF16 the bf16 rounding of
	// Acts.convert (f32ToBF16) for n a multiple of 16. nil: generic Go.
	colSums  func(s2, s1 *float64, am *float32, x *float32, n, ld, blocks int)
	toBF16   func(bf *uint16, f *float32, x *float32, n int)
	scaleMul func(dst, x, w *float32, n int, scale float32)
	add      func(dst, x *float32, n int)
}

var genericImpl = &implTable{name: "generic"}

// bf16DotMinTokens is the batch from which BF16 products use VDPBF16PS: below it the product
// is bound by memory, and widen + FMA (which needs no bf16 copy of the activations) measured
// as fast in the model and 5 % faster in decode (BenchmarkBF16Dot, gquant bench --acts quant).
const bf16DotMinTokens = 4

// impls lists the implementations this build and CPU can run, best first; the generic one is
// always last. asmImpls comes from the architecture's file (empty without assembly).
var impls = append(asmImpls(), genericImpl)

// current is the implementation in use, chosen once at start: the best one, unless
// GQUANT_NOASM=1 (generic) or GQUANT_KERNELS=NAME (one of Impls; another name is reported on
// stderr and ignored) says otherwise; SetImpl changes it.
var current = func() *implTable {
	if os.Getenv("GQUANT_NOASM") == "1" {
		return genericImpl
	}
	if want := os.Getenv("GQUANT_KERNELS"); want != "" {
		if im := implNamed(want); im != nil {
			return im
		}
		fmt.Fprintf(os.Stderr, "gquant: GQUANT_KERNELS=%s: not available here (have %v); using %s\n", want, Impls(), impls[0].name)
	}
	return impls[0]
}()

// implNamed returns the implementation called name, or nil.
func implNamed(name string) *implTable {
	for _, im := range impls {
		if im.name == name {
			return im
		}
	}
	return nil
}

// Impl returns the name of the implementation in use: "amx", "avx512vnni" or "generic".
func Impl() string { return current.name }

// Accelerated reports whether the implementation in use multiplies weights of type t in
// activation mode mode with more than the generic Go code. The runtime widens a type without
// such kernels to F32 at load when F32 has them (faster, at 4 bytes per weight).
func Accelerated(t WType, mode ActMode) bool {
	if f, ok := t.Group(); ok {
		return current.groupAccel != nil && current.groupAccel(f, mode.resolve(t))
	}
	if current.accel == nil || !t.Supported() {
		return false
	}
	return current.accel(t, mode.resolve(t))
}

// Impls lists the names of the implementations available on this machine, best first
// ("generic" is always present and last).
func Impls() []string {
	names := make([]string, len(impls))
	for i, im := range impls {
		names[i] = im.name
	}
	return names
}

// SetImpl switches the implementation (one of Impls) and returns a function that restores the
// previous one. It is meant for tests and benchmarks: it must not run concurrently with any
// kernel call, and Acts prepared under one implementation cannot be used under another.
func SetImpl(name string) (restore func(), err error) {
	if im := implNamed(name); im != nil {
		prev := current
		current = im
		return func() { current = prev }, nil
	}
	return nil, fmt.Errorf("kernels: implementation %q not available (have %v)", name, Impls())
}
