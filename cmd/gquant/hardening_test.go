package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gquant/gquant/formats/gguf"
)

const (
	stories260k = "../../testdata/models/stories260k"
	stories3m   = "../../testdata/models/stories3m"
	evalCorpus  = "../../testdata/corpora/tinystories-eval.txt"
	calibCorpus = "../../testdata/corpora/tinystories-calib.txt"
)

// TestMain lets a test run this binary as gquant itself (GQUANT_RUN_MAIN=1), for what needs a
// real process: signals.
func TestMain(m *testing.M) {
	if os.Getenv("GQUANT_RUN_MAIN") == "1" {
		os.Args = append([]string{"gquant"}, os.Args[1:]...)
		main()
	}
	os.Exit(m.Run())
}

// startChild runs this test binary as gquant with args (see TestMain), stderr captured, and
// returns once ready(pid) holds: the run is under way. It fails the test when ready does not
// hold within 60 s.
func startChild(t *testing.T, ready func(pid int) bool, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GQUANT_RUN_MAIN=1")
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); !ready(cmd.Process.Pid); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("gquant %v: not under way after 60 s (stderr %q)", args, stderr.String())
		}
	}
	return cmd, stderr
}

// copyModel copies a bundled model folder, so that a test may try to destroy it.
func copyModel(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// sameBytes checks that path still holds want.
func sameBytes(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s changed (%v)", path, err)
	}
}

// No output may be one of the inputs, even with --force, under any name.
func TestOutputIsNeverAnInput(t *testing.T) {
	model := copyModel(t, stories260k)
	weights := filepath.Join(model, "model.safetensors")
	orig, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	corpus := filepath.Join(dir, "calib.txt")
	b, _ := os.ReadFile(calibCorpus)
	os.WriteFile(corpus, b, 0o644)
	link := filepath.Join(dir, "link.safetensors")
	os.Symlink(weights, link)
	gqfFile := filepath.Join(dir, "m.gqf")
	if code, _, e := run("convert", model, "--format", "gqf", "--scheme", "f16", "-o", gqfFile, "-q"); code != exitOK {
		t.Fatal(e)
	}
	gqfBytes, _ := os.ReadFile(gqfFile)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"convert over its weights", []string{"convert", model, "-o", weights, "--force"}},
		{"convert over a link to its weights", []string{"convert", model, "-o", link, "--force"}},
		{"convert over its config", []string{"convert", model, "-o", filepath.Join(model, "config.json"), "--force"}},
		{"convert --json over its weights", []string{"convert", model, "-o", filepath.Join(dir, "x.gguf"), "--json", weights, "--force"}},
		{"calibrate over its corpus", []string{"calibrate", model, "--corpus", corpus, "-o", corpus, "--force"}},
		{"export over its input", []string{"export", gqfFile, "--to", "onnx", "-o", gqfFile, "--force"}},
		{"verify --json over the artifact", []string{"verify", gqfFile, "--ref", model, "--corpus", corpus, "--json", gqfFile, "--force"}},
		{"verify --plot over the corpus", []string{"verify", gqfFile, "--ref", model, "--corpus", corpus, "--plot", corpus, "--force"}},
		{"verify two outputs in one file", []string{"verify", gqfFile, "--ref", model, "--corpus", corpus, "--json", filepath.Join(dir, "r"), "--plot", filepath.Join(dir, "r")}},
	} {
		code, _, stderr := run(c.args...)
		if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "of this run") {
			t.Errorf("%s: exit %d, %q", c.name, code, stderr)
		}
	}
	sameBytes(t, weights, orig)
	sameBytes(t, corpus, b)
	sameBytes(t, gqfFile, gqfBytes)
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link is gone")
	}
	// Writing into the model's folder under another name stays allowed (model repos do it).
	if code, _, e := run("convert", model, "-o", filepath.Join(model, "m-q8_0.gguf"), "--scheme", "q8_0", "-q"); code != exitOK {
		t.Errorf("an output beside the weights: %s", e)
	}
}

