//go:build amd64 && !purego

package quantize

import (
	"os"

	"golang.org/x/sys/cpu"
)

// AVX-512 versions of the two searches that dominate the K-quant encoders: qkxSearch
// (make_qkx2_quants / make_qkx3_quants: Q2_K, Q4_K, Q5_K, imatrix Q4_1/Q5_1) and makeQxQuants
// (make_qx_quants: Q6_K, imatrix Q3_K/Q4_0/Q5_0). They compute bit for bit the float32 values
// of the Go code (and of ggml's C): every SIMD lane performs the operations of one scalar
// search in the same order, with separate multiplies and adds (no FMA), and ggml's
// magic-number nearest_int on integers. They vectorise across independent work, never across
// the elements of one sum, so no summation order changes:
//
//   - qkxSearch: lanes 0..7 are the 8 sub-blocks of a super-block at their trial t, lanes
//     8..15 the same sub-blocks at trial t+1, computed with the same min. Trial t is decided
//     first (strict < on the error, as in C); when it is kept its min replaces the old one, so
//     trial t+1 is recomputed in the next pass, otherwise trial t+1 is decided too and the
//     sub-block moves on by two. Each sub-block thus sees exactly ggml's sequence of
//     decisions, in about 14 passes instead of 22 (Q4_K).
//   - makeQxQuants: the 19 trial scales are independent until ggml's choice, so they are the
//     lanes (16 in a Z register, 3 in a Y register); the choice then runs in ggml's order.
//
// The assembly needs AVX-512 F, DQ, BW and VL. Building with -tags purego or setting
// GQUANT_NOASM=1 in the environment keeps the Go code.

func init() {
	if os.Getenv("GQUANT_NOASM") == "1" {
		return
	}
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL {
		useSIMDSearch = true
	}
}

// useSIMDSearch is set at init when the CPU has the instructions the kernels need (and
// GQUANT_NOASM=1 is not set): qkxSearch and makeQxQuants then call qkxSearchSIMD and
// makeQxQuantsSIMD.
var useSIMDSearch bool

// qkxLanes is the number of searches one call of the qkx kernel runs side by side.
const qkxLanes = 8

// qkxState is the memory of one call of qkxKernelAVX512 beyond its frame: parameters,
// per-search state and outputs. The assembly reaches its fields through the offsets in
// go_asm.h. Lane s of every vector is sub-block s.
type qkxState struct {
	// Outputs: scales and negated minimums.
	scale [qkxLanes]float32
	mins  [qkxLanes]float32
	// Per-search state of the kernel: the minimum in force, the maximum, Σw, Σw·x, the best
	// error, the inverse scale and minimum that produced the best levels, and the next trial.
	minv, maxv, sumW, sumX, best, kIscale, kMin [qkxLanes]float32
	t                                           [qkxLanes]int32
	// Parameters.
	n            int64   // elements per sub-block
	nmax         int32   // levels 0..nmax
	ntrials      int32   // trials 0..ntrials-1 (0 when nstep < 1)
	rmin, rdelta float32 // trial scale numerators rmin + rdelta·is + nmax
	useMad       int32   // error Σ w·|d| instead of Σ w·d²
}

// qkxKernelAVX512 runs the searches of the k ≤ 8 sub-blocks of st.n elements at x, with the
// weights at w, and writes their levels to L (k·n bytes) and their scales and negated
// minimums to st.scale and st.mins.
//
//go:noescape
func qkxKernelAVX512(st *qkxState, x, w *float32, L *uint8, k int)

// qkxSearchSIMD is qkxSearch on AVX-512: the sub-blocks go through the kernel eight at a
// time. It always handles the call (the shape checks are qkxSearch's).
func qkxSearchSIMD(x, w []float32, n int, L []uint8, scales, mins []float32, p qkxParams) bool {
	m := len(x) / n
	var st qkxState
	st.n, st.nmax = int64(n), int32(p.nmax)
	if p.nstep >= 1 {
		st.ntrials = int32(p.nstep + 1)
	}
	st.rmin, st.rdelta = p.rmin, p.rdelta
	if p.useMad {
		st.useMad = 1
	}
	for s0 := 0; s0 < m; s0 += qkxLanes {
		k := min(qkxLanes, m-s0)
		qkxKernelAVX512(&st, &x[s0*n], &w[s0*n], &L[s0*n], k)
		copy(scales[s0:s0+k], st.scale[:k])
		copy(mins[s0:s0+k], st.mins[:k])
	}
	return true
}

// qxNumer[nmax] holds the numerators of make_qx_quants's 19 inverse scales, indexed by is + 9:
// −(nmax + 0.1·is), and −nmax for is = 0 (see qxScale); padded to 24.
var qxNumer = func() (t [33][24]float32) {
	for nmax := 1; nmax <= 32; nmax++ {
		for k := 0; k < qxTrials; k++ {
			is := k - 9
			if is == 0 {
				t[nmax][k] = float32(-nmax)
			} else {
				t[nmax][k] = -(float32(nmax) + float32(0.1*float32(is)))
			}
		}
	}
	return t
}()

// qxState is the scratch memory of qxKernelAVX512.
type qxState struct {
	w, wx                [32]float32 // weights and weights·x of the elements
	iscale, sumlx, suml2 [24]float32 // inverse scale and sums of each trial (19 used)
	eps                  float32     // GROUP_MAX_EPS
}

// qxKernelAVX512 is makeQxQuants for 1 ≤ n ≤ 32 and 1 ≤ nmax ≤ 32 (numer = &qxNumer[nmax]);
// qw is nil for the weights x². The 19 trials run side by side, one per lane; the choice is
// made in ggml's order.
//
//go:noescape
func qxKernelAVX512(st *qxState, x, qw *float32, L *int8, n, nmax int, numer *[24]float32) float32

// makeQxQuantsSIMD is makeQxQuants on AVX-512; it reports false (leaving the work to the Go
// code) for a shape the kernel does not take.
func makeQxQuantsSIMD(x []float32, nmax int, L []int8, qw []float32) (float32, bool) {
	n := len(x)
	if nmax < 1 || nmax > 32 || n < 1 || n > 32 || len(L) < n || (qw != nil && len(qw) < n) {
		return 0, false
	}
	var st qxState
	st.eps = groupMaxEps
	var pw *float32
	if qw != nil {
		pw = &qw[0]
	}
	return qxKernelAVX512(&st, &x[0], pw, &L[0], n, nmax, &qxNumer[nmax]), true
}
