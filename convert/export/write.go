package export

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/internal/atomicfile"
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
	if err := atomicfile.CheckNew(path, force); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b)
}

// WriteAIMET exports the encodings of f as AIMET JSON of the given version (1.0.0 or 0.6.1).
func WriteAIMET(path string, f *gqf.File, version string, force bool) error {
	enc, err := AIMET(f)
	if err != nil {
		return err
	}
	return enc.WriteFile(path, version, force)
}
