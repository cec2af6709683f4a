//go:build !unix

package safetensors

import (
	"io"
	"os"
)

// mapFile reads the whole file where memory mapping is not available.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	_, err := io.ReadFull(f, b)
	return b, err
}

// unmapFile releases nothing: the buffer is garbage collected.
func unmapFile([]byte) error { return nil }

// advise is a no-op without memory mapping.
func advise([]byte, int64, int64, bool) {}
