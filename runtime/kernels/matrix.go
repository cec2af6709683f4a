package kernels

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// ActMode selects how activations meet the weights.
type ActMode uint8

const (
	// ActDefault is ActQuant for block-quantized weights and ActFloat for F32, F16 and BF16.
	ActDefault ActMode = iota
	// ActFloat multiplies decoded weights by float32 activations (W4A16-style).
	ActFloat
	// ActQuant converts the activations as llama.cpp does for the weight type (Q8_0, Q8_1,
	// Q8_K blocks; fp16 or bf16 rounding for F16 and BF16 weights) and multiplies in integers
	// where the weights are quantized: the result matches llama.cpp's (W4A8-style).
	ActQuant
)

// String names the mode.
func (a ActMode) String() string {
	switch a {
	case ActDefault:
		return "default"
	case ActFloat:
		return "float"
	case ActQuant:
		return "quant"
	}
	return fmt.Sprintf("ActMode(%d)", uint8(a))
}

// Matrix is a weight tensor of Rows rows and Cols columns in ggml's layout: row r occupies
// Data[r·RowBytes : (r+1)·RowBytes]. Create it with NewMatrix. A Matrix may be used by many
// goroutines at once; it must not be copied after first use, and Data must not change once a
// product has run (the packed copy would go stale).
type Matrix struct {
	Type       WType
	Rows, Cols int
	Data       []byte
	// Mode is the activation mode of the products; it may be changed between products (not
	// during one).
	Mode ActMode

	rowBytes int
	grp      *groupInfo // gqf integer weights (NewGroupMatrix); nil for ggml types
	buf      *weightBuf // Data's mapping for group matrices (nil: on the heap)
	mu       sync.Mutex
	pk       atomic.Pointer[packed]
}

// NewMatrix wraps data (not copied) as a rows×cols matrix of type t.
func NewMatrix(t WType, rows, cols int, data []byte) (*Matrix, error) {
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	if rows <= 0 {
		return nil, fmt.Errorf("row count %d is not positive", rows)
	}
	if len(data) != rows*rb {
		return nil, fmt.Errorf("%v %dx%d needs %d bytes, have %d", t, rows, cols, rows*rb, len(data))
	}
	return &Matrix{Type: t, Rows: rows, Cols: cols, Data: data, rowBytes: rb}, nil
}

// RowBytes returns the bytes of one row of m in ggml's layout (0 for a group matrix, whose
// rows are interleaved by 16: see Bytes).
func (m *Matrix) RowBytes() int { return m.rowBytes }

// mode resolves ActDefault.
func (m *Matrix) mode() ActMode { return m.Mode.resolve(m.Type) }

// resolve turns ActDefault into the mode products of weights of type t take.
func (a ActMode) resolve(t WType) ActMode {
	if a == ActDefault {
		if t.quantized() {
			return ActQuant
		}
		return ActFloat
	}
	return a
}

// actKind returns the activation form m's products take.
func (m *Matrix) actKind() actKind {
	if m.grp != nil {
		if m.mode() == ActQuant {
			return actG8
		}
		return actG16
	}
	if m.mode() == ActFloat {
		return actF32
	}
	switch m.Type {
	case F16:
		return actF16
	case BF16:
		return actBF16
	case Q4_0, Q5_0, Q8_0, IQ4_NL:
		return actQ8_0
	case Q4_1, Q5_1:
		return actQ8_1
	case Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0:
		return actQ8_K
	}
	return actF32
}

// SharesActs reports whether m's products take activations prepared for o (the same column
// count and activation form: for group matrices also the same activation block and code
// width), so that one Prepare serves both.
func (m *Matrix) SharesActs(o *Matrix) bool {
	return m.Cols == o.Cols && m.actKind() == o.actKind() && m.groupActs() == o.groupActs()
}

// Pack builds the repacked copy of the weights that the current implementation's quantized
// kernels read (about the size of Data, on the heap; Data itself is still read by the generic
// code, so it may stay a read-only file mapping). Products call it on first use; calling it
// up front moves that cost to load time. It does nothing when no repacking applies.
func (m *Matrix) Pack() {
	m.valid()
	m.packedFor(current)
}

