package quantize

// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
// Transformers", arXiv 2210.17323), following the reference implementation
// IST-DASLab/gptq gptq.py GPTQ.fasterquant: columns are quantized one at a time and each
// column's rounding error is spread over the columns not yet quantized, weighted by the
// inverse Hessian of the layer's squared output error, H = XᵀX.
//
// Differences from the reference, all deliberate:
//   - a group's grid is fitted from the current, error-compensated values of its columns
//     (the reference reads the block-stale copy W[:, i:i+G] when G < blocksize); the block size
//     is rounded up to a multiple of the group size so that a group never straddles blocks;
//   - act-order ties are broken by column index (a stable sort), for determinism;
//   - everything is float64 except the codec, which sees float32 values.

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// GPTQOptions tunes GPTQ; the zero value gives the reference defaults.
type GPTQOptions struct {
	// Damp is the fraction of mean(diag H) added to the diagonal (default 0.01).
	Damp float64
	// BlockSize is the number of columns updated lazily together (default 128).
	BlockSize int
	// ActOrder processes columns by decreasing diag(H) ("desc_act").
	ActOrder bool
	// StaticGroups fits every group's grid up front from the original weights, in the
	// original column order, so that with ActOrder the groups stay contiguous (no GIdx).
	StaticGroups bool
	// ClipSearch fits each group's grid with the importance-weighted clipping search of
	// QuantizeGroups, using diag(H) as the importance.
	ClipSearch bool
}

// GPTQQuantizer is the codec GPTQ drives. GPTQ calls Fit for each (row, group) before the
// group's first column is rounded, with the group's current values, then Round for every
// element of the group. Any codec whose parameters are fixed per group of columns (a GGUF
// block type, with groups of its block size) can implement it.
type GPTQQuantizer interface {
	// GroupSize is the number of columns sharing a grid (0: the whole row).
	GroupSize() int
	// Fit fixes the grid of group g of row r from the group's values x (in processing order)
	// and their importance imp (nil unless the caller asked for it).
	Fit(r, g int, x, imp []float32) error
	// Round rounds x, the current value of row r at original column c (in group g), onto the
	// fitted grid, records the code and returns the reconstructed value.
	Round(r, g, c int, x float32) float32
}

// GPTQ quantizes the rows × cols weights w (row-major, HF [out, in] layout) with spec, given
// the Hessian H = Σ xᵀx over calibration inputs x (cols × cols, row-major, float64; any
// positive factor, such as 2/n, is irrelevant). w and H are not modified. With
// opts.ActOrder and no StaticGroups the returned tensor carries GIdx.
func GPTQ(w []float32, rows, cols int, H []float64, spec GroupSpec, opts GPTQOptions) (*GroupTensor, error) {
	if err := spec.Validate(rows, cols); err != nil {
		return nil, err
	}
	q := &groupQuantizer{t: newGroupTensor(spec, rows, cols)}
	gidx, err := GPTQWith(q, w, rows, cols, H, opts)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", spec, err)
	}
	q.t.GIdx = gidx
	return q.t, nil
}

// groupQuantizer adapts a GroupTensor to GPTQQuantizer.
type groupQuantizer struct {
	t     *GroupTensor
	grids []grid // current grid per (row, group)
}

func (q *groupQuantizer) GroupSize() int { return q.t.Spec.Group }

func (q *groupQuantizer) Fit(r, g int, x, imp []float32) error {
	if q.grids == nil {
		q.grids = make([]grid, q.t.Rows*q.t.Groups())
	}
	gr := q.t.Spec.fitGrid(x, imp)
	if err := q.t.setGrid(r, g, gr); err != nil {
		return err
	}
	q.grids[r*q.t.Groups()+g] = gr
	return nil
}

func (q *groupQuantizer) Round(r, g, c int, x float32) float32 {
	gr := q.grids[r*q.t.Groups()+g]
	u := gr.code(x)
	q.t.setCode(r, c, u)
	return gr.value(u)
}

// GPTQWith runs GPTQ with any codec (see GPTQ for w, H and opts). It returns the group of each
// original column when act-order makes groups non-contiguous (ActOrder, no StaticGroups,
// GroupSize > 0), else nil.
func GPTQWith(q GPTQQuantizer, w []float32, rows, cols int, H []float64, opts GPTQOptions) ([]int32, error) {
	if rows <= 0 || cols <= 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("gptq: %d weights for a %d × %d matrix", len(w), rows, cols)
	}
	p, err := NewGPTQPlan(H, cols, q.GroupSize(), opts)
	if err != nil {
		return nil, err
	}
	return p.Run(q, w, rows)
}

// GPTQPlan is what GPTQ derives from the Hessian alone: the dead inputs, the column order, the
// damped inverse Hessian's Cholesky factor. Every row of a weight matrix is quantized
// independently given it, so a plan serves any number of row blocks of one matrix, from any
// number of goroutines at once, each row getting the bits it gets in a run over the whole
// matrix.
type GPTQPlan struct {
	cols, G, bs int
	static      bool
	actOrder    bool
	clip        bool
	dead        []bool
	diag0       []float64 // diag(H) in original column order (static groups' importance)
	diag        []float64 // in processing order
	perm        []int     // processing position → original column
	U           []float64 // upper Cholesky factor of the damped H⁻¹, processing order
}

