//go:build unix

package safetensors

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps a whole file read-only. The mapping is advised MADV_RANDOM, so that reading
// the header does not pull the tensor data in behind it; Data asks for each tensor's pages
// (MADV_WILLNEED) when it is about to be used.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return []byte{}, nil // mmap rejects length 0; the header check reports the file
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(b, unix.MADV_RANDOM) // advice only: failure is harmless
	return b, nil
}

// unmapFile releases a mapping made by mapFile.
func unmapFile(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Munmap(b)
}

// advise passes advice about part of a mapping to the kernel. The range is widened to whole
// pages, as madvise requires. Errors are ignored: advice never changes results.
func advise(mapping []byte, off, n int64, willNeed bool) {
	if n <= 0 {
		return
	}
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	end := min(off+n, int64(len(mapping)))
	adv := unix.MADV_DONTNEED
	if willNeed {
		adv = unix.MADV_WILLNEED
	}
	_ = unix.Madvise(mapping[start:end], adv)
}
