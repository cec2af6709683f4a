package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "123": 123, "5MB": 5_000_000, "2GiB": 2 << 30, "10KB": 10_000, "7B": 7} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1.5GB", "99999999999GB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) succeeded", in)
		}
	}
}

func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := run([]string{"--preset", "tiny-llama", "-o", dir, "--layers", "1", "--tied", "--vocab", "600", "--llama3-rope-scaling"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"num_hidden_layers": 1,`, `"tie_word_embeddings": true,`, `"vocab_size": 600`, `"rope_type": "llama3"`, `"hidden_size": 256,`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.json lacks %s", want)
		}
	}
	for args, want := range map[string]string{
		"--preset nope -o x":      `unknown preset "nope"`,
		"--preset tiny-llama":     "-o: output folder required",
		"-o x --shard-size 3 TB":  `unexpected argument "TB"`,
		"-o x --shard-size 3TB":   `--shard-size: "3TB" is not a size`,
		"-preset tiny-llama -o x": `unknown shorthand flag: 'p'`,
	} {
		err := run(strings.Fields(args))
		if _, usage := err.(usageError); !usage || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want usage error with %q", args, err, want)
		}
	}
}
