// Command gquant converts, calibrates, quantizes, runs and verifies LLM checkpoints.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gquant/gquant/internal/atomicfile"
)

func main() {
	// SIGINT, SIGTERM or SIGHUP: remove this run's temporary and committed outputs (an
	// interrupted run leaves nothing behind), then exit 128+signal as a shell does.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		atomicfile.Interrupt()
		fmt.Fprintf(os.Stderr, "gquant: interrupted (%v): outputs removed\n", s)
		code := 130
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		os.Exit(code)
	}()
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
