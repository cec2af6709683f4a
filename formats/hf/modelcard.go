package hf

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// ModelCardLicense returns the license of the model card (README.md's YAML front matter,
// "license: ..."), "" when there is none. Only the first 64 KiB are read.
func ModelCardLicense(dir string) string {
	f, err := os.Open(filepath.Join(dir, "README.md"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 64<<10)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "---" {
		return ""
	}
	for n := 0; sc.Scan() && n < 1000; n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "---" {
			return ""
		}
		if v, ok := strings.CutPrefix(line, "license:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}
