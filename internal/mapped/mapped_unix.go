//go:build unix

package mapped

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Map maps the first size bytes of f read-only (size 0 gives an empty slice: mmap refuses
// length 0, and the caller's header check reports the file). f may be closed once Map
// returns; Unmap releases the mapping.
func Map(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return []byte{}, nil
	}
	if int64(int(size)) != size {
		return nil, unix.EFBIG
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	register(b, f.Name())
	return b, nil
}

// Unmap releases a mapping made by Map.
func Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	// The range stays registered until a new mapping overlaps it (see registry).
	return unix.Munmap(b)
}

// Random advises MADV_RANDOM for a whole mapping, so that reading a header does not pull
// the data behind it in (Advise then asks for parts as they are needed).
func Random(mapping []byte) {
	if len(mapping) > 0 {
		_ = unix.Madvise(mapping, unix.MADV_RANDOM) // advice only: failure is harmless
	}
}

// Advise passes advice about mapping[off:off+n] to the kernel: MADV_WILLNEED (read it soon) or
// MADV_DONTNEED (drop its pages from the resident set; they stay in the page cache). The range
// is widened to whole pages, as madvise requires. Errors are ignored: advice never changes
// results.
func Advise(mapping []byte, off, n int64, willNeed bool) {
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

// Release drops the pages wholly inside b, a part of a mapping, from the process's resident
// set (they stay in the page cache and are read again if touched).
func Release(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}