// --json FILE is the same in every verb; - prints on stdout; a symlinked FILE stays a link.
func TestJSONFlag(t *testing.T) {
	dir := t.TempDir()
	gg := filepath.Join(dir, "m.gguf")
	if code, _, e := run("convert", stories260k, "--scheme", "q8_0", "-o", gg, "-q"); code != exitOK {
		t.Fatal(e)
	}
	code, out, e := run("inspect", gg, "--json", "-")
	var v map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil || v["format"] != "gguf" {
		t.Fatalf("inspect --json -: exit %d, %s, stdout %.100q", code, e, out)
	}
	real := filepath.Join(dir, "real.json")
	os.WriteFile(real, []byte("old"), 0o644)
	link := filepath.Join(dir, "report.json")
	if err := os.Symlink("real.json", link); err != nil {
		t.Skip("no symbolic links")
	}
	if code, _, e := run("inspect", gg, "--json", link); code != exitError || !strings.Contains(e, "output exists") {
		t.Errorf("an existing --json target needs --force: exit %d %s", code, e)
	}
	os.Remove(real) // a dangling link: its target is created
	if code, out, e := run("inspect", gg, "--json", link); code != exitOK || out != "" {
		t.Fatalf("inspect --json FILE: exit %d, %s, stdout %q", code, e, out)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("--json replaced the symbolic link")
	}
	if b, err := os.ReadFile(real); err != nil || json.Unmarshal(b, &v) != nil {
		t.Errorf("the link's target holds no report: %v", err)
	}
	// verify --json -: the report on stdout, the text on stderr.
	code, out, e = run("verify", gg, "--ref", stories260k, "--corpus", evalCorpus, "--ctx", "64", "--chunks", "2",
		"--gen", "2", "--json", "-")
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil || v["schema"] == nil || !strings.Contains(e, "logits SNR") {
		t.Errorf("verify --json -: exit %d, stderr %q, stdout %.200q", code, e, out)
	}
	// The flag needs its value.
	if code, _, _ := run("inspect", gg, "--json"); code != exitUsage {
		t.Errorf("--json without FILE: exit %d, want 2", code)
	}
}

