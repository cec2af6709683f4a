package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDir: nothing at the folder's path until Commit; Commit replaces an earlier folder;
// Abort leaves nothing; CheckNewDir refuses an existing folder without force, a file, and a
// folder holding an input even with force.
func TestDir(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "kv")
	write := func(d *Dir, name, data string) {
		if err := os.WriteFile(filepath.Join(d.Path(), name), []byte(data), Mode); err != nil {
			t.Fatal(err)
		}
	}
	d, err := CreateDir(out)
	if err != nil {
		t.Fatal(err)
	}
	write(d, "a", "1")
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("folder visible before Commit: %v", err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, root, "kv")
	wantContent(t, filepath.Join(out, "a"), []byte("1"))
	if err := CheckNewDir(out, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("existing folder without force: %v", err)
	}
	if err := CheckNewDir(out, true); err != nil {
		t.Errorf("existing folder with force: %v", err)
	}
	// Commit over an existing folder replaces it whole.
	d, _ = CreateDir(out)
	write(d, "b", "2")
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, root, "kv")
	wantEntries(t, out, "b")
	// Abort leaves nothing.
	d, _ = CreateDir(filepath.Join(root, "other"))
	write(d, "c", "3")
	if err := d.Abort(); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, root, "kv")
	if err := d.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	// A file is not a folder; a folder holding an input is never replaced.
	file := filepath.Join(root, "f")
	os.WriteFile(file, []byte("x"), Mode)
	if err := CheckNewDir(file, true); err == nil {
		t.Error("CheckNewDir of a file succeeded")
	}
	in := filepath.Join(out, "b")
	if err := CheckNewDir(out, true, in); err == nil || !strings.Contains(err.Error(), "an input of this run") {
		t.Errorf("folder holding an input: %v", err)
	}
	if err := CheckNewDir(out, true, filepath.Join(root, "kv2", "x")); err != nil {
		t.Errorf("input beside the folder: %v", err)
	}
}
