package imatrix

import (
	"os"
	"strings"
	"testing"
)

// FuzzParse: any input gives a Matrix that validates or a one-line error, never a panic; a
// parsed matrix survives WriteDat/WriteGGUF.
func FuzzParse(f *testing.F) {
	for _, p := range []string{llamaGGUF, llamaDat} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 'w', 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 128, 63})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, "fuzz")
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "fuzz") {
				t.Fatalf("bad error %q", err)
			}
			return
		}
		if err := m.Validate("fuzz"); err != nil {
			t.Fatalf("parsed matrix does not validate: %v", err)
		}
		for _, e := range m.Entries {
			if imp := m.Importance(e.Name); len(imp) != len(e.Sum2) {
				t.Fatalf("%s: %d importances for %d sums", e.Name, len(imp), len(e.Sum2))
			}
		}
	})
}
