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

	// The path is a directory: refused before any temporary file is made.
	busy := filepath.Join(dir, "busy")
	if err := os.MkdirAll(filepath.Join(busy, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(busy); err == nil || err.Error() != busy+": is a directory" {
		t.Errorf("Create over a directory: %v", err)
	}
	wantEntries(t, dir, "busy")
	// The rename fails (the directory's target changes between Create and Commit): the
	// temporary file goes and the error names the path.
	late := filepath.Join(dir, "late")
	f := createWith(t, late, "data")
	if err := os.MkdirAll(filepath.Join(late, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := f.Commit()
	if err == nil || strings.Contains(err.Error(), ".tmp-") || !strings.HasPrefix(err.Error(), late+": ") ||
		!(errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EISDIR)) {
		t.Errorf("Commit over a directory: %v", err)
	}
	wantEntries(t, dir, "busy", "late")
	wantEntries(t, late, "inner")
	if err := f.Abort(); err != nil { // nothing left to remove
		t.Errorf("Abort after a failed Commit: %v", err)
	}
	if err := WriteFile(busy, []byte("data")); err == nil || !strings.HasPrefix(err.Error(), busy+": ") {
		t.Errorf("WriteFile over a directory: %v", err)
	}
	wantEntries(t, dir, "busy", "late")
	wantEntries(t, busy, "inner")
}

// A symbolic link is written through: its target gets the new bytes, the link stays a link
// (also for a link to a link, and a dangling one, whose target is created).
func TestSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	os.WriteFile(real, []byte("old"), 0o644)
	link := filepath.Join(dir, "link.json")
	link2 := filepath.Join(dir, "link2.json")
	dangling := filepath.Join(dir, "dangling.json")
	if os.Symlink("real.json", link) != nil || os.Symlink(link, link2) != nil || os.Symlink("new.json", dangling) != nil {
		t.Skip("no symbolic links here")
	}
	for _, p := range []string{link, link2} {
		if err := CheckNew(p, false); err == nil {
			t.Errorf("%s: an existing target needs force", p)
		}
		if err := WriteFile(p, []byte("via "+filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symbolic link", p)
		}
		wantContent(t, real, []byte("via "+filepath.Base(p)))
	}
	if err := WriteFile(dangling, []byte("new")); err != nil {
		t.Fatal(err)
	}
	wantContent(t, filepath.Join(dir, "new.json"), []byte("new"))
	wantEntries(t, dir, "dangling.json", "link.json", "link2.json", "new.json", "real.json")
}

// A device is written in place and needs no force; its node is never replaced.
func TestDevice(t *testing.T) {
	const null = "/dev/null"
	fi, err := os.Stat(null)
	if err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Skip("no /dev/null")
	}
	if err := CheckNew(null, false); err != nil {
		t.Errorf("CheckNew(/dev/null): %v", err)
	}
	f, err := Create(null)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(null); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v %v", fi, err)
	}
}

// Interrupt removes the temporary files in flight and the outputs committed so far, and
// refuses new ones.
func TestInterrupt(t *testing.T) {
	defer func() { live.mu.Lock(); live.interrupted = false; live.mu.Unlock() }()
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "done.json"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	done, err := CreateDir(filepath.Join(dir, "done-dir"))
	if err != nil {
		t.Fatal(err)
	}
	if err := done.Commit(); err != nil {
		t.Fatal(err)
	}
	half, err := CreateDir(filepath.Join(dir, "half-dir"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(half.Path(), "x.onnx"), []byte("x"), Mode)
	f := createWith(t, filepath.Join(dir, "half.gguf"), "part")
	wantEntries(t, dir, filepath.Base(half.Path()), filepath.Base(f.Name()), "done-dir", "done.json")
	Interrupt()
	wantEntries(t, dir)
	if err := half.Commit(); err == nil {
		t.Errorf("Dir.Commit after Interrupt succeeded")
	}
	if err := f.Commit(); err == nil {
		t.Errorf("Commit after Interrupt succeeded")
	}
	wantEntries(t, dir)
	if _, err := Create(filepath.Join(dir, "later")); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Create after Interrupt: %v", err)
	}
}

func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "model.safetensors")
	os.WriteFile(in, []byte("weights"), 0o644)
	hard := filepath.Join(dir, "hard.bin")
	os.Link(in, hard)
	sym := filepath.Join(dir, "sym.bin")
	os.Symlink(in, sym)
	for _, out := range []string{in, hard, sym, filepath.Join(dir, ".", "model.safetensors")} {
		err := CheckOutputs(true, []string{in}, out)
		if err == nil || !strings.Contains(err.Error(), "an input of this run") || !strings.HasPrefix(err.Error(), out+": ") {
			t.Errorf("output %s = input: %v", out, err)
		}
	}
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "a.json")
	if err := CheckOutputs(true, nil, a, "", "-", b); err == nil || !strings.Contains(err.Error(), "another output") {
		t.Errorf("two outputs with one name: %v", err)
	}
	if err := CheckOutputs(false, []string{in, filepath.Join(dir, "missing")}, filepath.Join(dir, "new.gguf"), "-"); err != nil {
		t.Errorf("fresh output: %v", err)
	}
	if err := CheckOutputs(false, []string{in}, hard); err == nil || !errors.Is(err, fs.ErrExist) {
		t.Errorf("existing output without force: %v", err)
	}
	wantContent(t, in, []byte("weights"))
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

// TestWriteback writes a file in many small Write and WriteAt calls with the writeback started
// every KiB: the committed file has every byte, in place.
func TestWriteback(t *testing.T) {
	defer func(v int64) { writebackEvery = v }(writebackEvery)
	writebackEvery = 1 << 10
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 40<<10)
	for i := range want {
		want[i] = byte(i * 7)
	}
	half := len(want) / 2
	for off := 0; off < half; off += 300 {
		if _, err := f.Write(want[off:min(off+300, half)]); err != nil {
			t.Fatal(err)
		}
	}
	for off := len(want) - 500; off+500 > half; off -= 500 { // backwards, past the end first
		lo := max(off, half)
		if _, err := f.WriteAt(want[lo:min(off+500, len(want))], int64(lo)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("committed file: %d bytes (%v), differs from what was written", len(got), err)
	}
}
