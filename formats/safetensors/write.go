package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/gquant/gquant/internal/atomicfile"
)

// NamedTensor is a tensor to write. Its bytes come from Data or, when Data is nil, from
// Source, which is called once, at write time, and must write exactly the tensor's size:
// this lets a generator stream a large tensor without holding it.
type NamedTensor struct {
	Name   string
	DType  DType
	Shape  []int
	Data   []byte
	Source func(w io.Writer) error
}

// Size returns the tensor's byte size from its dtype and shape.
func (t NamedTensor) Size() int64 {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// WriteFile writes a safetensors file: to a temporary file beside path, then renamed over
// it, so that path never holds a partial file. Tensors are laid out in name order; metadata
// (may be nil) becomes the header's __metadata__. Output depends only on the arguments.
func WriteFile(path string, tensors []NamedTensor, metadata map[string]string) error {
	tmp, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer tmp.Abort() // does nothing after Commit
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err = Encode(bw, tensors, metadata); err != nil {
		return prefixPath(path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return tmp.Commit()
}

// Encode writes a safetensors file to w (see WriteFile). Errors name the tensor but no file.
func Encode(w io.Writer, tensors []NamedTensor, metadata map[string]string) error {
	order, err := checkTensors(tensors)
	if err != nil {
		return err
	}
	hdr, err := encodeHeader(tensors, order, metadata)
	if err != nil {
		return err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	for _, i := range order {
		t := &tensors[i]
		if t.Data != nil {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
			continue
		}
		cw := &countingWriter{w: w}
		if err := t.Source(cw); err != nil {
			return fmt.Errorf("%s: %w", quoteName(t.Name), err)
		}
		if cw.n != t.Size() {
			return fmt.Errorf("%s: source wrote %d bytes, want %d", quoteName(t.Name), cw.n, t.Size())
		}
	}
	return nil
}

// checkTensors validates the tensors to write and returns their indices in name order.
func checkTensors(tensors []NamedTensor) ([]int, error) {
	var errs []string
	seen := make(map[string]bool, len(tensors))
	for _, t := range tensors {
		bad := func(format string, args ...any) {
			errs = append(errs, quoteName(t.Name)+": "+fmt.Sprintf(format, args...))
		}
		switch {
		case t.Name == "" || t.Name == "__metadata__":
			bad("invalid tensor name")
		case seen[t.Name]:
			bad("tensor given twice")
		}
		seen[t.Name] = true
		if !t.DType.Supported() {
			bad("unsupported dtype %q", t.DType)
		}
		for _, d := range t.Shape {
			if d < 0 {
				bad("negative dimension in shape %v", t.Shape)
			}
		}
		switch {
		case t.Data != nil && int64(len(t.Data)) != t.Size():
			bad("%d bytes of data, shape %v of %s needs %d", len(t.Data), t.Shape, t.DType, t.Size())
		case t.Data == nil && t.Source == nil && t.Size() != 0:
			bad("neither Data nor Source given")
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(tensors[a].Name, tensors[b].Name) })
	return order, nil
}

// encodeHeader builds the JSON header, padded with spaces to a multiple of 8 bytes so that
// the data section is aligned. Metadata keys are sorted, so output is deterministic.
func encodeHeader(tensors []NamedTensor, order []int, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		m, err := json.Marshal(metadata) // encoding/json sorts map keys
		if err != nil {
			return nil, err
		}
		b.WriteString(`"__metadata__":`)
		b.Write(m)
	}
	var off int64
	for k, i := range order {
		t := &tensors[i]
		if k > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(t.Name)
		b.Write(name)
		b.WriteString(`:{"dtype":"`)
		b.WriteString(string(t.DType))
		b.WriteString(`","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		size := t.Size()
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, off+size)
		off += size
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), nil
}

// countingWriter counts the bytes a tensor source writes.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// prefixPath puts the file name in front of an error that names only a tensor.
func prefixPath(path string, err error) error {
	return fmt.Errorf("%s: %w", path, err)
}
