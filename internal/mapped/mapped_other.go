//go:build !unix

package mapped

import (
	"io"
	"os"
)

// Map reads the first size bytes of f where memory mapping is not available.
func Map(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// Unmap releases nothing: the buffer is garbage collected.
func Unmap([]byte) error { return nil }

// Random does nothing without memory mapping.
func Random([]byte) {}

// Advise does nothing without memory mapping.
func Advise([]byte, int64, int64, bool) {}

// Release does nothing: the file was read into memory.
func Release([]byte) {}
