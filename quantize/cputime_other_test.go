//go:build !linux

package quantize

import "time"

// threadCPUClock falls back to wall time where the thread CPU clock is not wired up.
func threadCPUClock() (now func() time.Duration, release func()) {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }, func() {}
}
