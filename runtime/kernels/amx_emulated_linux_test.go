//go:build amd64 && !purego

package kernels

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gquant/gquant/internal/amxemu"
)

// TestAMXEmulated runs the AMX implementation on a CPU without AMX: this test binary is
// started again, with the AMX implementation listed, under internal/amxemu, which traps
// every tile instruction (#UD here) and carries it out as the Intel SDM defines it; the rest
// of the code, AVX-512 included, runs natively. The child runs TestAMXProducts and the
// batch-invariance and asm-versus-generic tests, all of which now also cover "amx"; the
// emulator must have executed exactly the TDPBSSD and LDTILECFG the products need. A third
// child runs the gqf group matrices' tile tests.
func TestAMXEmulated(t *testing.T) {
	switch {
	case os.Getenv(amxChildEnv) == "1":
		t.Skip("emulated child")
	case amxUsable():
		t.Skip("this CPU has AMX: the other tests run the tiles natively")
	case !hasImpl("avx512vnni"):
		t.Skip("the AMX kernel's float part needs AVX-512")
	}
	run := func(pattern string) (string, amxemu.Stats) { return runEmulated(t, pattern) }
	out, st := run("^TestAMXProducts$")
	if !strings.Contains(out, "--- PASS: TestAMXProducts") {
		t.Fatalf("TestAMXProducts did not pass under the emulator:\n%s", out)
	}
	m := regexp.MustCompile(`amx-expected tdpbssd=(\d+) ldtilecfg=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("child printed no expected counts:\n%s", out)
	}
	wantTiles, _ := strconv.Atoi(m[1])
	wantCalls, _ := strconv.Atoi(m[2])
	c := st.Counts
	if c["tdpbssd"] != wantTiles || c["ldtilecfg"] != wantCalls || c["tilerelease"] != wantCalls {
		t.Fatalf("emulated %v; the products need tdpbssd=%d, ldtilecfg=tilerelease=%d", c, wantTiles, wantCalls)
	}
	t.Logf("TestAMXProducts: %v", c)

	out, st = run("^(TestBatchInvariance|TestAsmMatchesGeneric)$")
	for _, name := range []string{"TestBatchInvariance/amx", "TestBatchInvariance", "TestAsmMatchesGeneric"} {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Fatalf("%s did not pass under the emulator:\n%s", name, out)
		}
	}
	if st.Counts["tdpbssd"] == 0 {
		t.Fatalf("batch-invariance tests executed no tile product: %v", st.Counts)
	}
	t.Logf("TestBatchInvariance, TestAsmMatchesGeneric: %v", st.Counts)

	// The gqf group kernels' tiles (TDPBSSD and TDPBUSD), their self-check included.
	out, st = run("^(TestAMXGroupProducts|TestAMXGroupSelfCheck)$")
	for _, name := range []string{"TestAMXGroupProducts", "TestAMXGroupSelfCheck"} {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Fatalf("%s did not pass under the emulator:\n%s", name, out)
		}
	}
	if st.Counts["tdpbusd"] == 0 || st.Counts["tdpbssd"] == 0 {
		t.Fatalf("group tile tests executed no TDPBUSD or TDPBSSD: %v", st.Counts)
	}
	t.Logf("TestAMXGroupProducts, TestAMXGroupSelfCheck: %v", st.Counts)
}

// runEmulated runs this test binary's tests matching pattern in a child under the AMX
// emulator and returns the child's output and what the emulator executed.
func runEmulated(t *testing.T, pattern string) (string, amxemu.Stats) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), amxChildEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	st, err := amxemu.Run(cmd)
	if err != nil {
		t.Fatalf("child %s under the AMX emulator: %v\n%s", pattern, err, out.String())
	}
	return out.String(), st
}
