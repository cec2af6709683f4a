//go:build amd64 && !purego

package quantize

// iqNearestAVX512 is iqNearest's Go code (iq2_grid.go) on AVX-512, with the same result: it
// builds the term table, then sums sixteen candidates at once, one per lane, each in ggml's
// order (0 + t_0 + t_1 + … + t_7, separate VADDPS), and picks the first of the minima below
// FLT_MAX as the scalar loop does. It runs when useSIMDSearch is set (search_amd64.go);
// n ≥ 1.
//
//go:noescape
func iqNearestAVX512(s *[4]float32, x, w *float32, nb *iqCand, n int) int

// iq1SSplitAVX512 is iq1SSplit.search's Go code on AVX-512, with the same result: for each
// i1 the splits (i2, shift) go sixteen to a vector, lane 2·(i2 − chunk start) + s, computed
// with the Go code's operations in its order (separate VMULPS and VADDPS); the lanes that pass
// ggml's test against the best so far are then taken one at a time in ggml's order, the test
// redone for the later lanes after each update, so the decisions are ggml's.
//
//go:noescape
func iq1SSplitAVX512(sp *iq1SSplit, maxv float32)
