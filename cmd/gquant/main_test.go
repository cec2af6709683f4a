package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/safetensors"
)

// run calls the CLI in-process.
func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = execute(args, &o, &e)
	return code, o.String(), e.String()
}

// assertOneLineError checks the error contract: exit 1, one line "gquant: …" naming what is
// wrong, and nothing (not even a temporary file) left in the output folder.
func assertOneLineError(t *testing.T, code int, stderr, want, outDir string) {
	t.Helper()
	if code != exitError {
		t.Errorf("exit code %d, want 1 (stderr %q)", code, stderr)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "gquant: ") {
		t.Errorf("stderr is not one line starting with \"gquant: \": %q", stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not contain %q", stderr, want)
	}
	entries, _ := os.ReadDir(outDir)
	for _, e := range entries {
		t.Errorf("output folder holds %s after a failed conversion", e.Name())
	}
}

// Every malformed input of the catalogue fails with its one-line error, exit 1, no output.
func TestConvertMalformedInputs(t *testing.T) {
	root := t.TempDir()
	cases, err := synth.WriteMalformed(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 8 {
		t.Fatalf("catalogue has %d cases", len(cases))
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			outDir := t.TempDir()
			code, _, stderr := run("convert", filepath.Join(root, name), "-o", filepath.Join(outDir, "m.gguf"), "--scheme", "q8_0")
			assertOneLineError(t, code, stderr, want, outDir)
		})
	}
}

// tinyModel writes a small valid checkpoint.
func tinyModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	spec, err := synth.Preset("tiny-llama")
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Generate(dir, spec, synth.Options{Seed: 1, TokenizerDir: "../../testdata/models/stories260k"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestConvertRejectsNaNWeights(t *testing.T) {
	dir := tinyModel(t)
	// poison one weight of a layer tensor in place (bf16 NaN = 0x7fc0)
	c, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := c.Lookup("model.layers.1.mlp.up_proj.weight")
	if !ok {
		t.Fatal("tensor missing")
	}
	c.Close()
	f, err := os.OpenFile(ti.File, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xc0, 0x7f}, ti.Offset+2*777); err != nil {
		t.Fatal(err)
	}
	f.Close()
	outDir := t.TempDir()
	code, _, stderr := run("convert", dir, "-o", filepath.Join(outDir, "m.gguf"), "--scheme", "q4_0", "--threads", "2")
	assertOneLineError(t, code, stderr, "model.layers.1.mlp.up_proj.weight: non-finite weight NaN", outDir)
}

func TestConvertRejectsUnknownArchitecture(t *testing.T) {
	dir := tinyModel(t)
	cfgPath := filepath.Join(dir, "config.json")
	b, _ := os.ReadFile(cfgPath)
	var cfg map[string]any
	json.Unmarshal(b, &cfg)
	cfg["architectures"] = []string{"GPTNeoXForCausalLM"}
	b, _ = json.Marshal(cfg)
	os.WriteFile(cfgPath, b, 0o644)
	outDir := t.TempDir()
	code, _, stderr := run("convert", dir, "-o", filepath.Join(outDir, "m.gguf"))
	assertOneLineError(t, code, stderr, `config.json: architectures: unsupported architecture "GPTNeoXForCausalLM"`, outDir)
}

func TestConvertUnmappedTensorsAreListed(t *testing.T) {
	dir := tinyModel(t)
	// rewrite model.safetensors with two tensors the llama family does not know
	c, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []safetensors.NamedTensor
	for _, ti := range c.Tensors() {
		d, err := c.Data(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, safetensors.NamedTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: append([]byte(nil), d...)})
	}
	c.Close()
	data := make([]byte, 8)
	all = append(all,
		safetensors.NamedTensor{Name: "model.layers.0.mlp.extra_proj.weight", DType: safetensors.BF16, Shape: []int{2, 2}, Data: data},
		safetensors.NamedTensor{Name: "model.vision_tower.weight", DType: safetensors.BF16, Shape: []int{4}, Data: data})
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), all, nil); err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	code, _, stderr := run("convert", dir, "-o", filepath.Join(outDir, "m.gguf"))
	assertOneLineError(t, code, stderr, "2 unmapped tensors for LlamaForCausalLM: model.layers.0.mlp.extra_proj.weight, model.vision_tower.weight", outDir)
}

