package quantize

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestNoFusedMultiplyAdd compiles this package for amd64 v3 (where the Go compiler may fuse
// x*y+z into one FMA instruction) and fails when any FMA instruction appears: ggml's reference
// quantizers are built without FMA, so every fused product would be a latent byte difference
// that the vectors are too small to reveal. Fix a hit by rounding the product with an explicit
// float32(...) conversion.
func TestNoFusedMultiplyAdd(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the package; skipped in -short mode")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	cmd := exec.Command(gobin, "build", "-gcflags=-S", ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "GOAMD64=v3", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fma := regexp.MustCompile(`(?m)^.*\((.*\.go:\d+)\)\s+VF(N?)M(ADD|SUB)\w*.*$`)
	for _, m := range fma.FindAllStringSubmatch(string(out), -1) {
		t.Errorf("fused multiply-add at %s", m[1])
	}
	if !regexp.MustCompile(`MULSS`).Match(out) {
		t.Fatalf("no assembly listing in the go build output; cannot check")
	}
}
