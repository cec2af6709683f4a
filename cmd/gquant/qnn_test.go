package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/hf/synth"
)

// TestQNNCalibrateConvertCLI: what calibrate --w8a16 --encodings (and --scheme S --encodings
// for the other QNN schemes) writes is taken by convert --format gqf --scheme S --encodings for
// the same model, on the bundled llama models and a synthetic Qwen3 (q/k norms, GQA, head_dim
// ≠ hidden/heads); every activation of the file gets an encoding of the scheme's width, and
// verify simulates them all. Encodings of another width are refused in one line.
func TestQNNCalibrateConvertCLI(t *testing.T) {
	qwen3 := filepath.Join(t.TempDir(), "tiny-qwen3")
	spec, err := synth.Preset("tiny-qwen3")
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Generate(qwen3, spec, synth.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	models := []string{calModel, "../../testdata/models/stories3m", qwen3}
	schemes := []struct {
		name string
		flag []string
		bits uint32
	}{
		{"w8a16", []string{"--w8a16"}, 16},
		{"w4a16-qnn", []string{"--scheme", "w4a16-qnn"}, 16},
		{"w4a8-qnn", []string{"--scheme", "w4a8-qnn"}, 8},
	}
	for _, model := range models {
		dir := t.TempDir()
		st := filepath.Join(dir, "s.stats")
		if code, _, stderr := run("calibrate", model, "--corpus", calCorpus, "--ctx", "32", "--tokens", "64", "--threads", "2", "-o", st, "-q"); code != 0 {
			t.Fatalf("%s: calibrate: exit %d: %s", model, code, stderr)
		}
		for _, s := range schemes {
			enc, out := filepath.Join(dir, s.name+".json"), filepath.Join(dir, s.name+".gqf")
			args := append([]string{"calibrate", model, "--stats", st, "--encodings", enc, "-q"}, s.flag...)
			if code, _, stderr := run(args...); code != 0 {
				t.Fatalf("%s: %v: exit %d: %s", model, args, code, stderr)
			}
			args = []string{"convert", model, "-o", out, "--format", "gqf", "--scheme", s.name, "--encodings", enc, "--max-len", "32", "-q"}
			if code, _, stderr := run(args...); code != 0 {
				t.Fatalf("%s: %v: exit %d: %s", model, args, code, stderr)
			}
			f, err := gqf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			acts := f.Manifest.Graph.Activations
			for _, a := range acts {
				if a.Encoding == nil || a.Encoding.Bits != s.bits {
					t.Errorf("%s %s: %s: encoding %v, want %d bits", model, s.name, a.Name, a.Encoding, s.bits)
					break
				}
			}
			f.Close()
			if model != calModel {
				continue
			}
			code, stdout, stderr := run("verify", out, "--ref", model, "--corpus", calCorpus, "--ctx", "32", "--chunks", "1", "--gen", "4", "--threads", "2")
			if code != 0 {
				t.Fatalf("%s: verify: exit %d: %s", s.name, code, stderr)
			}
			if all := stdout + stderr; !strings.Contains(all, "activations") || !strings.Contains(all, "static encodings simulated") {
				t.Errorf("%s: verify does not report the simulated encodings:\n%s", s.name, all)
			}
		}
		// 16-bit encodings for the 8-bit scheme: one line naming the file and the tensor.
		enc16 := filepath.Join(dir, "w4a16-qnn.json")
		code, _, stderr := run("convert", model, "-o", filepath.Join(t.TempDir(), "x.gqf"), "--format", "gqf", "--scheme", "w4a8-qnn", "--encodings", enc16)
		assertExit(t, code, exitError, stderr, enc16+": token_embd: bw 16, but the scheme's activations are 8-bit")
	}

	code, _, stderr := run("calibrate", calModel, "--corpus", calCorpus, "--scheme", "w4a4", "--encodings", filepath.Join(t.TempDir(), "e.json"))
	assertExit(t, code, exitUsage, stderr, `"w4a4" is not a QNN scheme`)
	code, _, stderr = run("calibrate", calModel, "--corpus", calCorpus, "--w8a16", "--scheme", "w4a8-qnn", "--encodings", filepath.Join(t.TempDir(), "e.json"))
	assertExit(t, code, exitUsage, stderr, "--w8a16 and --scheme w4a8-qnn name two schemes")
	code, _, stderr = run("calibrate", calModel, "--corpus", calCorpus, "--scheme", "w4a8-qnn", "-o", filepath.Join(t.TempDir(), "s.stats"))
	assertExit(t, code, exitUsage, stderr, "--scheme needs --encodings OUT.json")
}