// Bad flag values are usage errors (exit 2) with one line naming the flag, before any work.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.gqf")
	for _, args := range [][]string{
		{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--group-size", "7", "-o", out},
		{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--keep", "((", "-o", out},
		{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--group-size", "0", "-o", out},
		{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--method", "gptq", "-o", out},
		{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--method", "awq", "--corpus", calibCorpus, "--tokens", "-1", "-o", out},
		{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--method", "rtn", "--ctx", "64", "-o", out},
		{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--method", "gptq", "--corpus", calibCorpus, "--tokens", "-1", "-o", out},
		{"convert", stories260k, "--format", "gqf", "--scheme", "w8a16", "--range", "percentile", "--percentile", "150", "--corpus", calibCorpus, "-o", out},
		{"convert", stories260k, "--scheme", "q8_0", "--threads", "-1", "-o", out},
		{"convert", stories260k, "--scheme", "q8_0", "--split-max-size", "1000", "-o", out},
		{"convert", stories260k, "--scheme", "q8_0", "--split-max-size", "99999999999999G", "-o", out},
		{"convert", stories260k, "--scheme", "q8_0", "-o", "-"},
		{"convert", stories260k, "--target-bpw", "4", "--scheme", "q4_k_m", "-o", out},
		{"convert", stories260k, "--target-bpw", "4", "--target-size", "1M", "-o", out},
		{"convert", stories260k, "--target-bpw", "-1", "-o", out},
		{"convert", stories260k, "--target-bpw", "4", "--format", "gqf", "-o", out},
		{"convert", stories260k, "--target-size", "1.5G", "-o", out},
		{"convert", stories260k, "--target-bpw", "4", "-o", out},
		{"convert", stories260k, "--target-bpw", "4", "--corpus", calibCorpus, "--tokens", "512", "-o", out},
		{"convert", stories260k, "--target-bpw", "4", "--chunks", "0", "-o", out},
		{"convert", stories260k, "--scheme", "q8_0", "--chunks", "4", "-o", out},
		{"calibrate", stories260k, "--corpus", calibCorpus, "--percentile", "150", "-o", out},
		{"calibrate", stories260k, "--corpus", calibCorpus, "--threads", "-3", "-o", out},
		{"verify", stories260k, "--ref", stories260k},
		{"verify", stories260k, "--corpus", evalCorpus},
		{"verify", stories260k, "--ref", stories260k, "--corpus", evalCorpus, "--min-snr", "NaN"},
		{"verify", stories260k, "--ref", stories260k, "--corpus", evalCorpus, "--max-kl", "NaN"},
		{"verify", stories260k, "--ref", stories260k, "--corpus", evalCorpus, "--min-top1", "101"},
		{"verify", stories260k, "--ref", stories260k, "--corpus", evalCorpus, "--threads", "-1"},
		{"verify", stories260k, "--ref", stories260k, "--corpus", evalCorpus, "--acts", "bogus"},
		{"run", stories260k, "Once", "--temp", "NaN"},
		{"run", stories260k, "Once", "--top-p", "2"},
		{"run", stories260k, "Once", "--top-k", "-1"},
		{"run", stories260k, "Once", "--threads", "-1"},
		{"bench", stories260k, "--threads", "-1"},
	} {
		code, _, stderr := run(args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, want 2: %q", args, code, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a usage error left %v", entries)
	}
}

// inspect never prints a name raw (a terminal escape in a tensor name), and names what a file
// that is none of its formats starts with.
func TestInspectHostileNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "evil.gguf")
	h := &gguf.Header{
		KVs:     []gguf.KV{{Key: "general.architecture", Value: "llama"}, {Key: "evil\x1b[2J.key", Value: "x"}},
		Tensors: []gguf.TensorInfo{{Name: "blk.0\n\x1b[31mred", Type: gguf.F32, Shape: []uint64{4}}},
	}
	w, err := gguf.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor(0, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	code, out, e := run("inspect", path)
	if code != exitOK || strings.Contains(out, "\x1b") || !strings.Contains(out, `"blk.0\n\x1b[31mred"`) || !strings.Contains(out, `"evil\x1b[2J.key"`) {
		t.Errorf("inspect: exit %d, %s, stdout %q", code, e, out)
	}
	for name, content := range map[string]string{"m.onnx": "\x08\x07\x12\x07pytorch", "c.json": `{"a": 1}`} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		code, _, e := run("inspect", p)
		if code != exitError || !strings.Contains(e, p+": not a GGUF, gqf or safetensors file") {
			t.Errorf("inspect %s: exit %d, %q", name, code, e)
		}
	}
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(bad, []byte("GGUX\x03\x00\x00\x00...."), 0o644)
	if code, _, e := run("inspect", bad); code != exitError || strings.Contains(e, "safetensors") || !strings.Contains(e, bad) {
		t.Errorf("inspect of a GGUF with a bad magic: exit %d, %q", code, e)
	}
}

// SIGINT, SIGTERM or SIGHUP during a run: every temporary file and every output of the run is
// removed, and the exit status is 128+signal.
func TestInterruptLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gquant as a child process")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			q8 := filepath.Join(dir, "m.gguf")
			if code, _, e := run("convert", stories3m, "--scheme", "q8_0", "-o", q8, "-q"); code != exitOK {
				t.Fatal(e)
			}
			out := filepath.Join(dir, "out")
			os.Mkdir(out, 0o755)
			// Once the reference file's temporary file is there, the run is under way.
			cmd, stderr := startChild(t, func(int) bool {
				m, _ := filepath.Glob(filepath.Join(out, ".ref.kld.tmp-*"))
				return len(m) > 0
			}, "verify", q8, "--ref", stories3m, "--corpus", evalCorpus, "--ctx", "256",
				"--threads", "1", "--save-ref", filepath.Join(out, "ref.kld"), "--json", filepath.Join(out, "r.json"), "-q")
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 128+int(sig) {
				t.Errorf("exit: %v, want %d (stderr %q)", err, 128+int(sig), stderr.String())
			}
			if s := stderr.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, "interrupted") {
				t.Errorf("stderr %q", s)
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("the interrupted run left %v", entries)
			}
		})
	}
}

// The context length holds before anything runs or allocates.
func TestContextLimit(t *testing.T) {
	for _, args := range [][]string{
		{"run", stories260k, "Once", "-n", "100000", "--ignore-eos"},
		{"bench", stories260k, "-p", "100000"},
	} {
		code, out, e := run(args...)
		if code != exitError || out != "" || !strings.Contains(e, "exceed the model's context length 512") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, e)
		}
	}
	prompts := filepath.Join(t.TempDir(), "prompts.txt")
	os.WriteFile(prompts, []byte("Once upon a time\n"+strings.Repeat("and then ", 20000)+"\n"), 0o644)
	if code, _, e := run("verify", stories260k, "--ref", stories260k, "--corpus", evalCorpus, "--ctx", "64", "--chunks", "1",
		"--prompts", prompts); code != exitError || !strings.Contains(e, prompts+": prompt 2: ") || !strings.Contains(e, "context length 512") {
		t.Errorf("verify --prompts with a line past the context: exit %d, %q", code, e)
	}
	if code, _, e := run("verify", stories260k, "--ref", stories260k, "--corpus", evalCorpus, "--ctx", "2048"); code != exitError ||
		!strings.Contains(e, "--ctx 2048 exceeds the context length 512") {
		t.Errorf("verify --ctx 2048: exit %d, %q", code, e)
	}
	if code, _, _ := run("convert", stories260k, "--format", "gqf", "--scheme", "f16", "--max-len", "-1", "-o", filepath.Join(t.TempDir(), "m.gqf")); code != exitUsage {
		t.Errorf("--max-len -1: exit %d, want 2", code)
	}
}

