//go:build !amd64 || purego

package quantize

// gemmImpls lists the implementations this build can run, with a function that selects each.
func gemmImpls() map[string]func() {
	return map[string]func(){"go": useGemmGo}
}
