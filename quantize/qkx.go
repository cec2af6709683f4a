package quantize

import "math"

// make_qkx2_quants and make_qkx3_quants (ggml-quants.c): the asymmetric scale-and-minimum
// search of Q2_K, Q4_K, Q5_K and of the imatrix paths of Q4_1 and Q5_1.
//
// ggml tries nstep+1 trial scales in turn. Each trial rounds x − min to levels with
// iscale = (rmin + rdelta·is + nmax)/(max − min), fits scale and minimum to those levels by
// weighted least squares (three running sums), and is kept when its weighted error (a fourth
// running sum) is strictly smaller than the best so far; keeping a trial also replaces min,
// which the later trials then use. This port computes the same float32 values with the same
// operations in the same order, organised for speed:
//
//   - The searches of the sub-blocks of a super-block are independent; they run in lockstep,
//     trial by trial, and the sums and errors of two sub-blocks are computed in one pass so
//     that the CPU can overlap their otherwise serial chains of float additions. Each search
//     still decides its trials in order.
//   - A trial's fit and error depend only on its levels (and on x and the weights). A trial
//     whose levels equal those of the previous trial of the same search therefore gets the
//     same error, which cannot be strictly smaller than the best after that trial was
//     considered (it was either kept, and is the best, or rejected against a best that has
//     not changed since); min has not changed either. Such a trial is skipped.
//
// Each running sum still adds its terms one by one in element order, and every product that
// is added is rounded by an explicit float32 conversion, so that no FMA is formed.

// qkxMaxN is the largest sub-block the search accepts (Q4_K, Q5_K, Q4_1, Q5_1: 32; Q2_K: 16).
const qkxMaxN = 32

// qkxMaxM is the most searches run in lockstep (Q2_K's 16 sub-blocks).
const qkxMaxM = 16

// levelF holds float32(l) for every byte l: a load instead of an int-to-float conversion.
var levelF = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i)
	}
	return t
}()

// qkxParams are the constants of one kind of search: levels [0, nmax], trial scales
// (rmin + rdelta·is + nmax)/(max − min) for is = 0..nstep, and the error Σ w·|d| (useMad) or
// Σ w·d².
type qkxParams struct {
	nmax         int
	rmin, rdelta float32
	nstep        int
	useMad       bool
}

// Parameters of ggml's calls.
var (
	qkxQ4KRef  = qkxParams{nmax: 15, rmin: -1, rdelta: 0.1, nstep: 20}                // quantize_row_q4_K_ref
	qkxQ5KRef  = qkxParams{nmax: 31, rmin: -0.5, rdelta: 0.1, nstep: 15}              // quantize_row_q5_K_ref
	qkxQ2KRef  = qkxParams{nmax: 3, rmin: -0.5, rdelta: 0.1, nstep: 15, useMad: true} // quantize_row_q2_K_ref
	qkxImatrix = qkxParams{rmin: -0.9, rdelta: 0.05, nstep: 36}                       // make_qkx3_quants callers; set nmax
)

// qkxFit is the evaluation of one trial: its least-squares fit and the fit's error.
type qkxFit struct {
	ok           bool // D > 0: the trial competes
	scale, min   float32
	sumL, sumL2  float32
	sumXL, error float32
}

// fit solves the weighted least-squares problem of one trial from its sums (ggml's D, this_scale
// and this_min, with the minimum clamped to ≤ 0).
func (f *qkxFit) fit(sumW, sumX float32) {
	sL, sL2, sXL := f.sumL, f.sumL2, f.sumXL
	D := float32(sumW*sL2) - float32(sL*sL)
	f.ok = D > 0
	if !f.ok {
		return
	}
	f.scale = (float32(sumW*sXL) - float32(sumX*sL)) / D
	f.min = (float32(sL2*sumX) - float32(sL*sXL)) / D
	if f.min > 0 {
		f.min = 0
		f.scale = sXL / sL2
	}
}

