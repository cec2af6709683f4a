package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing f's dirty pages to disk without waiting for them
// (sync_file_range with SYNC_FILE_RANGE_WRITE over the whole file). Errors are left to the
// flush of Commit, which reports them.
func startWriteback(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		})
	}
}
