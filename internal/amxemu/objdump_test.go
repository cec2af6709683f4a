package amxemu

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// disasmLine is one instruction as GNU objdump prints it.
type disasmLine struct {
	addr uint64
	text string // normalized: comment removed, runs of blanks collapsed
}

var objdumpLineRE = regexp.MustCompile(`^\s*([0-9a-f]+):\t(.*)$`)

// objdump runs GNU objdump (AT&T syntax) with args and returns the instructions it lists. The
// test is skipped when objdump is not installed.
func objdump(t testing.TB, args ...string) []disasmLine {
	t.Helper()
	path, err := exec.LookPath("objdump")
	if err != nil {
		t.Skipf("GNU objdump not installed (%v): cannot cross-check the encodings", err)
	}
	out, err := exec.Command(path, append([]string{"-w", "--no-show-raw-insn"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var lines []disasmLine
	for _, l := range strings.Split(string(out), "\n") {
		m := objdumpLineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		addr, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			continue
		}
		text := m[2]
		if i := strings.Index(text, "#"); i >= 0 {
			text = text[:i]
		}
		lines = append(lines, disasmLine{addr, strings.Join(strings.Fields(text), " ")})
	}
	return lines
}

// objdumpRaw disassembles raw x86-64 machine code.
func objdumpRaw(t testing.TB, code []byte) []disasmLine {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the host's objdump may not know x86-64")
	}
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Skipf("GNU objdump not installed (%v): cannot cross-check the encodings", err)
	}
	f := filepath.Join(t.TempDir(), "code.bin")
	if err := os.WriteFile(f, code, 0o644); err != nil {
		t.Fatal(err)
	}
	return objdump(t, "-D", "-z", "-b", "binary", "-m", "i386:x86-64", f)
}