// qkxSearch runs make_qkx2_quants (or make_qkx3_quants with weights) on each of the
// m = len(x)/n consecutive sub-blocks of n ≤ 32 elements of x (m ≤ 16), with the weights w
// (as long as x). It writes the levels of sub-block s to L[n·s:n·s+n], its scale to
// scales[s] and its minimum, negated (≥ 0; x ≈ scale·l − theMin), to mins[s].
// (make_qkx3_quants's degenerate test max ≤ min selects the same inputs as
// make_qkx2_quants's max == min: max ≥ x[0] ≥ min unless x[0] is NaN, when both are false.)
func qkxSearch(x, w []float32, n int, L []uint8, scales, mins []float32, p qkxParams) {
	m := len(x) / n
	if n > qkxMaxN || m > qkxMaxM || m*n != len(x) || len(w) != len(x) || len(L) < len(x) ||
		len(scales) < m || len(mins) < m {
		panic("quantize: make_qkx_quants: bad block shape")
	}
	if useSIMDSearch && qkxSearchSIMD(x, w, n, L, scales, mins, p) { // search_amd64.go; the Go code below is its reference
		return
	}
	nmax := p.nmax
	var (
		minv, maxv, sumW, sumX, best, scale [qkxMaxM]float32
		xm                                  [qkxMaxM][qkxMaxN]float32 // x − min, for the min in force
		lb, prev                            [qkxMaxM][qkxMaxN]uint8   // levels of the trial; of the last evaluated trial
		lf                                  [qkxMaxM][qkxMaxN]float32 // levels of the trial as floats
		live                                [qkxMaxM]int              // searches still running
	)
	nlive := 0
	for s := 0; s < m; s++ {
		xs, ws, Ls := x[s*n:s*n+n], w[s*n:s*n+n], L[s*n:s*n+n]
		mn, mx := xs[0], xs[0]
		sw := ws[0]
		sx := float32(sw * xs[0])
		for i := 1; i < n; i++ {
			if xs[i] < mn {
				mn = xs[i]
			}
			if xs[i] > mx {
				mx = xs[i]
			}
			wi := ws[i]
			sw += wi
			sx += float32(wi * xs[i])
		}
		if mn > 0 {
			mn = 0
		}
		if mx == mn {
			clear(Ls)
			scales[s], mins[s] = 0, -mn
			continue
		}
		minv[s], maxv[s], sumW[s], sumX[s] = mn, mx, sw, sx
		xms := xm[s][:n]
		for i, v := range xs {
			xms[i] = v - mn
		}
		// The starting point: nmax levels over [min, max]; its error is the best so far.
		iscale := float32(nmax) / (mx - mn)
		scale[s] = 1 / iscale
		qkxLevels(&lb[s], &lf[s], xms, iscale, nmax)
		copy(Ls, lb[s][:n])
		best[s] = qkxError1(xs, ws, lf[s][:n], scale[s], mn, p.useMad)
		if p.nstep < 1 {
			scales[s], mins[s] = scale[s], -mn
			continue
		}
		live[nlive] = s
		nlive++
	}
	if p.nstep < 1 {
		return
	}

	var act [qkxMaxM]int // searches whose trial is evaluated
	var fits [qkxMaxM]qkxFit
	for is := 0; is <= p.nstep; is++ {
		num := p.rmin + float32(p.rdelta*float32(is)) + float32(nmax)
		nact := 0
		for _, s := range live[:nlive] {
			qkxLevels(&lb[s], &lf[s], xm[s][:n], num/(maxv[s]-minv[s]), nmax)
			if is > 0 && lb[s] == prev[s] {
				continue // same levels as this search's previous trial: cannot win
			}
			act[nact] = s
			nact++
		}
		// Sums and fits, two searches per pass.
		k := 0
		for ; k+1 < nact; k += 2 {
			a, b := act[k], act[k+1]
			qkxSums2(x[a*n:a*n+n], w[a*n:a*n+n], lf[a][:n], x[b*n:b*n+n], w[b*n:b*n+n], lf[b][:n], &fits[k], &fits[k+1])
		}
		if k < nact {
			a := act[k]
			qkxSums1(x[a*n:a*n+n], w[a*n:a*n+n], lf[a][:n], &fits[k])
		}
		var fitted [qkxMaxM]int // positions in act of the trials with D > 0
		nfit := 0
		for k := 0; k < nact; k++ {
			s := act[k]
			fits[k].fit(sumW[s], sumX[s])
			if fits[k].ok {
				fitted[nfit] = k
				nfit++
			}
		}
		// Errors, two searches per pass.
		k = 0
		for ; k+1 < nfit; k += 2 {
			fa, fb := &fits[fitted[k]], &fits[fitted[k+1]]
			a, b := act[fitted[k]], act[fitted[k+1]]
			fa.error, fb.error = qkxError2(x[a*n:a*n+n], w[a*n:a*n+n], lf[a][:n], fa.scale, fa.min,
				x[b*n:b*n+n], w[b*n:b*n+n], lf[b][:n], fb.scale, fb.min, p.useMad)
		}
		if k < nfit {
			fa := &fits[fitted[k]]
			a := act[fitted[k]]
			fa.error = qkxError1(x[a*n:a*n+n], w[a*n:a*n+n], lf[a][:n], fa.scale, fa.min, p.useMad)
		}
		// Each search decides its trial.
		for k := 0; k < nact; k++ {
			s, f := act[k], &fits[k]
			prev[s] = lb[s]
			if f.ok && f.error < best[s] {
				copy(L[s*n:s*n+n], lb[s][:n])
				best[s], scale[s], minv[s] = f.error, f.scale, f.min
				xms := xm[s][:n]
				for i, v := range x[s*n : s*n+n] {
					xms[i] = v - f.min
				}
			}
		}
	}
	for _, s := range live[:nlive] {
		scales[s], mins[s] = scale[s], -minv[s]
	}
}