// inspect gives shapes one way for every format: outermost dimension first (GGUF's ggml order
// as "ne" besides).
func TestInspectShapesOneWay(t *testing.T) {
	dir := t.TempDir()
	gg, gq := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "m.gqf")
	if code, _, e := run("convert", stories260k, "--scheme", "q8_0", "-o", gg, "-q"); code != exitOK {
		t.Fatal(e)
	}
	if code, _, e := run("convert", stories260k, "--format", "gqf", "--scheme", "f16", "-o", gq, "-q"); code != exitOK {
		t.Fatal(e)
	}
	for _, c := range []struct{ path, name string }{
		{gg, "token_embd.weight"}, {gq, "token_embd.weight"}, {stories260k, "model.embed_tokens.weight"},
	} {
		code, out, e := run("inspect", c.path)
		if code != exitOK {
			t.Fatal(e)
		}
		found := false
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == c.name {
				found = true
				if f[1] != "512x64" {
					t.Errorf("%s: %s shown as %s, want 512x64 (vocab x hidden)", c.path, c.name, f[1])
				}
			}
		}
		if !found {
			t.Errorf("%s: no %s row in:\n%s", c.path, c.name, out)
		}
	}
	_, out, _ := run("inspect", gg, "--json", "-")
	var rep struct {
		Tensors []struct {
			Name      string
			Shape, NE []uint64
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Tensors) == 0 || rep.Tensors[0].Name != "token_embd.weight" ||
		fmt.Sprint(rep.Tensors[0].Shape) != "[512 64]" || fmt.Sprint(rep.Tensors[0].NE) != "[64 512]" {
		t.Errorf("inspect --json: %v %+v", err, rep.Tensors[:min(1, len(rep.Tensors))])
	}
}

// Statistics of another model with the same shapes are refused (the weights' fingerprint
// differs); those of the model itself, or of a copy of it, are taken.
func TestStatsOfAnotherModel(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "s.stats")
	if code, _, e := run("calibrate", stories260k, "--corpus", calibCorpus, "--ctx", "64", "--tokens", "256", "-o", st, "-q"); code != exitOK {
		t.Fatal(e)
	}
	same := copyModel(t, stories260k)
	other := copyModel(t, stories260k)
	// Same shapes, other weights: flip the sign of the first embedding values.
	w := filepath.Join(other, "model.safetensors")
	b, _ := os.ReadFile(w)
	hdr := 8 + int(uint64(b[0])|uint64(b[1])<<8|uint64(b[2])<<16|uint64(b[3])<<24)
	for i := hdr + 1; i < hdr+4096 && i < len(b); i += 2 {
		b[i] ^= 0x80
	}
	os.WriteFile(w, b, 0o644)
	for _, c := range []struct {
		model string
		ok    bool
	}{{stories260k, true}, {same, true}, {other, false}} {
		for _, args := range [][]string{
			{"--scheme", "q4_k_m"},
			{"--format", "gqf", "--scheme", "w8a16", "--corpus", calibCorpus},
		} {
			out := filepath.Join(t.TempDir(), "m.out")
			code, _, e := run(append([]string{"convert", c.model, "--stats", st, "-o", out, "-q"}, args...)...)
			switch {
			case c.ok && code != exitOK:
				t.Errorf("%s %v: %s", c.model, args, e)
			case !c.ok && (code != exitError || !strings.Contains(e, "other weights")):
				t.Errorf("%s %v: exit %d, %q (want the stats refused)", c.model, args, code, e)
			}
		}
	}
}

