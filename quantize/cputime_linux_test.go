package quantize

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPUClock returns a clock of the CPU time of the calling thread and a function that
// releases the thread: benchmarks on a machine shared with other work time their calls with it
// (wall time counts the waits for a core). The goroutine stays locked to its thread until
// release is called.
func threadCPUClock() (now func() time.Duration, release func()) {
	runtime.LockOSThread()
	return func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			panic(err)
		}
		return time.Duration(ts.Nano())
	}, runtime.UnlockOSThread
}
