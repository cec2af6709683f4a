//go:build !amd64 || purego

package quantize

// Without the assembly (other architectures, or -tags purego) the searches run the Go code of
// qkx.go and qx.go.

// useSIMDSearch is false: qkxSearchSIMD and makeQxQuantsSIMD are never called.
var useSIMDSearch = false

func qkxSearchSIMD(x, w []float32, n int, L []uint8, scales, mins []float32, p qkxParams) bool {
	return false
}

func makeQxQuantsSIMD(x []float32, nmax int, L []int8, qw []float32) (float32, bool) {
	return 0, false
}
