package gqfconv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/convert/export"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/hf/synth"
)

const (
	gqfModel  = "../../testdata/models/stories260k"
	gqfCorpus = "../../testdata/corpora/tinystories-calib.txt"
)

// calibOpts are small calibration settings for tests.
func calibOpts(scheme string) Options {
	return Options{Scheme: scheme, MaxLen: 32, Corpus: gqfCorpus, CalibWindows: 2}
}

func needCorpus(t *testing.T) {
	if _, err := os.Stat(gqfCorpus); err != nil {
		t.Skipf("corpus not available: %v", err)
	}
}

// referencePrompt returns the first prompt of reference.json and its top-1 next token.
func referencePrompt(t *testing.T, dir string) ([]int, int) {
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Skip(err)
	}
	var ref struct {
		Prompts []struct {
			IDs  []int `json:"ids"`
			Top5 []struct {
				ID int `json:"id"`
			} `json:"last_position_top5"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return ref.Prompts[0].IDs, ref.Prompts[0].Top5[0].ID
}

func TestGQFDryRunAndErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gqf")
	p, err := Convert(gqfModel, out, Options{Scheme: "w4a16-lpbq", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("dry run wrote the output")
	}
	// stories260k: 1 embedding + 5 layers × 9 tensors + output_norm, then 6 constants (GQA adds attn.kv_rep).
	if len(p.Tensors) != 1+5*9+1+6 || p.MaxLen != 128 || !strings.Contains(p.Text(), "int4 LPBQ block 64") {
		t.Errorf("plan:\n%s", p.Text())
	}
	if _, err := Convert(gqfModel, out, Options{Scheme: "w8a16"}); err == nil || !strings.Contains(err.Error(), "need --encodings FILE, --stats FILE or --corpus FILE") {
		t.Errorf("w8a16 without encodings: %v", err)
	}
	if _, err := Convert(gqfModel, out, Options{Scheme: "w3a3"}); err == nil || !strings.Contains(err.Error(), `scheme: "w3a3" is not a gqf scheme`) {
		t.Errorf("unknown scheme: %v", err)
	}
	// A mixture of experts has no gqf form: refused by name, even for a dry run.
	spec, err := synth.Preset("tiny-qwen3moe")
	if err != nil {
		t.Fatal(err)
	}
	spec.Layers = 1
	moe := filepath.Join(t.TempDir(), "moe")
	if err := synth.Generate(moe, spec, synth.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(moe, out, Options{Scheme: "w4a16", DryRun: true}); err == nil || !strings.Contains(err.Error(), "mixture of experts (8 experts) has no gqf or ONNX form") {
		t.Errorf("mixture of experts: %v", err)
	}
}

// TestGQFEncodingsFromAIMET converts once with calibration, exports the encodings as AIMET
// JSON and converts again from that file: the activation encodings must come back as they
// were, and a file lacking one activation must be refused.
func TestGQFEncodingsFromAIMET(t *testing.T) {
	needCorpus(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gqf"), filepath.Join(dir, "b.gqf")
	if _, err := Convert(gqfModel, a, calibOpts("w8a16")); err != nil {
		t.Fatal(err)
	}
	fa, err := gqf.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	js := filepath.Join(dir, "a.json")
	if err := export.WriteAIMET(js, fa, "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(gqfModel, b, Options{Scheme: "w8a16", MaxLen: 32, Encodings: js}); err != nil {
		t.Fatal(err)
	}
	fb, err := gqf.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	for i, x := range fa.Manifest.Graph.Activations {
		y := fb.Manifest.Graph.Activations[i]
		if x.Encoding.Scale[0] != y.Encoding.Scale[0] || x.Encoding.Offset[0] != y.Encoding.Offset[0] || x.Encoding.Bits != y.Encoding.Bits {
			t.Fatalf("%s: %v after the AIMET round trip, want %v", x.Name, y.Encoding, x.Encoding)
		}
	}
	raw, _ := os.ReadFile(js)
	cut := strings.Replace(string(raw), `"name": "blk.2.kq_softmax"`, `"name": "renamed"`, 1)
	if err := os.WriteFile(js, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(gqfModel, b, Options{Scheme: "w8a16", MaxLen: 32, Encodings: js, Force: true}); err == nil || !strings.Contains(err.Error(), "no encoding for graph activations blk.2.kq_softmax") {
		t.Errorf("missing activation: %v", err)
	}
}

// The same conversion gives the same bytes with one worker or two: the weights, and the
// activation encodings calibrated by running the written file.
func TestDeterministicAcrossThreads(t *testing.T) {
	dir := t.TempDir()
	var files [][]byte
	for _, th := range []int{1, 2} {
		out := filepath.Join(dir, fmt.Sprintf("m%d.gqf", th))
		if _, err := Convert(gqfModel, out, Options{Scheme: "w8a16", MaxLen: 32, Corpus: gqfCorpus, CalibWindows: 2, Threads: th}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("1 and 2 threads wrote different files")
	}
}
