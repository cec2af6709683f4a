package export

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/onnx"
	"github.com/gquant/gquant/internal/atomicfile"
)

// maxInline is the size of the weights, as float32, above which WriteONNX moves them into an
// external data file beside the model (protobuf caps a message at 2 GiB); a variable for tests.
var maxInline int64 = 1 << 30

// WriteONNX exports f as ONNX to path (temp file + rename; an existing file needs force),
// the weights in PATH.data when they exceed 1 GiB as float32, and returns the files written.
func WriteONNX(path string, f *gqf.File, o Options, force bool) ([]Written, error) {
	var size int64
	for _, t := range f.Manifest.Tensors {
		n := int64(4)
		for _, d := range t.Shape {
			n *= d
		}
		size += n
	}
	dataPath := ""
	if size > maxInline {
		dataPath = path + ".data"
	}
	if err := atomicfile.CheckNew(path, force); err != nil {
		return nil, err
	}
	var ext *onnx.External
	var data *atomicfile.File
	var bw *bufio.Writer
	if dataPath != "" {
		if err := atomicfile.CheckNew(dataPath, force); err != nil {
			return nil, err
		}
		var err error
		if data, err = atomicfile.Create(dataPath); err != nil {
			return nil, err
		}
		defer data.Abort()
		bw = bufio.NewWriterSize(data, 1<<20)
		ext = onnx.NewExternal(bw, filepath.Base(dataPath))
	}
	e, err := run(f, o.QDQ, nil, ext)
	if err != nil {
		return nil, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(onnx.NewModel(e.g, o.Version))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var out []Written
	if data != nil {
		if err := bw.Flush(); err != nil {
			return nil, fmt.Errorf("%s: %w", dataPath, err)
		}
		if err := data.Commit(); err != nil {
			return nil, err
		}
		out = append(out, Written{Path: dataPath, Size: ext.Size()})
	}
	if err := atomicfile.WriteFile(path, b); err != nil {
		if dataPath != "" {
			os.Remove(dataPath)
		}
		return nil, err
	}
	return append([]Written{{Path: path, Size: int64(len(b))}}, out...), nil
}

// WriteAIMET exports the encodings of f as AIMET JSON of the given version (1.0.0 or 0.6.1).
func WriteAIMET(path string, f *gqf.File, version string, force bool) error {
	enc, err := AIMET(f)
	if err != nil {
		return err
	}
	return enc.WriteFile(path, version, force)
}

// WriteAIMETKV exports the encodings of f's deployment graphs (AIMETKV) as AIMET JSON.
func WriteAIMETKV(path string, f *gqf.File, ar, ctx int, version string, force bool) error {
	enc, err := AIMETKV(f, ar, ctx)
	if err != nil {
		return err
	}
	return enc.WriteFile(path, version, force)
}