// NewGPTQPlan prepares GPTQ for rows of cols columns quantized in groups of groupSize columns
// (0: the whole row), given the Hessian H (cols × cols, not modified) and opts.
func NewGPTQPlan(H []float64, cols, groupSize int, opts GPTQOptions) (*GPTQPlan, error) {
	switch {
	case cols <= 0:
		return nil, fmt.Errorf("gptq: %d columns", cols)
	case len(H) != cols*cols:
		return nil, fmt.Errorf("gptq: Hessian has %d values, want %d × %d", len(H), cols, cols)
	case opts.Damp < 0 || math.IsNaN(opts.Damp):
		return nil, fmt.Errorf("gptq: damping %g is negative", opts.Damp)
	case opts.BlockSize < 0:
		return nil, fmt.Errorf("gptq: block size %d is negative", opts.BlockSize)
	}
	for i, v := range H {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("gptq: Hessian [%d, %d] is %g", i/cols, i%cols, v)
		}
	}
	damp, bs := opts.Damp, opts.BlockSize
	if damp == 0 {
		damp = 0.01
	}
	if bs == 0 {
		bs = 128
	}
	G := groupSize
	if G <= 0 {
		G = cols
	}
	if cols%G != 0 {
		return nil, fmt.Errorf("gptq: row length %d is not a multiple of the group size %d", cols, G)
	}
	if G < cols {
		bs = (bs + G - 1) / G * G // a group never straddles two blocks
	}
	p := &GPTQPlan{cols: cols, G: G, bs: bs, static: opts.StaticGroups && G < cols, actOrder: opts.ActOrder, clip: opts.ClipSearch}
	h := append([]float64(nil), H...)
	// Dead inputs (never active): H_ii = 1 and the weights zeroed, as the reference does.
	p.dead = make([]bool, cols)
	for i := 0; i < cols; i++ {
		if h[i*cols+i] == 0 {
			h[i*cols+i] = 1
			p.dead[i] = true
		}
	}
	p.diag0 = make([]float64, cols)
	for i := range p.diag0 {
		p.diag0[i] = h[i*cols+i]
	}
	p.diag = p.diag0
	// Act-order: permute columns by decreasing diag(H).
	p.perm = make([]int, cols)
	for i := range p.perm {
		p.perm[i] = i
	}
	if opts.ActOrder {
		sort.SliceStable(p.perm, func(a, b int) bool { return p.diag0[p.perm[a]] > p.diag0[p.perm[b]] })
		h = permuteSym(h, cols, p.perm)
		p.diag = make([]float64, cols)
		for i := range p.diag {
			p.diag[i] = h[i*cols+i]
		}
	}
	// Damping, then U: the upper Cholesky factor of H⁻¹ (H⁻¹ = UᵀU).
	var mean float64
	for _, d := range p.diag {
		mean += d
	}
	mean /= float64(cols)
	for i := 0; i < cols; i++ {
		h[i*cols+i] += damp * mean
	}
	var err error
	if p.U, err = invCholUpper(h, cols); err != nil {
		return nil, err
	}
	return p, nil
}

