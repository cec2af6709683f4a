package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/convert/gqfconv"
	"github.com/gquant/gquant/formats/encodings"
)

// TestExport runs gquant export on a w8a16 gqf file of stories260k: ONNX (float and QDQ) and
// AIMET JSON (1.0.0 and 0.6.1), then the usage and error paths.
func TestExport(t *testing.T) {
	corpus := filepath.Join("..", "..", "testdata", "corpora", "tinystories-calib.txt")
	dir := t.TempDir()
	in := filepath.Join(dir, "m.gqf")
	_, err := gqfconv.Convert(filepath.Join("..", "..", "testdata", "models", "stories260k"), in,
		gqfconv.Options{Scheme: "w8a16", MaxLen: 16, Corpus: corpus, CalibWindows: 2})
	if err != nil {
		t.Fatal(err)
	}
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
