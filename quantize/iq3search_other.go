//go:build !amd64 || purego

package quantize

// Without the assembly the IQ3 trials run the Go code of iq3grid.go.

// trialsSIMD is never called: useSIMDSearch is false in this build.
func (lat *iq3Lattice) trialsSIMD(b *iq3Block) { panic("quantize: no SIMD IQ3 search in this build") }
