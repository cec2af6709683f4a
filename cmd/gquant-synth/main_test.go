package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
		"-o x --shard-size 3XB":   `--shard-size: "3XB" is not a size`,
		"-preset tiny-llama -o x": `unknown shorthand flag: 'p'`,
	} {
		err := run(strings.Fields(args))
		if _, usage := err.(usageError); !usage || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want usage error with %q", args, err, want)
		}
	}
}
