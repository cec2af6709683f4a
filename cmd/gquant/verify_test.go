package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/verify"
)

const (
	verifyModel  = "../../testdata/models/stories260k"
	verifyCorpus = "../../testdata/corpora/tinystories-eval.txt"
)

// TestVerifyExitCodes runs stories260k against itself: every threshold a perfect copy meets
// passes (exit 0), an impossible one fails (exit 3, named on stderr), bad flags are usage errors.
func TestVerifyExitCodes(t *testing.T) {
	if _, err := os.Stat(verifyCorpus); err != nil {
		t.Skip("no evaluation corpus:", err)
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "report.json")
	base := []string{"verify", verifyModel, "--ref", verifyModel, "--corpus", verifyCorpus, "--ctx", "64",
		"--chunks", "2", "--gen", "4", "--threads", "1"}
	run := func(extra ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := execute(append(append([]string{}, base...), extra...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, stderr := run("--min-snr", "30", "--max-kl", "0", "--min-top1", "100", "--json", js)
	if code != exitOK || !strings.Contains(out, "logits SNR        inf dB") {
		t.Fatalf("identical model: exit %d, stderr %q, stdout:\n%s", code, stderr, out)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	r, err := verify.ReadReport(b)
	if err != nil || !r.Passed || !strings.HasPrefix(r.Command, "gquant verify ") || r.GquantVersion != version || len(r.Thresholds) != 3 {
		t.Errorf("report: %v, passed %v, command %q, thresholds %v", err, r.Passed, r.Command, r.Thresholds)
	}
	code, _, stderr = run("--max-kl", "-1", "--json", js, "--force")
	if code != exitThreshold || !strings.Contains(stderr, "--max-kl") {
		t.Errorf("impossible limit: exit %d, stderr %q (want %d naming --max-kl)", code, stderr, exitThreshold)
	}
	if b, _ := os.ReadFile(js); !strings.Contains(string(b), `"passed": false`) {
		t.Errorf("the report of a failed check should say passed: false")
	}
	if code, _, stderr = run("--json", js); code != exitError || !strings.Contains(stderr, "exists") {
		t.Errorf("existing output without --force: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ = run("--min-top1", "101"); code != exitUsage {
		t.Errorf("--min-top1 101: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ = run("--corpus", filepath.Join(dir, "missing.txt")); code != exitError {
		t.Errorf("missing corpus: exit %d, want %d", code, exitError)
	}
}

// TestVerifyRefActs checks that --ref-acts reaches the reference and --acts the artifact:
// stories260k (BF16) against itself is exact with both in one arithmetic, and differs (KL > 0)
// when only the reference takes llama.cpp's bf16-rounded activations. --ref-acts has nothing
// to run with --ref-logits (a usage error).
func TestVerifyRefActs(t *testing.T) {
	if _, err := os.Stat(verifyCorpus); err != nil {
		t.Skip("no evaluation corpus:", err)
	}
	dir := t.TempDir()
	kl := func(name string, extra ...string) float64 {
		t.Helper()
		js := filepath.Join(dir, name+".json")
		args := append([]string{"verify", verifyModel, "--ref", verifyModel, "--corpus", verifyCorpus, "--ctx", "64",
			"--chunks", "2", "--gen", "0", "--threads", "1", "--json", js}, extra...)
		var out, errb bytes.Buffer
		if code := execute(args, &out, &errb); code != exitOK {
			t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		b, err := os.ReadFile(js)
		if err != nil {
			t.Fatal(err)
		}
		r, err := verify.ReadReport(b)
		if err != nil {
			t.Fatalf("report: %v", err)
		}
		return r.KL.Mean
	}
	if v := kl("both", "--acts", "quant", "--ref-acts", "quant"); v != 0 {
		t.Errorf("--acts quant --ref-acts quant: KL %g, want 0 (one arithmetic on both sides)", v)
	}
	if v := kl("ref", "--ref-acts", "quant"); !(v > 0) {
		t.Errorf("--ref-acts quant alone: KL %g, want > 0 (the reference in bf16 activations, the artifact in float32)", v)
	}
	var out, errb bytes.Buffer
	code := execute([]string{"verify", verifyModel, "--ref-logits", filepath.Join(dir, "ref.kld"), "--ref-acts", "quant"}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "verify: --ref-acts: the reference is not run with --ref-logits") {
		t.Errorf("--ref-acts with --ref-logits: exit %d, %q", code, errb.String())
	}
}
