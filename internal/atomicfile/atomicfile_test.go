package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// entries lists the names in dir, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// wantEntries checks that dir holds exactly the names given (ReadDir sorts them).
func wantEntries(t *testing.T, dir string, want ...string) {
	t.Helper()
	if got := entries(t, dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s holds %q, want %q", dir, got, want)
	}
}

// wantContent checks a file's bytes and permission.
func wantContent(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s holds %q, want %q", path, got, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("%s has mode %v, want -rw-r--r--", path, st.Mode().Perm())
	}
}

// createWith creates the temporary file for path and writes data to it.
func createWith(t *testing.T, path, data string) *File {
	t.Helper()
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Base(f.Name())
	if filepath.Dir(f.Name()) != dir || !strings.HasPrefix(tmp, ".out.bin.tmp-") {
		t.Errorf("temporary file %s, want %s/.out.bin.tmp-*", f.Name(), dir)
	}
	// Sequential writes, a sized file with a hole, and a write at an offset.
	if _, err := f.Write([]byte("head")); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XY"), 6); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, dir, tmp) // nothing at the final path before Commit
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, dir, "out.bin")
	wantContent(t, path, []byte("head\x00\x00XY\x00\x00"))

	// After Commit: Abort does nothing, a second Commit and any write fail.
	if err := f.Abort(); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	wantEntries(t, dir, "out.bin")
	if err := f.Commit(); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("second Commit: %v", err)
	}
	if _, err := f.Write([]byte("z")); err == nil {
		t.Error("Write after Commit succeeded")
	}
}

func TestCommitReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, dir, "out.json")
	wantContent(t, path, []byte("new"))
}

func TestAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := createWith(t, path, "partial")
	for i := 0; i < 2; i++ { // idempotent
		if err := f.Abort(); err != nil {
			t.Fatalf("Abort %d: %v", i, err)
		}
	}
	wantEntries(t, dir, "out.bin")
	wantContent(t, path, []byte("old")) // the existing file is untouched
	if err := f.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	wantContent(t, path, []byte("old"))
}

// TestFailures checks that a failed Create, Commit or WriteFile leaves no file behind and
// names the final path, not the temporary file.
func TestFailures(t *testing.T) {
	dir := t.TempDir()

	// The directory does not exist.
	missing := filepath.Join(dir, "no-such-dir", "out.bin")
	if _, err := Create(missing); err == nil || err.Error() != missing+": no such file or directory" ||
		!errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Create in a missing directory: %v", err)
	}
	if err := WriteFile(missing, []byte("x")); err == nil || err.Error() != missing+": no such file or directory" {
		t.Errorf("WriteFile in a missing directory: %v", err)
	}
	wantEntries(t, dir)

	// The rename fails: the path is a non-empty directory.
	busy := filepath.Join(dir, "busy")
	if err := os.MkdirAll(filepath.Join(busy, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := createWith(t, busy, "data")
	err := f.Commit()
	if err == nil || strings.Contains(err.Error(), ".tmp-") || !strings.HasPrefix(err.Error(), busy+": ") ||
		!(errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EISDIR)) {
		t.Errorf("Commit over a directory: %v", err)
	}
	wantEntries(t, dir, "busy")
	if err := f.Abort(); err != nil { // nothing left to remove
		t.Errorf("Abort after a failed Commit: %v", err)
	}
	if err := WriteFile(busy, []byte("data")); err == nil || !strings.HasPrefix(err.Error(), busy+": ") {
		t.Errorf("WriteFile over a directory: %v", err)
	}
	wantEntries(t, dir, "busy")
	wantEntries(t, busy, "inner")
}

func TestCheckNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.gguf")
	if err := CheckNew(path, false); err != nil {
		t.Errorf("absent output: %v", err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := CheckNew(path, false)
	if err == nil || err.Error() != path+": output exists (use --force to overwrite)" || !errors.Is(err, fs.ErrExist) {
		t.Errorf("existing output: %v", err)
	}
	if err := CheckNew(path, true); err != nil {
		t.Errorf("existing output with force: %v", err)
	}
	// A path that cannot be looked at (below a regular file) is an error, not "absent".
	bad := filepath.Join(path, "x")
	if err := CheckNew(bad, false); err == nil || err.Error() != bad+": not a directory" {
		t.Errorf("path below a file: %v", err)
	}
}
