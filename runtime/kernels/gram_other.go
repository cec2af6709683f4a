//go:build !amd64 || purego

package kernels

// gramFor returns the Gram implementation of kernel implementation im: without assembly,
// the generic one.
func gramFor(*implTable) gramImpl { return gramGo }

// gramImpls returns the Gram implementations this build can run: the generic one.
func gramImpls() []gramImpl { return []gramImpl{gramGo} }
