package hf

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModelCardLicense(t *testing.T) {
	for card, want := range map[string]string{
		"---\nlanguage: en\nlicense: apache-2.0\n---\n# model\n": "apache-2.0",
		"---\nlicense: \"mit\"\n---\n":                           "mit",
		"# no front matter\nlicense: mit\n":                      "",
		"---\ntags: [a]\n---\nlicense: mit\n":                    "",
		"":                                                       "",
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "README.md"), []byte(card), 0o644)
		if got := ModelCardLicense(dir); got != want {
			t.Errorf("%q: %q, want %q", card, got, want)
		}
	}
	if got := ModelCardLicense(t.TempDir()); got != "" {
		t.Errorf("no README: %q", got)
	}
}
