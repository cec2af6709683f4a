//go:build unix

package kernels

import "golang.org/x/sys/unix"

// mapAnon maps n bytes of private anonymous memory (nil when the system refuses).
func mapAnon(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

func unmapAnon(b []byte) { _ = unix.Munmap(b) }
