//go:build amd64 && !purego

package kernels

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/gquant/gquant/internal/amxemu"
)

// TestAMXBF16Emulated runs the BF16 tile kernels on a CPU without AMX, as TestAMXEmulated
// does the integer ones: this test binary is started again, with the AMX implementation
// listed and the BF16 tiles enabled, under internal/amxemu, which carries out every tile
// instruction (TDPBF16PS as the SDM defines it, bit for bit what the hardware gives:
// amxemu's TestNativeMatchesEmulator); the packing's AVX512_BF16 conversions run natively.
// The first child runs TestAMXBF16Model, whose products must execute exactly the TDPBF16PS
// and LDTILECFG it prints; the second the self-check and the dispatch through the "amx"
// implementation (a pool's workers included).
func TestAMXBF16Emulated(t *testing.T) {
	switch {
	case os.Getenv(amxChildEnv) == "1":
		t.Skip("emulated child")
	case amxUsable():
		t.Skip("this CPU has AMX: the other tests run the tiles natively")
	case !hasImpl("avx512vnni") || !cpu.X86.HasAVX512BF16 || !cpu.X86.HasAVX512DQ:
		t.Skip("the packing of the BF16 tiles needs AVX512_BF16 (and DQ)")
	}
	run := func(pattern string) (string, amxemu.Stats) { return runEmulated(t, pattern) }
	out, st := run("^TestAMXBF16Model$")
	if !strings.Contains(out, "--- PASS: TestAMXBF16Model") {
		t.Fatalf("TestAMXBF16Model did not pass under the emulator:\n%s", out)
	}
	m := regexp.MustCompile(`amxbf16-expected tdpbf16ps=(\d+) ldtilecfg=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("child printed no expected counts:\n%s", out)
	}
	wantTiles, _ := strconv.Atoi(m[1])
	wantCalls, _ := strconv.Atoi(m[2])
	c := st.Counts
	if c["tdpbf16ps"] != wantTiles || c["ldtilecfg"] != wantCalls || c["tilerelease"] != wantCalls {
		t.Fatalf("emulated %v; the products need tdpbf16ps=%d, ldtilecfg=tilerelease=%d", c, wantTiles, wantCalls)
	}
	t.Logf("TestAMXBF16Model: %v", c)

	out, st = run("^(TestAMXBF16SelfCheck|TestAMXBF16Dispatch)$")
	for _, name := range []string{"TestAMXBF16SelfCheck", "TestAMXBF16Dispatch"} {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Fatalf("%s did not pass under the emulator:\n%s", name, out)
		}
	}
	if st.Counts["tdpbf16ps"] == 0 {
		t.Fatalf("the dispatch tests executed no TDPBF16PS: %v", st.Counts)
	}
	t.Logf("TestAMXBF16SelfCheck, TestAMXBF16Dispatch: %v", st.Counts)
}
