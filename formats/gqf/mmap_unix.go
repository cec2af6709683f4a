//go:build unix

package gqf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps size bytes of f read-only and returns the bytes and the function that unmaps
// them.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
