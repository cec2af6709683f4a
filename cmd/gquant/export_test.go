package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/convert/gqfconv"
	"github.com/gquant/gquant/formats/encodings"
)

// exportInput writes a w8a16 gqf file of stories260k into a new folder: the folder and the file.
func exportInput(t *testing.T) (dir, path string) {
	t.Helper()
	corpus := filepath.Join("..", "..", "testdata", "corpora", "tinystories-calib.txt")
	dir = t.TempDir()
	path = filepath.Join(dir, "m.gqf")
	_, err := gqfconv.Convert(filepath.Join("..", "..", "testdata", "models", "stories260k"), path,
		gqfconv.Options{Scheme: "w8a16", MaxLen: 16, Corpus: corpus, CalibWindows: 2})
	if err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// TestExport runs gquant export on a w8a16 gqf file of stories260k: ONNX (float and QDQ) and
// AIMET JSON (1.0.0 and 0.6.1), then the usage and error paths.
func TestExport(t *testing.T) {
	dir, in := exportInput(t)
	for _, args := range [][]string{
		{"--to", "onnx", "-o", filepath.Join(dir, "f.onnx")},
		{"--to", "onnx", "--qdq", "-o", filepath.Join(dir, "q.onnx")},
		{"--to", "aimet-json", "-o", filepath.Join(dir, "e1.json")},
		{"--to", "aimet-json", "--aimet-version", "0.6.1", "-o", filepath.Join(dir, "e0.json")},
	} {
		code, _, stderr := run(append([]string{"export", in}, args...)...)
		if code != exitOK {
			t.Fatalf("export %v: exit %d: %s", args, code, stderr)
		}
	}
	for _, name := range []string{"e1.json", "e0.json"} {
		f, err := encodings.Read(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Activation("blk.0.kq_softmax"); !ok {
			t.Errorf("%s: no encoding for blk.0.kq_softmax", name)
		}
	}
	// An existing output needs --force.
	code, _, stderr := run("export", in, "--to", "onnx", "-o", filepath.Join(dir, "f.onnx"))
	if code != exitError || !strings.Contains(stderr, "output exists") {
		t.Errorf("existing output: exit %d: %s", code, stderr)
	}
	// Usage errors exit 2.
	for _, args := range [][]string{{"export", in, "--to", "tflite", "-o", "x"}, {"export", in, "--to", "onnx"}} {
		if code, _, stderr := run(args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
	// A file that is not gqf fails with one line naming it.
	bad := filepath.Join(dir, "bad.gqf")
	os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00rest of a gguf file"), 0o644)
	code, _, stderr = run("export", bad, "--to", "onnx", "-o", filepath.Join(dir, "b.onnx"))
	if code != exitError || !strings.HasPrefix(stderr, "gquant: "+bad+": magic") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("bad file: exit %d: %q", code, stderr)
	}
}

// TestExportKV runs gquant export --to onnx-kv: the folder and what it says it wrote, the
// same bytes from the same inputs, --force to replace a folder, a folder holding the input
// refused even with --force, nothing left behind by a failed run, and --to aimet-json with
// --ar/--ctx naming the deployment graphs' tensors.
func TestExportKV(t *testing.T) {
	dir, in := exportInput(t)
	out := filepath.Join(dir, "kv")
	code, _, stderr := run("export", in, "--to", "onnx-kv", "--qdq", "--ar", "8", "--ctx", "32", "--parts", "2", "-o", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	files := []string{"metadata.json", "prompt_part1_of_2.onnx", "token_part1_of_2.onnx", "weights_part1_of_2.data",
		"prompt_part2_of_2.onnx", "token_part2_of_2.onnx", "weights_part2_of_2.data", "encodings.json"}
	for _, name := range files {
		if !strings.Contains(stderr, filepath.Join(out, name)) {
			t.Errorf("stderr does not list %s: %s", name, stderr)
		}
	}
	if !strings.Contains(stderr, "QDQ deployment graphs of m.gqf (scheme w8a16)") || !strings.Contains(stderr, " MB\n") {
		t.Errorf("stderr: %s", stderr)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != len(files) {
		t.Errorf("%d files in the folder, want %d", len(ents), len(files))
	}
	read := func(d string) map[string]string {
		m := map[string]string{}
		for _, name := range files {
			b, err := os.ReadFile(filepath.Join(d, name))
			if err != nil {
				t.Fatal(err)
			}
			m[name] = string(b)
		}
		return m
	}
	first := read(out)
	// An existing folder needs --force; with it, the same bytes.
	if code, _, stderr := run("export", in, "--to", "onnx-kv", "--qdq", "--ar", "8", "--ctx", "32", "--parts", "2", "-o", out); code != exitError || !strings.Contains(stderr, "output exists") {
		t.Errorf("existing folder: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run("export", in, "--to", "onnx-kv", "--qdq", "--ar", "8", "--ctx", "32", "--parts", "2", "-o", out, "--force"); code != exitOK {
		t.Fatalf("--force: exit %d: %s", code, stderr)
	}
	for name, b := range read(out) {
		if b != first[name] {
			t.Errorf("%s differs between two runs", name)
		}
	}
	// A folder holding the input is never replaced.
	if code, _, stderr := run("export", in, "--to", "onnx-kv", "--ar", "8", "--ctx", "32", "-o", dir, "--force"); code != exitError || !strings.Contains(stderr, "an input of this run") {
		t.Errorf("folder holding the input: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(in); err != nil {
		t.Fatal(err)
	}
	// A failed run leaves nothing behind.
	before, _ := os.ReadDir(dir)
	if code, _, _ := run("export", in, "--to", "onnx-kv", "--ar", "64", "--ctx", "32", "-o", filepath.Join(dir, "bad")); code != exitError {
		t.Errorf("--ar 64 --ctx 32: exit %d", code)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("a failed export left %d entries beside the input, want %d", len(after), len(before))
	}
	js := filepath.Join(dir, "e.json")
	if code, _, stderr := run("export", in, "--to", "aimet-json", "--ar", "8", "--ctx", "32", "-o", js); code != exitOK {
		t.Fatalf("aimet-json --ar: exit %d: %s", code, stderr)
	}
	f, err := encodings.Read(js)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Activation("past_key_0_in"); !ok {
		t.Errorf("aimet-json --ar 8 --ctx 32: no encoding for past_key_0_in")
	}
}