func TestConvertExitCodesAndForce(t *testing.T) {
	dir := tinyModel(t)
	out := filepath.Join(t.TempDir(), "m.gguf")
	if code, _, e := run("convert", dir); code != exitUsage {
		t.Errorf("missing -o: exit %d (%s)", code, e)
	}
	if code, _, e := run("convert", dir, "-o", out, "--scheme", "q3_x"); code != exitUsage {
		t.Errorf("bad scheme: exit %d (%s)", code, e)
	}
	if code, _, e := run("convert", dir, "-o", out, "--no-such-flag"); code != exitUsage {
		t.Errorf("unknown flag: exit %d (%s)", code, e)
	}
	if code, _, e := run("convert", dir, "-o", out, "-q"); code != 0 {
		t.Fatalf("convert: exit %d (%s)", code, e)
	}
	first, _ := os.ReadFile(out)
	if code, _, e := run("convert", dir, "-o", out, "-q"); code != exitError || !strings.Contains(e, "output exists") {
		t.Errorf("existing output without --force: exit %d (%s)", code, e)
	}
	if code, _, e := run("convert", dir, "-o", out, "-q", "--force", "--threads", "1"); code != 0 {
		t.Fatalf("--force: exit %d (%s)", code, e)
	}
	second, _ := os.ReadFile(out)
	if !bytes.Equal(first, second) {
		t.Error("same inputs gave different bytes (threads 2 vs 1)")
	}
}

// bench and inspect refuse to replace an existing --json file, as every verb does with its
// outputs, and replace it with --force.
func TestJSONOutputForce(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"inspect", stories260k},
		{"bench", stories260k, "-p", "8", "-n", "2", "-r", "1", "--threads", "1"},
	} {
		out := filepath.Join(dir, args[0]+".json")
		if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := run(append(args, "--json", out)...)
		assertExit(t, code, exitError, stderr, "output exists (use --force to overwrite)")
		if b, _ := os.ReadFile(out); string(b) != "old" {
			t.Errorf("%s: the existing file was changed without --force", args[0])
		}
		if code, _, stderr := run(append(args, "--json", out, "--force")...); code != 0 {
			t.Fatalf("%s --force: exit %d (%s)", args[0], code, stderr)
		}
		if b, _ := os.ReadFile(out); !json.Valid(b) {
			t.Errorf("%s --force: %s is not the JSON report", args[0], out)
		}
	}
}

