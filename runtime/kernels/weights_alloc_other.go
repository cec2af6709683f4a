//go:build !unix

package kernels

// mapAnon is not available: packed weights stay on the heap.
func mapAnon(int) []byte { return nil }

func unmapAnon([]byte) {}
