package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Dir is an output folder being written: its files go into a temporary folder beside it
// (Path), which Commit renames into place, replacing an earlier folder of that name. Nothing
// appears at the folder's path until Commit succeeds; Abort and Interrupt remove the
// temporary folder, and Interrupt a committed one too.
type Dir struct {
	path string
	tmp  string
	done bool
}

// CreateDir creates the temporary folder for path. After Interrupt it fails.
func CreateDir(path string) (*Dir, error) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.interrupted {
		return nil, pathErr(path, ErrInterrupted)
	}
	clean := filepath.Clean(path)
	tmp, err := os.MkdirTemp(filepath.Dir(clean), "."+filepath.Base(clean)+".tmp-*")
	if err != nil {
		return nil, pathErr(path, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.Remove(tmp)
		return nil, pathErr(path, err)
	}
	live.temps[tmp] = true
	return &Dir{path: path, tmp: tmp}, nil
}

// Path is the temporary folder to write the files into.
func (d *Dir) Path() string { return d.tmp }

// Commit renames the temporary folder over path (an existing folder there is removed: the
// caller checked it with CheckNewDir) and flushes the parent folder. On failure the temporary
// folder is removed.
func (d *Dir) Commit() error {
	if d.done {
		return pathErr(d.path, os.ErrClosed)
	}
	d.done = true
	live.mu.Lock()
	defer live.mu.Unlock()
	delete(live.temps, d.tmp)
	fail := func(err error) error {
		os.RemoveAll(d.tmp)
		return pathErr(d.path, err)
	}
	if live.interrupted {
		return fail(ErrInterrupted)
	}
	var old string
	if fi, err := os.Lstat(d.path); err == nil {
		if !fi.IsDir() {
			return fail(syscall.ENOTDIR)
		}
		old = d.tmp + ".old"
		if err := os.Rename(d.path, old); err != nil {
			return fail(err)
		}
	}
	if err := os.Rename(d.tmp, d.path); err != nil {
		if old != "" {
			os.Rename(old, d.path)
		}
		return fail(err)
	}
	live.dirs = append(live.dirs, d.path)
	if old != "" {
		os.RemoveAll(old)
	}
	return wrapPath(d.path, syncDir(filepath.Dir(filepath.Clean(d.path))))
}

// Abort removes the temporary folder. It does nothing after Commit or a previous Abort.
func (d *Dir) Abort() error {
	if d.done {
		return nil
	}
	d.done = true
	live.mu.Lock()
	delete(live.temps, d.tmp)
	live.mu.Unlock()
	return wrapPath(d.path, os.RemoveAll(d.tmp))
}

// CheckNewDir returns an error when path exists and force is not set ("output exists (use
// --force to overwrite)", fs.ErrExist under errors.Is), or when it exists and is not a
// folder, or when one of inputs lies inside it (replacing the folder would delete an input).
func CheckNewDir(path string, force bool, inputs ...string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return pathErr(path, err)
	case !fi.IsDir():
		return pathErr(path, syscall.ENOTDIR)
	case !force:
		return &existsError{path}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return pathErr(path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return pathErr(path, err)
	}
	for _, in := range inputs {
		ia, err := filepath.Abs(in)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(ia); err == nil {
			ia = r
		}
		if rel, err := filepath.Rel(real, ia); err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != ".."+string(filepath.Separator)) {
			return pathErr(path, errors.New("holds "+in+", an input of this run"))
		}
	}
	return nil
}
