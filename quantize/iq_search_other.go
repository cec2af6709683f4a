//go:build !amd64 || purego

package quantize

// iqNearestAVX512 is never called without the assembly (useSIMDSearch is false).
func iqNearestAVX512(s *[4]float32, x, w *float32, nb *iqCand, n int) int {
	panic("quantize: iqNearestAVX512 without assembly")
}

// iq1SSplitAVX512 is never called without the assembly (useSIMDSearch is false).
func iq1SSplitAVX512(sp *iq1SSplit, maxv float32) {
	panic("quantize: iq1SSplitAVX512 without assembly")
}
