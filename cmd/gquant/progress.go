package main

import (
	"fmt"
	"os"
	"sync"

	"github.com/schollz/progressbar/v3"

	"github.com/gquant/gquant/internal/size"
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

// parseSize reads a size flag ("" is unset: 0) with internal/size: K, M, G decimal as
// llama-gguf-split reads them, KiB, MiB, GiB binary; 0 is not a size.
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := size.Parse(s)
	if err == nil && n == 0 {
		err = fmt.Errorf("%q is not a size (like 500M or 2G)", s)
	}
	return n, err
}
