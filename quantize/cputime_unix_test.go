//go:build unix

package quantize

import (
	"syscall"
	"time"
)

// processCPUTime is the user and system CPU time of this process so far: benchmarks that
// compare with a baseline measured by another process use it rather than wall time, which on a
// shared machine also counts the time other processes hold the cores.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
