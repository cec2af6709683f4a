//go:build linux && amd64

package amxemu_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gquant/gquant/internal/amxemu"
)

// runChild re-executes this test binary as TestChild with the given scenario under
// amxemu.Run. It returns the stats, Run's error, the child's output and its process state.
func runChild(t *testing.T, scenario string) (amxemu.Stats, error, string, *os.ProcessState) {
	t.Helper()
	if amxemu.NativeAMX() {
		t.Skip("this CPU has AMX: the harness cannot trap LDTILECFG here (TestNativeMatchesEmulator compares the emulator with the hardware instead)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+scenario)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	st, err := amxemu.Run(cmd)
	if ctx.Err() != nil {
		t.Fatalf("child %q timed out; output:\n%s", scenario, out.String())
	}
	return st, err, out.String(), cmd.ProcessState
}

func TestRunGemm(t *testing.T) {
	st, err, out, _ := runChild(t, "gemm")
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "--- PASS: TestChild") {
		t.Fatalf("child did not run TestChild:\n%s", out)
	}
	const T = gemmTrials
	want := map[string]int{
		// 5 Gemm functions x T, LoadBroadcast, ZeroTile, LoadConfigInline.
		"ldtilecfg": 5*T + 3,
		// 3 per Gemm function except GemmUSD (2 + 1 tileloaddt1), LoadBroadcast, ZeroTile.
		"tileloadd":   14*T + 2,
		"tileloaddt1": T,
		"tilestored":  5*T + 2,
		"tilerelease": 5*T + 3,
		"tdpbssd":     T,
		"tdpbsud":     T,
		"tdpbusd":     T,
		"tdpbuud":     T,
		"tdpbf16ps":   T,
		"tilezero":    1,
		"sttilecfg":   2,
	}
	if !maps.Equal(st.Counts, want) {
		t.Errorf("counts %v, want %v", st.Counts, want)
	}
}

func TestRunThreads(t *testing.T) {
	st, err, out, _ := runChild(t, "threads")
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	n := threadCount * threadRounds
	want := map[string]int{"ldtilecfg": n, "tileloadd": 3 * n, "tdpbssd": n, "tilestored": n, "tilerelease": n}
	if !maps.Equal(st.Counts, want) {
		t.Errorf("counts %v, want %v", st.Counts, want)
	}
}

// TestRunConcurrent runs two traced children at once from different goroutines.
func TestRunConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err, out, _ := runChild(t, "threads")
			if err == nil && st.Counts["tdpbssd"] != threadCount*threadRounds {
				err = fmt.Errorf("counts %v", st.Counts)
			}
			if err != nil {
				errs[i] = fmt.Errorf("%v\n%s", err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// codeRange returns the code range of amxtest function fn that the child printed.
func codeRange(t *testing.T, out, fn string) (lo, hi uint64) {
	t.Helper()
	m := regexp.MustCompile(`CODE ` + fn + ` 0x([0-9a-f]+) 0x([0-9a-f]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("child did not print the code range of %s:\n%s", fn, out)
	}
	lo, _ = strconv.ParseUint(m[1], 16, 64)
	hi, _ = strconv.ParseUint(m[2], 16, 64)
	return lo, hi
}

var ripRE = regexp.MustCompile(`at rip 0x([0-9a-f]+):`)

func TestRunFaults(t *testing.T) {
	for _, v := range []struct {
		scenario, fn string
		want         []string // substrings of the error
	}{
		{"unconfigured", "DotSSD", []string{"tdpbssd at rip", "#UD: tiles not configured"}},
		{"shape", "GemmSSD", []string{"tdpbssd at rip", "#UD: shape mismatch: A tmm1 colsb/4 4 != B tmm2 rows 3"}},
		{"badconfig", "LoadConfig", []string{"ldtilecfg at rip", "#GP", "palette_id 2"}},
	} {
		t.Run(v.scenario, func(t *testing.T) {
			st, err, out, ps := runChild(t, v.scenario)
			if err == nil {
				t.Fatalf("Run succeeded; output:\n%s", out)
			}
			msg := err.Error()
			for _, w := range v.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			m := ripRE.FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("error %q names no rip", msg)
			}
			rip, _ := strconv.ParseUint(m[1], 16, 64)
			if lo, hi := codeRange(t, out, v.fn); rip < lo || rip >= hi {
				t.Errorf("rip 0x%x outside amxtest.%s [0x%x, 0x%x)", rip, v.fn, lo, hi)
			}
			if ps == nil {
				t.Fatal("child not reaped")
			}
			if ws, ok := ps.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("child status %v, want killed by SIGKILL", ps)
			}
			if n := st.Counts["tdpbssd"]; n != 0 {
				t.Errorf("faulting tdpbssd counted %d times", n)
			}
		})
	}
}

// TestRunForwardsNonAMXSigill: a ud2 is not emulated; the child dies of SIGILL as it would
// without the harness (the Go runtime reports it and exits with status 2).
func TestRunForwardsNonAMXSigill(t *testing.T) {
	st, err, out, _ := runChild(t, "ud2")
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run error %v (%T), want *exec.ExitError; output:\n%s", err, err, out)
	}
	if ee.ExitCode() != 2 || !strings.Contains(out, "SIGILL") {
		t.Errorf("exit code %d, output:\n%s", ee.ExitCode(), out)
	}
	if len(st.Counts) != 0 {
		t.Errorf("counts %v, want none", st.Counts)
	}
}

func TestRunExitStatus(t *testing.T) {
	_, err, out, _ := runChild(t, "exit")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != childExitCode {
		t.Fatalf("Run error %v, want exit status %d; output:\n%s", err, childExitCode, out)
	}
}

// TestRunRefusesNativeAMX: on a CPU with AMX, Run refuses before starting anything.
func TestRunRefusesNativeAMX(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	_, err := amxemu.Run(cmd)
	if amxemu.NativeAMX() {
		if !errors.Is(err, amxemu.ErrNativeAMX) || cmd.Process != nil {
			t.Fatalf("Run on an AMX CPU: error %v, process %v; want ErrNativeAMX and nothing started", err, cmd.Process)
		}
		return
	}
	if err != nil {
		t.Fatalf("Run of a test binary that runs nothing: %v", err)
	}
}

func TestRunStartError(t *testing.T) {
	cmd := exec.Command("/nonexistent/amxemu-test-binary")
	if _, err := amxemu.Run(cmd); err == nil {
		t.Fatal("Run of a missing binary succeeded")
	}
}