func TestConvertDryRunJSON(t *testing.T) {
	code, out, e := run("convert", "../../testdata/models/stories260k", "--scheme", "q4_k_m", "--dry-run", "--json", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	var plan struct {
		Tensors []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Fallback string `json:"fallback"`
		} `json:"tensors"`
		Dropped []struct{ Name string } `json:"dropped"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Tensors) != 47 || len(plan.Dropped) != 1 || plan.Dropped[0].Name != "lm_head.weight" {
		t.Fatalf("plan: %d tensors, dropped %v", len(plan.Tensors), plan.Dropped)
	}
}

func TestInspectGGUFAndSafetensors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gguf")
	if code, _, e := run("convert", "../../testdata/models/stories260k", "-o", out, "--scheme", "q8_0", "-q"); code != 0 {
		t.Fatalf("convert: %s", e)
	}
	code, stdout, e := run("inspect", out, "--json", "-")
	if code != 0 {
		t.Fatalf("inspect: %s", e)
	}
	var rep struct {
		Format   string `json:"format"`
		Metadata []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"metadata"`
		Tensors []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"tensors"`
		Params uint64  `json:"parameters"`
		BPW    float64 `json:"bpw"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	// stories260k: 260,032 parameters (the README counts the tied embedding once)
	if rep.Format != "gguf" || len(rep.Tensors) != 47 || rep.Params != 260032 {
		t.Fatalf("inspect: format %s, %d tensors, %d params", rep.Format, len(rep.Tensors), rep.Params)
	}
	found := false
	for _, kv := range rep.Metadata {
		if kv.Key == "general.architecture" && kv.Value == "llama" {
			found = true
		}
	}
	if !found {
		t.Error("general.architecture missing")
	}
	code, stdout, e = run("inspect", "../../testdata/models/stories260k/model.safetensors")
	if code != 0 || !strings.Contains(stdout, "model.embed_tokens.weight") || !strings.Contains(stdout, "BF16") {
		t.Fatalf("inspect safetensors: %d %s %s", code, e, stdout)
	}
	if code, _, _ := run("inspect", "/nonexistent.gguf"); code != exitError {
		t.Errorf("missing file: exit %d", code)
	}
}

// The recorded command drops what changes no byte of the output.
func TestRecordedCommand(t *testing.T) {
	got := recordedCommand([]string{"convert", "M", "-o", "x.gqf", "--threads", "2", "--format", "gqf", "--force", "-q", "--threads=8", "--scheme", "w8a16"})
	if want := "gquant convert M -o x.gqf --format gqf --scheme w8a16"; got != want {
		t.Errorf("recorded %q, want %q", got, want)
	}
}

// A finite weight that the output type cannot hold (beyond fp16 in F16, or making a block's
// fp16 scale overflow) is an error naming the tensor and where, never a silent ±Inf.
func TestConvertRejectsOverflow(t *testing.T) {
	poison := func(t *testing.T, bits uint16) string {
		dir := tinyModel(t)
		c, err := safetensors.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		ti, ok := c.Lookup("model.layers.1.mlp.up_proj.weight")
		c.Close()
		if !ok {
			t.Fatal("tensor missing")
		}
		f, err := os.OpenFile(ti.File, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{byte(bits), byte(bits >> 8)}, ti.Offset+2*777); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	const bf16_1e5, bf16_3e38, bf16_6e4 = 0x47c3, 0x7f61, 0x476a // 99840, 2.99e38, 59904
	for _, c := range []struct {
		bits uint16
		args []string
	}{
		{bf16_1e5, []string{"--scheme", "f16"}},
		{bf16_1e5, []string{"--format", "gqf", "--scheme", "f16"}},
		{bf16_3e38, []string{"--scheme", "q8_0"}},
		{bf16_3e38, []string{"--scheme", "q4_0"}},
		{bf16_3e38, []string{"--scheme", "q4_k_m"}},
		{bf16_3e38, []string{"--scheme", "iq4_nl"}},
		{bf16_3e38, []string{"--scheme", "q8_0", "--tensor-type", "ffn_up=q6_k"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			dir := poison(t, c.bits)
			outDir := t.TempDir()
			code, _, stderr := run(append([]string{"convert", dir, "-o", filepath.Join(outDir, "m.out")}, c.args...)...)
			assertOneLineError(t, code, stderr, "blk.1.ffn_up.weight: row 3, column 9: ", outDir)
			if !strings.Contains(stderr, "fp16") {
				t.Errorf("the error does not say what overflows: %s", stderr)
			}
		})
	}
	// A large weight that fits converts.
	dir := poison(t, bf16_6e4)
	for _, scheme := range []string{"f16", "q8_0", "q4_k_m"} {
		if code, _, e := run("convert", dir, "-o", filepath.Join(t.TempDir(), "m.gguf"), "--scheme", scheme, "-q"); code != exitOK {
			t.Errorf("%s with a weight of 59904: %s", scheme, e)
		}
	}
}