// Run quantizes rows of w (rows × the plan's columns, row-major) with q, whose row r is row r
// of w. It returns what GPTQWith returns.
func (p *GPTQPlan) Run(q GPTQQuantizer, w []float32, rows int) ([]int32, error) {
	cols, G, bs := p.cols, p.G, p.bs
	if rows <= 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("gptq: %d weights for rows of %d", len(w), cols)
	}
	if g := q.GroupSize(); g != G && !(g <= 0 && G == cols) {
		return nil, fmt.Errorf("gptq: codec groups of %d, plan groups of %d", g, G)
	}
	if err := checkFinite(w, cols); err != nil {
		return nil, fmt.Errorf("gptq: %w", err)
	}
	// Working copy in float64, dead inputs zeroed.
	W := make([]float64, rows*cols)
	for i, v := range w {
		W[i] = float64(v)
	}
	for i, d := range p.dead {
		if d {
			for r := 0; r < rows; r++ {
				W[r*cols+i] = 0
			}
		}
	}
	// Static groups: fitted from the original (dead-zeroed) weights in original order.
	if p.static {
		if err := fitGroups(q, W, rows, cols, 0, cols, G, p.diag0, p.clip); err != nil {
			return nil, err
		}
	}
	if p.actOrder {
		W = permuteCols(W, rows, cols, p.perm)
	}
	U, perm, static := p.U, p.perm, p.static
	groupOf := func(pos int) int { // group of processing position pos
		if static {
			return perm[pos] / G
		}
		return pos / G
	}
	if !static && G == cols { // per channel: one grid per row, from the starting weights
		if err := fitGroups(q, W, rows, cols, 0, cols, G, p.diag, p.clip); err != nil {
			return nil, err
		}
	}
	errBlk := make([]float64, rows*bs)
	for i1 := 0; i1 < cols; i1 += bs {
		i2 := min(i1+bs, cols)
		nb := i2 - i1
		for i := i1; i < i2; i++ {
			if !static && G < cols && i%G == 0 {
				if err := fitGroups(q, W, rows, cols, i, i+G, G, p.diag, p.clip); err != nil {
					return nil, err
				}
			}
			d := U[i*cols+i]
			urow := U[i*cols : (i+1)*cols]
			g, c := groupOf(i), perm[i]
			for r := 0; r < rows; r++ {
				wr := W[r*cols : (r+1)*cols]
				x := wr[i]
				qv := float64(q.Round(r, g, c, float32(x)))
				e := (x - qv) / d
				errBlk[r*bs+(i-i1)] = e
				for j := i + 1; j < i2; j++ {
					wr[j] -= float64(e * urow[j])
				}
			}
		}
		// Lazy batch update of the columns after the block: W[:, i2:] -= Err · U[i1:i2, i2:].
		// gonum's Gemm accumulates each element over k in order whatever the number of rows,
		// so a row gets the same bits in any block of rows (TestGPTQRowBlocks).
		if i2 < cols {
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1,
				blas64.General{Rows: rows, Cols: nb, Stride: bs, Data: errBlk},
				blas64.General{Rows: nb, Cols: cols - i2, Stride: cols, Data: U[i1*cols+i2:]},
				1,
				blas64.General{Rows: rows, Cols: cols - i2, Stride: cols, Data: W[i2:]})
		}
	}
	if !p.actOrder || static || G == cols {
		return nil, nil
	}
	gidx := make([]int32, cols)
	for pos, c := range perm {
		gidx[c] = int32(pos / G)
	}
	return gidx, nil
}

// GPTQRows quantizes a block of rows of a matrix with a plan made for it (see GPTQ).
func GPTQRows(p *GPTQPlan, w []float32, rows int, spec GroupSpec) (*GroupTensor, error) {
	if err := spec.Validate(rows, p.cols); err != nil {
		return nil, err
	}
	q := &groupQuantizer{t: newGroupTensor(spec, rows, p.cols)}
	gidx, err := p.Run(q, w, rows)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", spec, err)
	}
	q.t.GIdx = gidx
	return q.t, nil
}

// fitGroups calls q.Fit for every row and each group of G columns starting in positions
// [from, to) of the working matrix W, whose column order is that of diag (the importance,
// used when clip is set).
func fitGroups(q GPTQQuantizer, W []float64, rows, cols, from, to, G int, diag []float64, clip bool) error {
	x := make([]float32, G)
	var imp []float32
	if clip {
		imp = make([]float32, G)
	}
	for p0 := from; p0 < to; p0 += G {
		if clip {
			for j := range imp {
				imp[j] = float32(diag[p0+j])
			}
		}
		g := p0 / G
		for r := 0; r < rows; r++ {
			for j := range x {
				x[j] = float32(W[r*cols+p0+j])
			}
			if err := q.Fit(r, g, x, imp); err != nil {
				return err
			}
		}
	}
	return nil
}

// invCholUpper returns U, upper triangular with H⁻¹ = UᵀU (torch.linalg.cholesky(H⁻¹,
// upper=True) in the reference), row-major n × n with zeros below the diagonal. h is
// overwritten. LAPACK is called directly (potrf, potri, potrf): mat.Cholesky would also
// estimate condition numbers, which costs as much as the inverse.
func invCholUpper(h []float64, n int) ([]float64, error) {
	a := blas64.Symmetric{Uplo: blas.Upper, N: n, Data: h, Stride: n}
	t, ok := lapack64.Potrf(a)
	if !ok {
		return nil, fmt.Errorf("gptq: Hessian is not positive definite after damping (increase Damp)")
	}
	inv, ok := lapack64.Potri(t)
	if !ok {
		return nil, fmt.Errorf("gptq: Hessian is singular (increase Damp)")
	}
	u, ok := lapack64.Potrf(inv)
	if !ok {
		return nil, fmt.Errorf("gptq: inverse Hessian is not positive definite (increase Damp)")
	}
	U := make([]float64, n*n)
	for i := 0; i < n; i++ {
		copy(U[i*n+i:(i+1)*n], u.Data[i*u.Stride+i:i*u.Stride+n])
	}
	return U, nil
}

// permuteCols returns W with its columns reordered: out[:, p] = W[:, perm[p]].
func permuteCols(W []float64, rows, cols int, perm []int) []float64 {
	out := make([]float64, len(W))
	for r := 0; r < rows; r++ {
		for p, c := range perm {
			out[r*cols+p] = W[r*cols+c]
		}
	}
	return out
}

// permuteSym returns H[perm][:, perm].
func permuteSym(h []float64, n int, perm []int) []float64 {
	out := make([]float64, len(h))
	for a, i := range perm {
		for b, j := range perm {
			out[a*n+b] = h[i*n+j]
		}
	}
	return out
}
