package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/runtime/kernels"
)

// TestRunCommand checks that gquant run prints the prompt and the reference's greedy
// continuation (reference.json, computed outside this repository).
func TestRunCommand(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "models", "stories260k")
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Skip(err)
	}
	var ref struct {
		Greedy struct {
			FullText string `json:"full_text"`
		} `json:"greedy"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"run", dir, "Once upon a time", "-n", "32", "--threads", "1"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := strings.TrimSuffix(stdout.String(), "\n"); got != ref.Greedy.FullText {
		t.Errorf("run printed\n%q\nwant\n%q", got, ref.Greedy.FullText)
	}
	if code := execute([]string{"run", dir}, &stdout, &stderr); code != exitUsage {
		t.Errorf("run without a prompt: exit %d, want %d", code, exitUsage)
	}
}

// TestBenchCommandJSON checks bench --json's fields.
func TestBenchCommandJSON(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "models", "stories260k")
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"bench", dir, "-p", "16", "-n", "4", "-r", "1", "--threads", "1", "--json", "-"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	for _, k := range []string{"prefill_tok_s", "decode_tok_s", "threads", "model", "bytes_per_token"} {
		if _, ok := res[k]; !ok {
			t.Errorf("bench --json lacks %q: %s", k, stdout.String())
		}
	}
	if v, _ := res["decode_tok_s"].(float64); !(v > 0) {
		t.Errorf("decode_tok_s = %v", res["decode_tok_s"])
	}
}

// TestBenchKernelsFlag checks that bench --kernels measures the named implementation, and
// that a name this machine does not have is a usage error naming the ones it has.
func TestBenchKernelsFlag(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "models", "stories260k")
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"bench", dir, "-p", "8", "-n", "2", "-r", "1", "--threads", "1", "--json", "-", "--kernels", "generic"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res struct{ Kernels string }
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Kernels != "generic" {
		t.Fatalf("bench --kernels generic reported kernels %q (%v): %s", res.Kernels, err, stdout.String())
	}
	if kernels.Impl() == "generic" && len(kernels.Impls()) > 1 {
		t.Errorf("--kernels was not restored after the command: %s", kernels.Impl())
	}
	stdout.Reset()
	stderr.Reset()
	if code := execute([]string{"bench", dir, "--kernels", "tpu"}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("--kernels tpu: exit %d, want %d", code, exitUsage)
	}
	if msg := stderr.String(); !strings.Contains(msg, `"tpu"`) || !strings.Contains(msg, "generic") || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
		t.Errorf("--kernels tpu: want one line naming the value and the choices, got %q", msg)
	}
}

// TestRunActsQuant checks --acts: with bf16-rounded activations (llama.cpp's arithmetic for
// BF16 weights; VDPBF16PS for the prompt where the CPU has it) stories260k still prints the
// reference's greedy continuation, and an unknown mode is a usage error.
func TestRunActsQuant(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "models", "stories260k")
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Greedy struct {
			Prompt   string `json:"prompt"`
			FullText string `json:"full_text"`
		} `json:"greedy"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"run", dir, ref.Greedy.Prompt, "-n", "32", "--acts", "quant"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != ref.Greedy.FullText {
		t.Errorf("run --acts quant:\n got %q\nwant %q", got, ref.Greedy.FullText)
	}
	stdout.Reset()
	stderr.Reset()
	if code := execute([]string{"run", dir, "x", "--acts", "int4"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("--acts int4: exit %d, want %d (%s)", code, exitUsage, stderr.String())
	}
}
