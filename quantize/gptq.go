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
//
// The work is serial, in the calling goroutine (the converter runs one matrix per worker).
// The heavy parts are in gptq_chol.go (the inverse Hessian's factor, n³/3 multiply-adds,
// blocked) and gptq_gemm.go (the lazy block updates and the in-block updates, with AVX-512 or
// AVX2 kernels where the CPU has them); every element is computed by one fixed sequence of
// float64 operations, so the bits depend on the inputs alone: not on the CPU, the kernels, the
// row blocks a matrix is split into, or the number of threads.

import (
	"fmt"
	"math"
	"sort"
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

// gptqRowTile is the number of rows Run takes through a block's columns together.
const gptqRowTile = 8

// groupQuantizer adapts a GroupTensor to GPTQQuantizer.
type groupQuantizer struct {
	t     *GroupTensor
	grids []grid // current grid per (row, group)
	ng    int    // groups per row
}

func (q *groupQuantizer) GroupSize() int { return q.t.Spec.Group }

func (q *groupQuantizer) Fit(r, g int, x, imp []float32) error {
	if q.grids == nil {
		q.ng = q.t.Groups()
		q.grids = make([]grid, q.t.Rows*q.ng)
	}
	gr := q.t.Spec.fitGrid(x, imp)
	if err := q.t.setGrid(r, g, gr); err != nil {
		return err
	}
	q.grids[r*q.ng+g] = gr
	return nil
}

func (q *groupQuantizer) Round(r, g, c int, x float32) float32 {
	gr := &q.grids[r*q.ng+g]
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
	return newGPTQPlan(H, cols, groupSize, opts, invCholUpper, false)
}

// NewGPTQPlanInPlace is NewGPTQPlan with H's memory as the plan's working copy: the caller
// gives H up (it becomes the plan's factor, permuted in place for act-order), so that a
// Hessian of c columns costs its 8·c² bytes once instead of twice (1.6 GB for Llama-3-8B's
// down projection, 6.6 GB for a 70B's). The plan is NewGPTQPlan's, bit for bit.
func NewGPTQPlanInPlace(H []float64, cols, groupSize int, opts GPTQOptions) (*GPTQPlan, error) {
	return newGPTQPlan(H, cols, groupSize, opts, invCholUpper, true)
}

// newGPTQPlan is NewGPTQPlan with the function that turns the damped Hessian h (processing
// order, overwritten) into U (gptq_chol.go; the tests also pass LAPACK's route), and H as the
// working copy when inPlace.
func newGPTQPlan(H []float64, cols, groupSize int, opts GPTQOptions, factor func(h []float64, n int) ([]float64, error), inPlace bool) (*GPTQPlan, error) {
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
	// Dead inputs (never active): H_ii = 1 and the weights zeroed, as the reference does.
	p.dead = make([]bool, cols)
	p.diag0 = make([]float64, cols)
	for i := 0; i < cols; i++ {
		p.diag0[i] = H[i*cols+i]
		if p.diag0[i] == 0 {
			p.diag0[i] = 1
			p.dead[i] = true
		}
	}
	p.diag = p.diag0
	// Act-order: permute columns by decreasing diag(H).
	p.perm = make([]int, cols)
	for i := range p.perm {
		p.perm[i] = i
	}
	var h []float64 // the working copy of H, in processing order
	if opts.ActOrder {
		sort.SliceStable(p.perm, func(a, b int) bool { return p.diag0[p.perm[a]] > p.diag0[p.perm[b]] })
		if inPlace {
			h = permuteSymInPlace(H, cols, p.perm)
		} else {
			h = permuteSym(H, cols, p.perm)
		}
		p.diag = make([]float64, cols)
		for i, c := range p.perm {
			p.diag[i] = p.diag0[c]
		}
	} else if inPlace {
		h = H
	} else {
		h = append([]float64(nil), H...)
	}
	// Damping, then U: the upper Cholesky factor of H⁻¹ (H⁻¹ = UᵀU).
	var mean float64
	for _, d := range p.diag {
		mean += d
	}
	mean /= float64(cols)
	for i := 0; i < cols; i++ {
		h[i*cols+i] = p.diag[i] + damp*mean
	}
	var err error
	if p.U, err = factor(h, cols); err != nil {
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
	// Working copy in float64, in processing order, dead inputs zeroed.
	W := make([]float64, rows*cols)
	for r := 0; r < rows; r++ {
		src, dst := w[r*cols:(r+1)*cols], W[r*cols:(r+1)*cols]
		if !allFinite32(src) {
			return nil, fmt.Errorf("gptq: %w", checkFinite(w, cols))
		}
		for pos, c := range p.perm {
			if !p.dead[c] {
				dst[pos] = float64(src[c])
			}
		}
	}
	// Static groups: fitted from the original weights (dead inputs zeroed) in original order.
	if p.static {
		if err := fitGroupsOrig(q, w, rows, cols, G, p.dead, p.diag0, p.clip); err != nil {
			return nil, err
		}
	}
	U, perm, static := p.U, p.perm, p.static
	if !static && G == cols { // per channel: one grid per row, from the starting weights
		if err := fitGroups(q, W, rows, cols, 0, cols, G, p.diag, p.clip); err != nil {
			return nil, err
		}
	}
	refit := !static && G < cols // a grid per group, fitted at the group's first column
	errBlk := make([]float64, rows*bs)
	ublk := make([]float64, bs*bs) // U[i1:i2, i1:i2], contiguous
	grp := make([]int, bs)         // group of each position of the block
	var x, imp []float32
	if refit {
		x = make([]float32, G)
		if p.clip {
			imp = make([]float32, G)
		}
	}
	gq, _ := q.(*groupQuantizer) // called directly rather than through the interface
	var gw gemmWork
	for i1 := 0; i1 < cols; i1 += bs {
		i2 := min(i1+bs, cols)
		nb := i2 - i1
		for i := i1; i < i2; i++ {
			copy(ublk[(i-i1)*bs:(i-i1)*bs+nb], U[i*cols+i1:i*cols+i2])
			if static {
				grp[i-i1] = perm[i] / G
			} else {
				grp[i-i1] = i / G
			}
		}
		// Inside the block, a few rows at a time (rows are independent; the tile's part of W
		// and U's block stay in cache): each column is rounded in every row of the tile (the
		// rows' chains of dependent operations overlap), then its errors are spread at once
		// over the block's later columns. A codec error is the one the column-major loop of
		// the reference meets first: the lowest column (errAt), then the lowest row.
		var fitErr error
		errAt := cols
		for r0 := 0; r0 < rows; r0 += gptqRowTile {
			r1 := min(r0+gptqRowTile, rows)
			var stopped [gptqRowTile]bool
			var et [gptqRowTile]float64 // the column's errors in the tile's rows
			for i := i1; i < i2; i++ {
				ii := i - i1
				ur := ublk[ii*bs : ii*bs+nb]
				d, un := ur[ii], ur[ii+1:]
				g, c := grp[ii], perm[i]
				fit := refit && i%G == 0
				if fit && imp != nil {
					for j := range imp {
						imp[j] = float32(p.diag[i+j])
					}
				}
				for r := r0; r < r1; r++ {
					if stopped[r-r0] {
						et[r-r0] = 0 // the row is abandoned: an error is returned
						continue
					}
					if fit {
						if i >= errAt {
							stopped[r-r0], et[r-r0] = true, 0
							continue
						}
						for j := range x {
							x[j] = float32(W[r*cols+i+j])
						}
						if err := q.Fit(r, i/G, x, imp); err != nil {
							fitErr, errAt = err, i
							stopped[r-r0], et[r-r0] = true, 0
							continue
						}
					}
					xv := W[r*cols+i]
					var qv float64
					if gq != nil { // gq.Round, inlined (TestGPTQQuantizerInterface)
						gr := &gq.grids[r*gq.ng+g]
						u := gr.code(float32(xv))
						gq.t.setCode(r, c, u)
						qv = float64(gr.value(u))
					} else {
						qv = float64(q.Round(r, g, c, float32(xv)))
					}
					e := (xv - qv) / d
					errBlk[r*bs+ii] = e
					et[r-r0] = e
				}
				// From the 8-aligned position at or before the column (aligned vectors for
				// the kernels): the entries of U's row before its diagonal are zeros, and
				// the columns up to i are no longer read.
				if len(un) > 0 {
					a := ii &^ 7
					gerSub(et[:r1-r0], ur[a:], W[r0*cols+i1+a:], cols, nb-a)
				}
			}
		}
		if fitErr != nil {
			return nil, fitErr
		}
		// Lazy batch update of the columns after the block: W[:, i2:] −= Err · U[i1:i2, i2:].
		// gemmSub computes each element in an order fixed by k alone, so a row gets the same
		// bits in any block of rows (TestGPTQRowBlocks) and with any kernel.
		if i2 < cols {
			gemmSub(&gw, rows, cols-i2, nb, errBlk, bs, U[i1*cols+i2:], cols, false, W[i2:], cols, false)
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

// allFinite32 reports whether every value of x is finite: v·0 is NaN for ±Inf and NaN.
func allFinite32(x []float32) bool {
	var z0, z1, z2, z3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		z0 += float32(x[i] * 0)
		z1 += float32(x[i+1] * 0)
		z2 += float32(x[i+2] * 0)
		z3 += float32(x[i+3] * 0)
	}
	for ; i < len(x); i++ {
		z0 += float32(x[i] * 0)
	}
	return z0+z1+z2+z3 == 0
}

// fitGroupsOrig is fitGroups over all of w (float32, original column order), with the dead
// inputs read as zeros.
func fitGroupsOrig(q GPTQQuantizer, w []float32, rows, cols, G int, dead []bool, diag []float64, clip bool) error {
	x := make([]float32, G)
	var imp []float32
	if clip {
		imp = make([]float32, G)
	}
	for p0 := 0; p0 < cols; p0 += G {
		if clip {
			for j := range imp {
				imp[j] = float32(diag[p0+j])
			}
		}
		for r := 0; r < rows; r++ {
			for j := range x {
				if x[j] = w[r*cols+p0+j]; dead[p0+j] {
					x[j] = 0
				}
			}
			if err := q.Fit(r, p0/G, x, imp); err != nil {
				return err
			}
		}
	}
	return nil
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

// permuteSymInPlace is permuteSym in h's own memory (and one row of scratch): the columns of
// every row first, then the rows, cycle by cycle.
func permuteSymInPlace(h []float64, n int, perm []int) []float64 {
	tmp := make([]float64, n)
	for i := 0; i < n; i++ {
		row := h[i*n : (i+1)*n]
		for b, j := range perm {
			tmp[b] = row[j]
		}
		copy(row, tmp)
	}
	done := make([]bool, n)
	for a := range perm {
		if done[a] || perm[a] == a {
			continue
		}
		copy(tmp, h[a*n:(a+1)*n])
		cur := a
		for {
			done[cur] = true
			src := perm[cur]
			if src == a {
				copy(h[cur*n:(cur+1)*n], tmp)
				break
			}
			copy(h[cur*n:(cur+1)*n], h[src*n:(src+1)*n])
			cur = src
		}
	}
	return h
}
