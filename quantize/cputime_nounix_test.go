//go:build !unix

package quantize

import "time"

// processCPUTime is unavailable here: the benchmarks fall back to wall time.
func processCPUTime() (time.Duration, bool) { return 0, false }
