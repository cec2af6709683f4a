package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// Mode is the permission of every file written: CreateTemp makes its files private, but an
// output file (a model, a report) is not secret.
const Mode fs.FileMode = 0o644

// File is an output file being written. Nothing appears at its path until Commit succeeds.
// A File is not safe for concurrent use, except that WriteAt may be called from several
// goroutines at once (as with *os.File); Commit and Abort must not run alongside any write.
//
// A path that is a symbolic link is written through: the new file replaces the link's final
// target and the link stays a link. A path that is a character device or a named pipe
// (/dev/stdout, /dev/null, a FIFO) is written in place, with no temporary file: Commit and
// Abort only close it. Any other kind of file (a directory, a socket) is refused.
type File struct {
	path   string // as the caller named it, for messages
	target string // where the data lands: path with its symbolic links followed
	f      *os.File
	direct bool         // a device or pipe written in place
	done   bool         // committed or aborted: the temporary file is gone or renamed
	dirty  atomic.Int64 // bytes written since the last writeback was started (wrote)
}

// Create creates the temporary file for path in the directory of path's target, with
// permission Mode. After Interrupt it fails.
func Create(path string) (*File, error) {
	target, fi, err := resolve(path)
	if err != nil {
		return nil, pathErr(path, err)
	}
	if fi != nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return nil, pathErr(path, syscall.EISDIR)
		}
		if !isStream(fi) {
			return nil, pathErr(path, errNotRegular)
		}
		f, err := os.OpenFile(target, os.O_WRONLY, 0)
		if err != nil {
			return nil, pathErr(path, err)
		}
		return &File{path: path, target: target, f: f, direct: true}, nil
	}
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.interrupted {
		return nil, pathErr(path, ErrInterrupted)
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return nil, pathErr(path, err)
	}
	if err := f.Chmod(Mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, pathErr(path, err)
	}
	live.temps[f.Name()] = false
	return &File{path: path, target: target, f: f}, nil
}

// CreateScratch creates a scratch file in dir (os.CreateTemp's pattern), never renamed into
// place: DropScratch closes and removes it, and Interrupt removes it too.
func CreateScratch(dir, pattern string) (*os.File, error) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.interrupted {
		return nil, ErrInterrupted
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	live.temps[f.Name()] = false
	return f, nil
}

// DropScratch closes and removes a file made by CreateScratch.
func DropScratch(f *os.File) {
	live.mu.Lock()
	delete(live.temps, f.Name())
	live.mu.Unlock()
	f.Close()
	os.Remove(f.Name())
}

// ErrInterrupted is Create's error once Interrupt has run.
var ErrInterrupted = errors.New("interrupted")

var errNotRegular = errors.New("not a regular file, a device or a pipe")

// isStream reports whether fi is a file written in place: a character device or a named pipe.
func isStream(fi fs.FileInfo) bool {
	return fi.Mode()&(fs.ModeCharDevice|fs.ModeNamedPipe) != 0
}

// resolve follows path's symbolic links to the file they name; fi is that file's Lstat
// (nil when it does not exist yet).
func resolve(path string) (target string, fi fs.FileInfo, err error) {
	target = path
	for range 40 {
		fi, err = os.Lstat(target)
		if errors.Is(err, fs.ErrNotExist) {
			return target, nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return target, fi, nil
		}
		link, err := os.Readlink(target)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(target), link)
		}
		target = link
	}
	return "", nil, syscall.ELOOP
}

// live holds the temporary files of this process not yet committed or aborted, and the files
// it has committed, for Interrupt.
var live = struct {
	mu          sync.Mutex
	temps       map[string]bool // name → is a folder
	committed   []string
	dirs        []string // committed folders
	interrupted bool
}{temps: map[string]bool{}}

// Interrupt removes every temporary file this process has open and every file it has
// committed (an interrupted run leaves none of its outputs behind, as make deletes the target
// of an interrupted recipe; devices and pipes are left alone), and makes later Creates fail.
// It is for a signal handler that then exits: a File being written meanwhile fails or loses
// its data.
func Interrupt() {
	live.mu.Lock()
	defer live.mu.Unlock()
	live.interrupted = true
	for name, dir := range live.temps {
		if dir {
			os.RemoveAll(name)
		} else {
			os.Remove(name)
		}
	}
	for _, name := range live.committed {
		os.Remove(name)
	}
	for _, name := range live.dirs {
		os.RemoveAll(name)
	}
	clear(live.temps)
	live.committed, live.dirs = nil, nil
}