// roundMagic is nearestInt's 1.5·2^23, in a variable so that the compiler keeps it in a
// register across a loop instead of reloading the constant in every iteration.
var roundMagic float32 = 12582912

// qkxLevels rounds iscale·xm to levels in [0, nmax], as bytes and as floats:
// clamp(nearestInt(iscale·v), 0, nmax).
func qkxLevels(lb *[qkxMaxN]uint8, lf *[qkxMaxN]float32, xm []float32, iscale float32, nmax int) {
	top := int32(nmax)
	magic, tab := roundMagic, &levelF
	for i, v := range xm[:min(len(xm), qkxMaxN)] {
		l := int32(math.Float32bits(float32(iscale*v)+magic)&0x007fffff) - 0x00400000
		if l < 0 {
			l = 0
		}
		if l > top {
			l = top
		}
		lb[i] = uint8(l)
		lf[i] = tab[uint8(l)]
	}
}

// qkxSums1 computes Σ w·l, Σ (w·l)·l and Σ (w·l)·x of one trial.
func qkxSums1(x, w, la []float32, fa *qkxFit) {
	n := len(x)
	w, la = w[:n], la[:n]
	var aL, aL2, aXL float32
	for i, xi := range x {
		fl := la[i]
		wl := float32(w[i] * fl)
		aL += wl
		aL2 += float32(wl * fl)
		aXL += float32(wl * xi)
	}
	fa.sumL, fa.sumL2, fa.sumXL = aL, aL2, aXL
}

// qkxSums2 is qkxSums1 for two trials at once (independent chains of additions).
func qkxSums2(xa, wa, la, xb, wb, lb []float32, fa, fb *qkxFit) {
	n := len(xa)
	wa, la, xb, wb, lb = wa[:n], la[:n], xb[:n], wb[:n], lb[:n]
	var aL, aL2, aXL, bL, bL2, bXL float32
	for i, xi := range xa {
		ka, kb := la[i], lb[i]
		ta := float32(wa[i] * ka)
		tb := float32(wb[i] * kb)
		aL += ta
		bL += tb
		aL2 += float32(ta * ka)
		bL2 += float32(tb * kb)
		aXL += float32(ta * xi)
		bXL += float32(tb * xb[i])
	}
	fa.sumL, fa.sumL2, fa.sumXL = aL, aL2, aXL
	fb.sumL, fb.sumL2, fb.sumXL = bL, bL2, bXL
}

// qkxError1 is Σ w·err(scale·l + min − x) in element order, err = |·| (useMad) or ·².
func qkxError1(x, w, lf []float32, scale, minv float32, useMad bool) float32 {
	n := len(x)
	w, lf = w[:n], lf[:n]
	var e float32
	if useMad {
		for i, xi := range x {
			diff := float32(scale*lf[i]) + minv - xi
			e += float32(w[i] * abs32(diff))
		}
		return e
	}
	for i, xi := range x {
		diff := float32(scale*lf[i]) + minv - xi
		e += float32(w[i] * float32(diff*diff))
	}
	return e
}

// qkxError2 is qkxError1 for two fits at once (independent chains of additions).
func qkxError2(xa, wa, la []float32, sa, ma float32, xb, wb, lb []float32, sb, mb float32, useMad bool) (ea, eb float32) {
	if useMad {
		return qkxError1(xa, wa, la, sa, ma, true), qkxError1(xb, wb, lb, sb, mb, true)
	}
	n := len(xa)
	wa, la, xb, wb, lb = wa[:n], la[:n], xb[:n], wb[:n], lb[:n]
	for i, xi := range xa {
		da := float32(sa*la[i]) + ma - xi
		db := float32(sb*lb[i]) + mb - xb[i]
		ea += float32(wa[i] * float32(da*da))
		eb += float32(wb[i] * float32(db*db))
	}
	return ea, eb
}
