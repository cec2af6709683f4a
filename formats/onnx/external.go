package onnx

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/proto"
)

// ExternalAlign is the alignment of every tensor in an external data file: a page, so that
// a runtime can map each tensor in place.
const ExternalAlign = 4096

// ExternalMin is the smallest raw size that External moves out of the model (what the onnx
// package's save_model leaves inline by default).
const ExternalMin = 1024

// External moves the data of large initializers into one external data file (ONNX's
// data_location EXTERNAL, with location, offset and length), written in order: the models
// stay small whatever the size of the weights. Several models may share the file: a tensor
// placed again under a name already placed reuses the stored data when its bytes are the
// same, and is refused when they differ.
type External struct {
	location string
	w        io.Writer
	off      int64
	placed   map[string]extent
}

type extent struct {
	off, n int64
	sum    [sha256.Size]byte
}

// NewExternal returns an External writing to w, a file named location beside the models.
func NewExternal(w io.Writer, location string) *External {
	return &External{location: location, w: w, placed: map[string]extent{}}
}

// Size is the number of bytes written so far.
func (x *External) Size() int64 { return x.off }

// Place moves t's raw data to the file when it holds at least ExternalMin bytes.
func (x *External) Place(t *TensorProto) error {
	raw := t.GetRawData()
	if len(raw) < ExternalMin {
		return nil
	}
	sum := sha256.Sum256(raw)
	ext, ok := x.placed[t.GetName()]
	switch {
	case ok && (ext.n != int64(len(raw)) || !bytes.Equal(ext.sum[:], sum[:])):
		return fmt.Errorf("initializer %s: two different values under one name in %s", t.GetName(), x.location)
	case !ok:
		if pad := (ExternalAlign - x.off%ExternalAlign) % ExternalAlign; pad > 0 {
			if _, err := x.w.Write(make([]byte, pad)); err != nil {
				return err
			}
			x.off += pad
		}
		if _, err := x.w.Write(raw); err != nil {
			return err
		}
		ext = extent{off: x.off, n: int64(len(raw)), sum: sum}
		x.off += ext.n
		x.placed[t.GetName()] = ext
	}
	t.RawData = nil
	t.DataLocation = TensorProto_EXTERNAL.Enum()
	t.ExternalData = []*StringStringEntryProto{
		{Key: proto.String("location"), Value: proto.String(x.location)},
		{Key: proto.String("offset"), Value: proto.String(strconv.FormatInt(ext.off, 10))},
		{Key: proto.String("length"), Value: proto.String(strconv.FormatInt(ext.n, 10))},
	}
	return nil
}
