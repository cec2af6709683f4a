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

// TestAccelerated checks the report the runtime uses to decide what to widen to F32: the
// generic implementation accelerates nothing; the assembly one accelerates the float types
// in both modes, Q3_K with quantized activations (GEMV/GEMM kernels) but not with float ones
// (no float-activation kernel for it), and Q4_K in both; the i-quants and ternary types as Q3_K.
func TestAccelerated(t *testing.T) {
	for _, name := range Impls() {
		restore, _ := SetImpl(name)
		for _, c := range []struct {
			t    WType
			mode ActMode
			asm  bool
		}{
			{F32, ActDefault, true}, {BF16, ActQuant, true}, {Q3_K, ActDefault, true},
			{Q3_K, ActQuant, true}, {Q3_K, ActFloat, false}, {Q4_K, ActFloat, true}, {WType(99), ActDefault, false},
			{IQ2_XXS, ActDefault, true}, {IQ1_M, ActQuant, true}, {IQ3_S, ActFloat, false}, {TQ1_0, ActQuant, true},
		} {
			if got, want := Accelerated(c.t, c.mode), c.asm && name != "generic"; got != want {
				t.Errorf("%s: Accelerated(%v, %v) = %v, want %v", name, c.t, c.mode, got, want)
			}
		}
		restore()
	}
}
