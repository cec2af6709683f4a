//go:build !(linux && amd64)

package amxemu

import (
	"errors"
	"os/exec"
)

// run is the tracer; it exists on linux/amd64 only.
func run(*exec.Cmd, map[string]int) error {
	return errors.New("amxemu: Run needs linux/amd64")
}
