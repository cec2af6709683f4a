//go:build amd64 && !purego

package quantize

import "golang.org/x/sys/cpu"

// gemmImpls lists the implementations this CPU can run, with a function that selects each.
func gemmImpls() map[string]func() {
	m := map[string]func(){"go": useGemmGo}
	if cpu.X86.HasAVX2 {
		m["avx2"] = useGemmAVX2
	}
	if cpu.X86.HasAVX512F {
		m["avx512"] = useGemmAVX512
	}
	return m
}
