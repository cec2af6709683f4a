package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Mode is the permission of every file written: CreateTemp makes its files private, but an
// output file (a model, a report) is not secret.
const Mode fs.FileMode = 0o644

// File is an output file being written. Nothing appears at its path until Commit succeeds.
// A File is not safe for concurrent use, except that WriteAt may be called from several
// goroutines at once (as with *os.File); Commit and Abort must not run alongside any write.
type File struct {
	path string
	f    *os.File
	done bool // committed or aborted: the temporary file is gone or renamed
}

// Create creates the temporary file for path in path's directory, with permission Mode.
func Create(path string) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, pathErr(path, err)
	}
	if err := f.Chmod(Mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, pathErr(path, err)
	}
	return &File{path: path, f: f}, nil
}

// Name returns the temporary file's name (for messages and tests; write through the File).
func (f *File) Name() string { return f.f.Name() }

// Write writes p at the current offset. Its error names no file.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	return n, unwrap(err)
}

// WriteAt writes p at offset off. Its error names no file.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	return n, unwrap(err)
}

// Truncate sets the file's size; a file grown this way reads as zeros past its old end.
// Its error names no file.
func (f *File) Truncate(size int64) error { return unwrap(f.f.Truncate(size)) }

// Commit flushes the file to disk, closes it and renames it over the final path, then flushes
// the directory so that the rename survives a crash. When a step before the rename fails the
// temporary file is removed and nothing appears at the path. A failure to flush the directory
// is reported although the file is already in place. Commit may be called once; after a
// Commit or Abort it fails.
func (f *File) Commit() error {
	if f.done {
		return pathErr(f.path, os.ErrClosed)
	}
	f.done = true
	name := f.f.Name()
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, f.path)
	}
	if err != nil {
		os.Remove(name)
		return pathErr(f.path, err)
	}
	if err := syncDir(filepath.Dir(f.path)); err != nil {
		return pathErr(f.path, err)
	}
	return nil
}

// Abort closes and removes the temporary file. It does nothing after Commit (successful or
// not) or a previous Abort, so it is safe to defer, or to call after a failed Commit.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	err := f.f.Close()
	if rerr := os.Remove(f.f.Name()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = rerr
	}
	if err != nil {
		return pathErr(f.path, err)
	}
	return nil
}

// WriteFile writes data to path through a temporary file; on any error nothing is left behind
// and an existing file at path is unchanged.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return pathErr(path, err)
	}
	return f.Commit()
}

// CheckNew returns an error when path exists and force is not set: "<path>: output exists (use
// --force to overwrite)", which matches fs.ErrExist under errors.Is. With force it does nothing.
// A failure to look at path (other than its absence) is returned too.
func CheckNew(path string, force bool) error {
	if force {
		return nil
	}
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return &existsError{path}
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return pathErr(path, err)
}

// existsError is CheckNew's refusal.
type existsError struct{ path string }

func (e *existsError) Error() string { return e.path + ": output exists (use --force to overwrite)" }

// Unwrap lets errors.Is(err, fs.ErrExist) match.
func (e *existsError) Unwrap() error { return fs.ErrExist }

// syncDir flushes a directory so that a rename in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// pathErr names the final path in front of err, dropping the temporary file's name that an
// *fs.PathError or *os.LinkError carries.
func pathErr(path string, err error) error { return fmt.Errorf("%s: %w", path, unwrap(err)) }

// unwrap strips the file names of an *fs.PathError or *os.LinkError, keeping the cause.
func unwrap(err error) error {
	switch e := err.(type) {
	case *fs.PathError:
		return e.Err
	case *os.LinkError:
		return e.Err
	}
	return err
}
