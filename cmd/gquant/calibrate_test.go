package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/imatrix"
	"github.com/gquant/gquant/formats/stats"
)

const (
	calModel  = "../../testdata/models/stories260k"
	calCorpus = "../../calibrate/testdata/calib-head.txt"
)

// One run writes the statistics, the imatrix and the w8a16 encodings; each reads back; a rerun
// without --force is refused; --stats reuses the statistics and gives the same encodings.
func TestCalibrateCLI(t *testing.T) {
	dir := t.TempDir()
	st, im, enc := filepath.Join(dir, "s.stats"), filepath.Join(dir, "i.gguf"), filepath.Join(dir, "e.json")
	args := []string{"calibrate", calModel, "--corpus", calCorpus, "--ctx", "64", "--tokens", "128", "--threads", "1",
		"-o", st, "--imatrix", im, "--w8a16", "--encodings", enc}
	code, stdout, stderr := run(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout != "" || !strings.Contains(stderr, "calibrated on 128 tokens") || !strings.Contains(stderr, "tokens/s") {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	s, err := stats.Read(st)
	if err != nil {
		t.Fatal(err)
	}
	if s.Meta.Tokens != 128 || s.Meta.Ctx != 64 || len(s.Acts) == 0 {
		t.Errorf("stats meta %+v, %d activations", s.Meta, len(s.Acts))
	}
	if m, err := imatrix.Read(im); err != nil || len(m.Entries) != 35 {
		t.Errorf("imatrix: %v", err)
	}
	first, err := os.ReadFile(enc)
	if err != nil || !strings.Contains(string(first), `"version": "1.0.0"`) {
		t.Fatalf("encodings: %v", err)
	}

	code, _, stderr = run(args...)
	assertExit(t, code, exitError, stderr, "output exists (use --force to overwrite)")

	enc2 := filepath.Join(dir, "e2.json")
	code, _, stderr = run("calibrate", calModel, "--stats", st, "--w8a16", "--encodings", enc2, "-q")
	if code != 0 || stderr != "" {
		t.Fatalf("--stats: exit %d: %s", code, stderr)
	}
	if again, _ := os.ReadFile(enc2); string(again) != string(first) {
		t.Error("encodings from --stats differ from those of the run")
	}
}

// Bad statistics (NaN, another model) are refused with one line before anything is written.
func TestCalibrateRejectsBadStats(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "s.stats")
	if code, _, stderr := run("calibrate", calModel, "--corpus", calCorpus, "--ctx", "64", "--tokens", "64", "-o", st, "-q"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Poison Σx² of one weight in the file: its in_sum2 tensor holds float64s; overwrite the
	// first with a NaN (0x7ff8000000000001 little-endian).
	data, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	s, err := stats.Read(st)
	if err != nil {
		t.Fatal(err)
	}
	want := s.LinearFor("blk.0.attn_output.weight").Sum2[0]
	poisoned := replaceFloat64(t, data, want)
	nanFile := filepath.Join(dir, "nan.stats")
	if err := os.WriteFile(nanFile, poisoned, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, _, stderr := run("calibrate", calModel, "--stats", nanFile, "--w8a16", "--encodings", filepath.Join(out, "e.json"), "--imatrix", filepath.Join(out, "i.gguf"))
	assertOneLineError(t, code, stderr, nanFile+": blk.0.attn_output.weight: Σx²[0] = NaN", out)

	// Statistics of stories260k do not fit stories3m.
	code, _, stderr = run("calibrate", "../../testdata/models/stories3m", "--stats", st, "--w8a16", "--encodings", filepath.Join(out, "e.json"))
	assertOneLineError(t, code, stderr, st+": model: collected on stories260k", out)

	code, _, stderr = run("calibrate", calModel, "--corpus", calCorpus, "--encodings", filepath.Join(out, "e.json"))
	assertExit(t, code, exitUsage, stderr, "--encodings needs --w8a16")
	code, _, stderr = run("calibrate", calModel, "--corpus", calCorpus, "--imatrix", filepath.Join(out, "i.gguf"), "--tokens", "100000000")
	assertOneLineError(t, code, stderr, "fewer than the 100000000 asked for", out)
}

// replaceFloat64 replaces the one occurrence of v's bytes in data with a NaN.
func replaceFloat64(t *testing.T, data []byte, v float64) []byte {
	t.Helper()
	old := binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
	if n := bytes.Count(data, old); n != 1 {
		t.Fatalf("Σx² value %g occurs %d times in the file", v, n)
	}
	nan := binary.LittleEndian.AppendUint64(nil, 0x7ff8000000000001)
	return bytes.Replace(data, old, nan, 1)
}

// assertExit checks an exit code and that stderr mentions want.
func assertExit(t *testing.T, code, wantCode int, stderr, want string) {
	t.Helper()
	if code != wantCode || !strings.Contains(stderr, want) {
		t.Errorf("exit %d (want %d), stderr %q (want %q)", code, wantCode, stderr, want)
	}
}

// --linear-only -o records the linear inputs' statistics only: GPTQ from it writes the same
// tensors as from a full run's statistics, gqf's QNN schemes refuse it for want of activation
// ranges, and it does not merge with a full shard.
func TestCalibrateLinearOnly(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	cal := func(out string, extra ...string) {
		t.Helper()
		args := append([]string{"calibrate", calModel, "--corpus", calCorpus, "--ctx", "64", "--tokens", "256", "--threads", "1", "--hessian", "-q", "-o", out}, extra...)
		if code, _, stderr := run(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	cal(p("lin.stats"), "--linear-only")
	cal(p("full.stats"))
	lin, err := stats.Read(p("lin.stats"))
	if err != nil {
		t.Fatal(err)
	}
	full, err := stats.Read(p("full.stats"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Acts) != 0 || len(full.Acts) == 0 || len(lin.Linear) != len(full.Linear) {
		t.Fatalf("--linear-only: %d activations and %d linear inputs; full run %d and %d", len(lin.Acts), len(lin.Linear), len(full.Acts), len(full.Linear))
	}
	tensors := func(path string) map[string]string {
		t.Helper()
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out := map[string]string{}
		for i, ti := range f.Tensors {
			out[ti.Name] = string(f.TensorData(i))
		}
		return out
	}
	for _, s := range []string{"lin", "full"} {
		if code, _, stderr := run("convert", calModel, "--scheme", "q4_0", "--method", "gptq", "--stats", p(s+".stats"), "-q", "-o", p(s+".gguf")); code != 0 {
			t.Fatalf("gptq from %s: exit %d: %s", s, code, stderr)
		}
	}
	a, b := tensors(p("lin.gguf")), tensors(p("full.gguf"))
	if len(a) != len(b) {
		t.Fatalf("%d tensors from --linear-only statistics, %d from the full run's", len(a), len(b))
	}
	for name, data := range b {
		if a[name] != data {
			t.Errorf("%s: GPTQ from --linear-only statistics differs from the full run's", name)
		}
	}
	code, _, stderr := run("convert", calModel, "--format", "gqf", "--scheme", "w8a16", "--stats", p("lin.stats"), "-o", p("w.gqf"))
	assertExit(t, code, exitError, stderr, "no activation statistics")
	code, _, stderr = run("calibrate", calModel, "--corpus", calCorpus, "--linear-only", "--w8a16", "--encodings", p("e.json"))
	assertExit(t, code, exitUsage, stderr, "--linear-only records no activation ranges")
	// Hessians go to a statistics file only: without -o they would be computed and dropped.
	code, _, stderr = run("calibrate", calModel, "--corpus", calCorpus, "--hessian", "--imatrix", p("h.gguf"))
	assertExit(t, code, exitUsage, stderr, "--hessian: the Hessians are written to -o STATS only")
	if _, err := os.Stat(p("h.gguf")); err == nil {
		t.Error("calibrate --hessian without -o wrote its imatrix")
	}

	for i, extra := range [][]string{{"--linear-only"}, nil} {
		args := append([]string{"calibrate", calModel, "--corpus", calCorpus, "--ctx", "64", "--tokens", "256", "-q",
			"--shard", fmt.Sprintf("%d/2", i), "-o", p(fmt.Sprintf("s%d.stats", i))}, extra...)
		if code, _, stderr := run(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	code, _, stderr = run("stats", "merge", p("s0.stats"), p("s1.stats"), "-o", p("m.stats"))
	assertExit(t, code, exitError, stderr, "(calibrate --linear-only) and of every activation do not merge")
}