// Name returns the temporary file's name (for messages and tests; write through the File).
func (f *File) Name() string { return f.f.Name() }

// Write writes p at the current offset. Its error names no file.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	f.wrote(n)
	return n, unwrap(err)
}

// WriteAt writes p at offset off. Its error names no file.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	f.wrote(n)
	return n, unwrap(err)
}

// writebackEvery is the amount of writing after which the writeback of a temporary file's
// dirty pages is started.
var writebackEvery int64 = 64 << 20

// wrote counts n bytes written to the temporary file: every writebackEvery bytes it starts
// the writeback of the file's dirty pages (where the system can: startWriteback), so that the
// disk writes them while the rest is written and Commit's flush waits for the last ones only
// (a 1.8 GB statistics file's flush took 0.5 s after the writing, before).
func (f *File) wrote(n int) {
	if f.direct || n <= 0 {
		return
	}
	if f.dirty.Add(int64(n)) >= writebackEvery {
		f.dirty.Store(0)
		startWriteback(f.f)
	}
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
	if f.direct {
		return wrapPath(f.path, f.f.Close())
	}
	name := f.f.Name()
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	live.mu.Lock()
	delete(live.temps, name)
	switch {
	case err != nil:
	case live.interrupted:
		err = ErrInterrupted
	default:
		if err = os.Rename(name, f.target); err == nil {
			live.committed = append(live.committed, f.target)
		}
	}
	live.mu.Unlock()
	if err != nil {
		os.Remove(name)
		return pathErr(f.path, err)
	}
	if err := syncDir(filepath.Dir(f.target)); err != nil {
		return pathErr(f.path, err)
	}
	return nil
}

// wrapPath is pathErr for an error that may be nil.
func wrapPath(path string, err error) error {
	if err == nil {
		return nil
	}
	return pathErr(path, err)
}

// Abort closes and removes the temporary file. It does nothing after Commit (successful or
// not) or a previous Abort, so it is safe to defer, or to call after a failed Commit.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	err := f.f.Close()
	if !f.direct {
		live.mu.Lock()
		delete(live.temps, f.f.Name())
		live.mu.Unlock()
		if rerr := os.Remove(f.f.Name()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = rerr
		}
	}
	return wrapPath(f.path, err)
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
// --force to overwrite)", which matches fs.ErrExist under errors.Is. A device or a pipe (say
// /dev/stdout) is written in place and needs no force; a directory is refused even with it.
// A failure to look at path (other than its absence) is returned too.
func CheckNew(path string, force bool) error {
	_, fi, err := resolve(path)
	switch {
	case err != nil:
		return pathErr(path, err)
	case fi == nil:
		return nil
	case fi.IsDir():
		return pathErr(path, syscall.EISDIR)
	case isStream(fi):
		return nil
	case !fi.Mode().IsRegular():
		return pathErr(path, errNotRegular)
	case !force:
		return &existsError{path}
	}
	return nil
}

// CheckOutputs runs CheckNew on each output (empty ones and "-", standard output, are
// skipped) and refuses an output that is one of the inputs, or another output, under any name
// (links included): "<output>: is also <input>, an input of this run". inputs are files; a
// missing input is ignored (its reader reports it).
func CheckOutputs(force bool, inputs []string, outputs ...string) error {
	type seen struct {
		name string
		fi   fs.FileInfo
		out  bool
	}
	var files []seen
	var targets [][2]string // outputs as named and resolved
	for _, in := range inputs {
		if fi, err := os.Stat(in); err == nil && fi.Mode().IsRegular() {
			files = append(files, seen{in, fi, false})
		}
	}
	for _, out := range outputs {
		if out == "" || out == "-" {
			continue
		}
		if err := CheckNew(out, force); err != nil {
			return err
		}
		target, _, _ := resolve(out)
		target = filepath.Clean(target)
		for _, o := range targets {
			if o[1] == target {
				return fmt.Errorf("%s: is also %s, another output of this run", out, o[0])
			}
		}
		targets = append(targets, [2]string{out, target})
		fi, err := os.Stat(out)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		for _, s := range files {
			if os.SameFile(s.fi, fi) {
				what := "an input of this run"
				if s.out {
					what = "another output of this run"
				}
				return fmt.Errorf("%s: is also %s, %s", out, s.name, what)
			}
		}
		files = append(files, seen{out, fi, true})
	}
	return nil
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
