package kernels

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestKernelsEnv checks GQUANT_KERNELS in a fresh process (the implementation is chosen at
// start): a listed name is used, another one is reported on stderr and the best kept.
func TestKernelsEnv(t *testing.T) {
	if want := os.Getenv("GQUANT_TEST_WANT_IMPL"); want != "" {
		if Impl() != want {
			t.Fatalf("GQUANT_KERNELS=%s: implementation %s, want %s", os.Getenv("GQUANT_KERNELS"), Impl(), want)
		}
		return
	}
	best := Impls()[0]
	for _, c := range []struct{ env, want, stderr string }{
		{"generic", "generic", ""},
		{"tpu", best, `GQUANT_KERNELS=tpu: not available here`},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKernelsEnv$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GQUANT_KERNELS="+c.env, "GQUANT_TEST_WANT_IMPL="+c.want, "GQUANT_NOASM=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("GQUANT_KERNELS=%s: %v\n%s", c.env, err, out)
		}
		if c.stderr != "" && !strings.Contains(string(out), c.stderr) {
			t.Errorf("GQUANT_KERNELS=%s: no warning %q in\n%s", c.env, c.stderr, out)
		}
	}
}