// packedFor returns m's packed form for implementation im, building it once.
func (m *Matrix) packedFor(im *implTable) *packed {
	if im.packs == nil || !im.packs(m.Type) {
		return nil
	}
	if p := m.pk.Load(); p != nil {
		return p
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pk.Load(); p != nil {
		return p
	}
	p := packMatrix(m)
	m.pk.Store(p)
	return p
}

// valid panics when m was not made by NewMatrix.
func (m *Matrix) valid() {
	if m.rowBytes == 0 && m.grp == nil {
		panic("kernels: Matrix not created by NewMatrix or NewGroupMatrix")
	}
}

// Prepare converts nTok activation rows X (nTok×Cols, row-major) into a in the form m's
// products need under the current implementation.
func (m *Matrix) Prepare(a *Acts, X []float32, nTok int) {
	m.valid()
	if nTok < 0 || len(X) < nTok*m.Cols {
		panic(fmt.Sprintf("kernels: Prepare: %d tokens of %d columns need %d values, have %d", nTok, m.Cols, nTok*m.Cols, len(X)))
	}
	a.grp = m.groupActs()
	a.size(m.actKind(), nTok, m.Cols)
	a.sizePacked(m)
	a.convert(X[:nTok*m.Cols], 0, nTok)
}

// prepareActs fills a for kind k.
func prepareActs(a *Acts, k actKind, X []float32, nTok, cols int) {
	a.size(k, nTok, cols)
	a.convert(X, 0, nTok)
}

// PrepareOn is Prepare with the conversion of the tokens spread over the workers of p (the
// caller must not be running another job of p).
func (m *Matrix) PrepareOn(p *Pool, a *Acts, X []float32, nTok int) {
	m.valid()
	if nTok < 0 || len(X) < nTok*m.Cols {
		panic(fmt.Sprintf("kernels: PrepareOn: %d tokens of %d columns need %d values, have %d", nTok, m.Cols, nTok*m.Cols, len(X)))
	}
	a.grp = m.groupActs()
	a.size(m.actKind(), nTok, m.Cols)
	a.sizePacked(m)
	X = X[:nTok*m.Cols]
	// Tokens of at least ~16k values per chunk, so that small batches stay on one thread (and
	// allocate no job); whole units of the packed form's tokens.
	grain := max(1, (1<<14)/m.Cols)
	if u := current.floatPackUnit; len(a.xp) > 0 && u > 1 {
		grain = (grain + u - 1) / u * u
	}
	if nTok <= grain || p.Workers() == 1 {
		a.convert(X, 0, nTok)
		return
	}
	p.Run(nTok, grain, func(_, lo, hi int) { a.convert(X, lo, hi) })
}

// size sets a's kind and shape and sizes its buffers for the current implementation (without
// the packed float form: sizePacked).
func (a *Acts) size(k actKind, nTok, cols int) {
	a.kind, a.impl, a.nTok, a.cols = k, current, nTok, cols
	a.xp = a.xp[:0]
	n := nTok * cols
	switch k {
	case actF32, actF16, actBF16:
		a.f = growF32(a.f, n)
		if k == actBF16 && current.bf16Dot && nTok >= bf16DotMinTokens {
			a.bf = growU16(a.bf, n)
		} else {
			a.bf = a.bf[:0]
		}
		return
	case actQ8_0, actQ8_1:
		a.qs, a.d = growI8(a.qs, n), growF32(a.d, n/32)
		if k == actQ8_1 {
			a.s = growF32(a.s, n/32)
		}
	case actQ8_K:
		a.qs, a.d, a.bsums = growI8(a.qs, n), growF32(a.d, n/256), growI16(a.bsums, n/16)
	case actG16, actG8:
		a.groupSize()
		return
	}
	if current.wantsIL != nil && current.wantsIL(k) {
		ilSize(a)
	}
}

// sizePacked sizes a.xp (after size) when the products of m, for which a is prepared, read
// the packed float form under the current implementation; otherwise it stays empty.
func (a *Acts) sizePacked(m *Matrix) {
	if a.kind != actF32 || current.floatPacked == nil {
		return
	}
	if n := current.floatPacked(m, a.nTok); n > 0 {
		if cap(a.xp) < n {
			a.xp = alignedBytes(n)
		}
		a.xp = a.xp[:n]
	}
}

// convert fills tokens [t0,t1) of a (sized by size) from X (all tokens, row-major).
func (a *Acts) convert(X []float32, t0, t1 int) {
	cols := a.cols
	x := X[t0*cols : t1*cols]
	switch a.kind {
	case actF32:
		copy(a.f[t0*cols:], x)
		if len(a.xp) > 0 {
			a.impl.floatPack(a, t0, t1)
		}
		return
	case actF16:
		for i, v := range x {
			a.f[t0*cols+i] = roundF16(v)
		}
		return
	case actBF16:
		if len(a.bf) > 0 {
			f, bf := a.f[t0*cols:t1*cols], a.bf[t0*cols:t1*cols]
			if conv := a.impl.toBF16; conv != nil && len(x) >= 16 {
				n := len(x) &^ 15
				conv(&bf[0], &f[0], &x[0], n)
				f, bf, x = f[n:], bf[n:], x[n:]
			}
			for i, v := range x {
				h := f32ToBF16(v)
				bf[i], f[i] = h, bf16ToF32(h)
			}
			return
		}
		for i, v := range x {
			a.f[t0*cols+i] = roundBF16(v)
		}
		return
	case actG16, actG8:
		a.groupConvert(X, t0, t1)
		return
	}
	if current.quantActs != nil && current.quantActs(a, X, t0, t1) {
		return
	}
	switch a.kind {
	case actQ8_0, actQ8_1:
		b0, b1 := t0*cols/32, t1*cols/32
		var s []float32
		if a.kind == actQ8_1 {
			s = a.s[b0:b1]
		}
		quantizeQ8_0(a.qs[t0*cols:t1*cols], a.d[b0:b1], s, x)
	case actQ8_K:
		b0, b1 := t0*cols/256, t1*cols/256
		quantizeQ8_K(a.qs[t0*cols:t1*cols], a.d[b0:b1], a.bsums[16*b0:16*b1], x)
	}
	if current.wantsIL != nil && current.wantsIL(a.kind) {
		interleaveTokens(a, t0, t1)
	}
}

// MulActs computes Y[t·Rows + r] = Σ_k W[r,k]·X[t,k] for rows r in [r0,r1) and every token t of
// a (prepared by Prepare of a matrix with the same Cols and activation form). Rows outside
// [r0,r1) are left alone, so workers may fill disjoint row ranges of one Y concurrently.
func (m *Matrix) MulActs(Y []float32, a *Acts, r0, r1 int) {
	m.valid()
	if a.kind != m.actKind() || a.cols != m.Cols || a.impl != current || a.grp != m.groupActs() {
		panic(fmt.Sprintf("kernels: MulActs: activations prepared for another matrix kind (%v %v, %d columns)", m.Type, m.mode(), m.Cols))
	}
	if r0 < 0 || r1 > m.Rows || r0 > r1 || len(Y) < (a.nTok-1)*m.Rows+r1 {
		panic(fmt.Sprintf("kernels: MulActs: rows [%d,%d) of %d, %d tokens, len(Y) %d", r0, r1, m.Rows, a.nTok, len(Y)))
	}
	if r0 == r1 || a.nTok == 0 {
		return
	}
	if m.grp != nil {
		if current.groupMul != nil && current.groupMul(m, Y, a, r0, r1) {
			return
		}
		if a.glay != glNatural {
			panic("kernels: MulActs: no kernel for the activation layout prepared") // an implementation's bug
		}
		groupMulGeneric(m, Y, a, r0, r1)
		return
	}
	if current.mul != nil && current.mul(m, m.packedFor(current), Y, a, r0, r1) {
		return
	}
	genericMul(m, Y, a, r0, r1)
}

// Scratch holds per-worker buffers for MatVec and MatMul. The zero value is ready to use; one
// Scratch must not be used by two goroutines at once.
type Scratch struct {
	acts Acts
}

// MatVec computes y[r] = Σ_k W[r,k]·x[k] for r in [r0,r1). It prepares x on every call: when
// several workers share one x, call Prepare once and MulActs in each worker instead.
func (m *Matrix) MatVec(y, x []float32, r0, r1 int, s *Scratch) {
	m.MatMul(y, x, 1, r0, r1, s)
}

// MatMul computes Y[t·Rows + r] = Σ_k W[r,k]·X[t·Cols + k] for nTok tokens and r in [r0,r1).
// Quantized products give each token the same bits as MatVec would; F32, F16 and BF16 products
// of 4 or more tokens use a GEMM kernel that adds in another order (float rounding differs).
func (m *Matrix) MatMul(Y, X []float32, nTok, r0, r1 int, s *Scratch) {
	m.Prepare(&s.acts, X, nTok)
	m.MulActs(Y, &s.acts, r0, r1)
}

// rowBufPool recycles the float rows the generic float path decodes weights into.
var rowBufPool = sync.Pool{New: func() any { return new([]float32) }}

// genericMul is the reference product, on the ggml layout.
func genericMul(m *Matrix, Y []float32, a *Acts, r0, r1 int) {
	rb, cols, rows := m.rowBytes, m.Cols, m.Rows
	switch a.kind {
	case actF32, actF16, actBF16:
		bp := rowBufPool.Get().(*[]float32)
		row := growF32(*bp, cols)
		for r := r0; r < r1; r++ {
			dequantRow(m.Type, row, m.Data[r*rb:(r+1)*rb])
			for t := 0; t < a.nTok; t++ {
				Y[t*rows+r] = dotF32(row, a.f[t*cols:(t+1)*cols])
			}
		}
		*bp = row
		rowBufPool.Put(bp)
		return
	}
	for t := 0; t < a.nTok; t++ {
		q := a.qs[t*cols : (t+1)*cols]
		for r := r0; r < r1; r++ {
			w := m.Data[r*rb : (r+1)*rb]
			var v float32
			switch m.Type {
			case Q4_0:
				nb := cols / 32
				v = dotQ4_0Q8_0(w, q, a.d[t*nb:(t+1)*nb], nil)
			case IQ4_NL:
				nb := cols / 32
				v = dotQ4_0Q8_0(w, q, a.d[t*nb:(t+1)*nb], &kvaluesIQ4NL)
			case Q4_1:
				nb := cols / 32
				v = dotQ4_1Q8_1(w, q, a.d[t*nb:(t+1)*nb], a.s[t*nb:(t+1)*nb])
			case Q5_0:
				nb := cols / 32
				v = dotQ5Q8(w, q, a.d[t*nb:(t+1)*nb], nil)
			case Q5_1:
				nb := cols / 32
				v = dotQ5Q8(w, q, a.d[t*nb:(t+1)*nb], a.s[t*nb:(t+1)*nb])
			case Q8_0:
				nb := cols / 32
				v = dotQ8_0Q8_0(w, q, a.d[t*nb:(t+1)*nb])
			case Q4_K, Q5_K:
				nb := cols / 256
				v = dotQ45KQ8K(w, q, a.d[t*nb:(t+1)*nb], a.bsums[16*t*nb:16*(t+1)*nb], m.Type == Q5_K)
			case Q6_K:
				nb := cols / 256
				v = dotQ6KQ8K(w, q, a.d[t*nb:(t+1)*nb])
			case Q2_K:
				nb := cols / 256
				v = dotQ2KQ8K(w, q, a.d[t*nb:(t+1)*nb], a.bsums[16*t*nb:16*(t+1)*nb])
			case Q3_K:
				nb := cols / 256
				v = dotQ3KQ8K(w, q, a.d[t*nb:(t+1)*nb])
			case IQ4_XS:
				nb := cols / 256
				v = dotIQ4XSQ8K(w, q, a.d[t*nb:(t+1)*nb])
			case IQ2_XXS, IQ2_XS, IQ2_S:
				nb := cols / 256
				v = dotIQ2Q8K(m.Type, w, q, a.d[t*nb:(t+1)*nb])
			case IQ3_XXS:
				nb := cols / 256
				v = dotIQ3XXSQ8K(w, q, a.d[t*nb:(t+1)*nb])
			case IQ3_S:
				nb := cols / 256
				v = dotIQ3SQ8K(w, q, a.d[t*nb:(t+1)*nb])
			case IQ1_S, IQ1_M:
				nb := cols / 256
				v = dotIQ1Q8K(m.Type, w, q, a.d[t*nb:(t+1)*nb], a.bsums[16*t*nb:16*(t+1)*nb])
			case TQ1_0:
				nb := cols / 256
				v = dotTQ1Q8K(w, q, a.d[t*nb:(t+1)*nb])
			case TQ2_0:
				nb := cols / 256
				v = dotTQ2Q8K(w, q, a.d[t*nb:(t+1)*nb])
			}
			Y[t*rows+r] = v
		}
	}
}
