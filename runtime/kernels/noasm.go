//go:build !amd64 || purego

package kernels

// asmImpls returns no implementation: this build has no assembly.
func asmImpls() []*implTable { return nil }
