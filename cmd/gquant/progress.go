package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/schollz/progressbar/v3"
)

// bar is a thread-safe progress bar over bytes on stderr.
type bar struct {
	mu sync.Mutex
	pb *progressbar.ProgressBar
}

func newBar(desc string) *bar { return &bar{pb: nil} }

func (b *bar) update(done, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pb == nil {
		b.pb = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100_000_000),
			progressbar.OptionClearOnFinish())
	}
	_ = b.pb.Set64(done)
}

func (b *bar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}

// parseSize reads sizes like "500M", "2G", "1048576".
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	u := strings.ToUpper(s)
	switch {
	case strings.HasSuffix(u, "G"):
		mult, u = 1<<30, u[:len(u)-1]
	case strings.HasSuffix(u, "M"):
		mult, u = 1<<20, u[:len(u)-1]
	case strings.HasSuffix(u, "K"):
		mult, u = 1<<10, u[:len(u)-1]
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size (like 500M or 2G)", s)
	}
	return n * mult, nil
}