// Stored reference log-probabilities of another model (same vocabulary, other architecture or
// size) are refused; those of the artifact's own reference are taken.
func TestRefLogitsOfAnotherModel(t *testing.T) {
	dir := t.TempDir()
	kld := filepath.Join(dir, "ref.kld")
	if code, _, e := run("verify", stories260k, "--ref", stories260k, "--corpus", evalCorpus, "--ctx", "64", "--chunks", "2",
		"--gen", "2", "--save-ref", kld, "-q"); code != exitOK {
		t.Fatal(e)
	}
	q8 := filepath.Join(dir, "m.gguf")
	if code, _, e := run("convert", stories260k, "--scheme", "q8_0", "-o", q8, "-q"); code != exitOK {
		t.Fatal(e)
	}
	if code, _, e := run("verify", q8, "--ref-logits", kld, "-q"); code != exitOK {
		t.Errorf("the artifact's own reference: %s", e)
	}
	other := tinyModel(t) // stories260k's tokenizer, other dimensions
	code, _, e := run("verify", other, "--ref-logits", kld, "-q")
	if code != exitError || !strings.Contains(e, kld+": made with a reference of another model") {
		t.Errorf("another model's reference: exit %d, %q", code, e)
	}
	code, _, e = run("verify", other, "--ref", stories260k, "--corpus", evalCorpus, "--ctx", "64", "--chunks", "1", "-q")
	if code != exitError || !strings.Contains(e, other+": another model (") {
		t.Errorf("a live reference of another model: exit %d, %q", code, e)
	}
}

// An input truncated while a run has it mapped is a one-line error naming it (the fault
// becomes an error: internal/mapped), not SIGBUS with a stack trace.
func TestInputTruncatedWhileMapped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gquant as a child process")
	}
	dir := t.TempDir()
	q8 := filepath.Join(dir, "m.gguf")
	if code, _, e := run("convert", stories3m, "--scheme", "q8_0", "-o", q8, "-q"); code != exitOK {
		t.Fatal(e)
	}
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no /proc: the child's mappings cannot be seen")
	}
	// Once the model is mapped, take its pages away.
	abs, _ := filepath.Abs(q8)
	cmd, stderr := startChild(t, func(pid int) bool {
		maps, _ := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "maps"))
		return bytes.Contains(maps, []byte(abs))
	}, "bench", q8, "-p", "64", "-n", "64", "-r", "1000", "--threads", "1")
	time.Sleep(50 * time.Millisecond)
	if err := os.Truncate(q8, 4096); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		s := stderr.String()
		if !ok || ee.ExitCode() != exitError || strings.Count(s, "\n") != 1 ||
			!strings.Contains(s, q8+": the file changed while being read") {
			t.Errorf("exit %v, stderr %q", err, s)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("bench did not stop after its model was truncated")
	}
}

// Layer-sequential GPTQ and AWQ from the command line (--method gptq|awq --corpus, no --stats)
// write a gqf file and a GGUF that verify reads, and say what they ran; what they cannot do is
// refused in one line.
func TestConvertLayerSequential(t *testing.T) {
	dir := t.TempDir()
	for _, method := range []string{"gptq", "awq"} {
		for _, c := range []struct{ format, scheme, out string }{{"gqf", "w4a16", "m.gqf"}, {"gguf", "q4_0", "m.gguf"}} {
			out := filepath.Join(dir, method+"-"+c.out)
			code, _, stderr := run("convert", stories260k, "--format", c.format, "--scheme", c.scheme, "--method", method,
				"--corpus", calibCorpus, "--ctx", "64", "--tokens", "256", "--threads", "2", "-o", out)
			if code != exitOK || !strings.Contains(stderr, "layer-sequential "+strings.ToUpper(method)+": 256 calibration tokens through") {
				t.Fatalf("%s: exit %d: %s", out, code, stderr)
			}
			if code, _, stderr := run("verify", out, "--ref", stories260k, "--corpus", evalCorpus, "--ctx", "64", "--chunks", "2", "--gen", "0"); code != exitOK {
				t.Fatalf("verify %s: exit %d: %s", out, code, stderr)
			}
		}
	}
	// The layer-sequential run set the collector's target (this process has no GOGC); put
	// the default back.
	if prev := debug.SetGCPercent(100); os.Getenv("GOGC") == "" && prev != sequenceGCPercent {
		t.Errorf("GC percent after a layer-sequential run: %d, want %d", prev, sequenceGCPercent)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--scheme", "q4_k_m", "--method", "awq"}, exitUsage, "GGUF output carries AWQ weights exactly only as q4_0"},
		{[]string{"--format", "gqf", "--scheme", "w4a8", "--method", "gptq", "--smooth", "0.5"}, exitUsage, "SmoothQuant needs --stats FILE"},
	} {
		args := append([]string{"convert", stories260k, "-q", "--corpus", calibCorpus, "--ctx", "64", "--tokens", "256", "-o", filepath.Join(dir, "bad")}, c.args...)
		code, _, stderr := run(args...)
		if code != c.code || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q", c.args, code, stderr)
		}
	}
}
