package quantize

import "math"

// make_qx_quants (ggml-quants.c) with rmse_type 1: the symmetric scale search of Q6_K, of the
// imatrix paths of Q3_K, Q4_0 and Q5_0, and of Q3_K's super-block scale.
//
// ggml tries 19 trial scales, is = 0 first and then −9..−1, 1..9, with
// iscale = −(nmax + 0.1·is)/max. Each trial rounds every element to a level
// l = clamp(nearest_int(iscale·x), −nmax, nmax−1) and forms sumlx = Σ (w·x)·l and
// suml2 = Σ (w·l)·l; the trial is kept when sumlx² > best·suml2.
//
// The trials do not depend on each other, only the choice does. This port evaluates them two
// per pass over the elements, so that the CPU overlaps the four serial chains of additions,
// and then makes ggml's choice in ggml's order. Each sum adds its terms in element order, and
// every added product is rounded by an explicit float32 conversion (no FMA).

// qxTrials is the number of trial scales of make_qx_quants.
const qxTrials = 19

// qxScale is the inverse scale of trial is (−9..9) of make_qx_quants; trial 0 is ggml's first
// guess −nmax/max, which is the same value.
func qxScale(is, nmax int, maxv float32) float32 {
	if is == 0 {
		return float32(-nmax) / maxv
	}
	return -(float32(nmax) + float32(0.1*float32(is))) / maxv
}

// makeQxQuants is make_qx_quants with rmse_type 1: symmetric levels L in [0, 2·nmax) (stored
// as l + nmax) and the scale minimising Σ w (x − scale·l)², with w = qw or x² when qw is nil;
// len(x) ≤ 32.
func makeQxQuants(x []float32, nmax int, L []int8, qw []float32) float32 {
	const maxN = 32
	n := len(x)
	if n > maxN {
		panic("quantize: make_qx_quants: block too large")
	}
	L = L[:n]
	if useSIMDSearch { // search_amd64.go; the Go code below is its reference
		if scale, ok := makeQxQuantsSIMD(x, nmax, L, qw); ok {
			return scale
		}
	}
	var maxv, amax float32
	for _, v := range x {
		if ax := abs32(v); ax > amax {
			amax, maxv = ax, v
		}
	}
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	var wA, wxA [maxN]float32
	w, wx := wA[:n], wxA[:n]
	if qw != nil {
		copy(w, qw[:n])
	} else {
		for i, v := range x {
			w[i] = float32(v * v)
		}
	}
	for i, v := range x {
		wx[i] = float32(w[i] * v) // ggml's w*x[i]*l is (w·x)·l
	}

	// The sums of every trial, indexed by is + 9, two trials per pass.
	var sumlx, suml2 [qxTrials]float32
	k := 0
	for ; k+1 < qxTrials; k += 2 {
		sumlx[k], suml2[k], sumlx[k+1], suml2[k+1] = qxSums2(x, w, wx,
			qxScale(k-9, nmax, maxv), qxScale(k-8, nmax, maxv), int32(nmax))
	}
	sumlx[k], suml2[k], _, _ = qxSums2(x, w, wx, qxScale(k-9, nmax, maxv), qxScale(k-9, nmax, maxv), int32(nmax))

	// ggml's choice, in ggml's order: is = 0, then −9..−1, 1..9.
	var scale float32
	if suml2[9] != 0 {
		scale = sumlx[9] / suml2[9]
	}
	best, bestK := scale*sumlx[9], 9
	for k := 0; k < qxTrials; k++ {
		if k == 9 {
			continue
		}
		slx, sl2 := sumlx[k], suml2[k]
		if sl2 > 0 && float32(slx*slx) > float32(best*sl2) {
			scale = slx / sl2
			best, bestK = scale*slx, k
		}
	}
	iscale := qxScale(bestK-9, nmax, maxv)
	for i, v := range x {
		L[i] = int8(qxLevel(iscale, v, int32(nmax)) + int32(nmax))
	}
	return scale
}

// qxLevel is ggml's level of x at inverse scale iscale: clamp(nearest_int(iscale·x), −nmax, nmax−1).
func qxLevel(iscale, x float32, nmax int32) int32 {
	l := int32(math.Float32bits(float32(iscale*x)+12582912)&0x007fffff) - 0x00400000
	if l < -nmax {
		l = -nmax
	}
	if l > nmax-1 {
		l = nmax - 1
	}
	return l
}

// qxSums2 computes Σ (w·x)·l and Σ (w·l)·l for the levels at the inverse scales sa and sb in
// one pass.
func qxSums2(x, w, wx []float32, sa, sb float32, nmax int32) (ax, a2, bx, b2 float32) {
	n := len(x)
	w, wx = w[:n], wx[:n]
	lo, hi := -nmax, nmax-1
	magic := roundMagic
	for i, v := range x {
		la := int32(math.Float32bits(float32(sa*v)+magic)&0x007fffff) - 0x00400000
		lb := int32(math.Float32bits(float32(sb*v)+magic)&0x007fffff) - 0x00400000
		if la < lo {
			la = lo
		}
		if la > hi {
			la = hi
		}
		if lb < lo {
			lb = lo
		}
		if lb > hi {
			lb = hi
		}
		fa, fb := float32(la), float32(lb)
		wi, wxi := w[i], wx[i]
		ax += float32(wxi * fa)
		bx += float32(wxi * fb)
		a2 += float32(float32(wi*fa) * fa)
		b2 += float32(float32(wi*fb) * fb)
	}
	return ax, a2, bx, b2
}
