// Package golden compares test output with golden files that `go test -update` rewrites: for
// regression records (plans) whose correctness other tests check independently.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Check compares got with the file at path, or rewrites the file with -update.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (rerun the test with -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("output differs from %s (review the change, then rerun with -update)", path)
	}
}
