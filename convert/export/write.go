package export

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/formats/gqf"
)

// WriteONNX exports f as ONNX to path (temp file + rename; an existing file needs force).
func WriteONNX(path string, f *gqf.File, o Options, force bool) error {
	m, err := ONNX(f, o)
	if err != nil {
		return err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return writeAtomic(path, b, force)
}

// WriteAIMET exports the encodings of f as AIMET JSON of the given version (1.0.0 or 0.6.1).
func WriteAIMET(path string, f *gqf.File, version string, force bool) error {
	enc, err := AIMET(f)
	if err != nil {
		return err
	}
	return enc.WriteFile(path, version, force)
}

// writeAtomic writes b to path through a temporary file renamed into place.
func writeAtomic(path string, b []byte, force bool) error {
	if !force {
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s: output exists (use --force to overwrite)", path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
