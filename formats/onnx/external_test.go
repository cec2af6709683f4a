package onnx

import (
	"bytes"
	"strings"
	"testing"
)

// TestExternal: large initializers move to the data file, aligned, with location, offset and
// length; small ones stay inline; a name placed again with the same bytes reuses its data,
// with other bytes is refused.
func TestExternal(t *testing.T) {
	var buf bytes.Buffer
	x := NewExternal(&buf, "w.data")
	big := make([]float32, 1000)
	for i := range big {
		big[i] = float32(i)
	}
	small := FloatTensor("s", []int64{2}, []float32{1, 2})
	a, b := FloatTensor("a", []int64{1000}, big), FloatTensor("b", []int64{1000}, big)
	for _, tt := range []*TensorProto{small, a, b} {
		if err := x.Place(tt); err != nil {
			t.Fatal(err)
		}
	}
	if small.GetDataLocation() != TensorProto_DEFAULT || len(small.RawData) != 8 {
		t.Errorf("small tensor moved: %v", small)
	}
	ext := func(tt *TensorProto) map[string]string {
		m := map[string]string{}
		for _, e := range tt.ExternalData {
			m[e.GetKey()] = e.GetValue()
		}
		return m
	}
	if ea, eb := ext(a), ext(b); a.GetDataLocation() != TensorProto_EXTERNAL || a.RawData != nil ||
		ea["location"] != "w.data" || ea["offset"] != "0" || ea["length"] != "4000" || eb["offset"] != "4096" {
		t.Errorf("a %v, b %v", ea, eb)
	}
	if x.Size() != 8096 || buf.Len() != 8096 || !bytes.Equal(buf.Bytes()[4096:4100], []byte{0, 0, 0, 0}) || buf.Bytes()[4100] != 0 || buf.Bytes()[4102] != 0x80 {
		t.Errorf("data file: %d bytes", buf.Len())
	}
	again := FloatTensor("a", []int64{1000}, big)
	if err := x.Place(again); err != nil || ext(again)["offset"] != "0" || x.Size() != 8096 {
		t.Errorf("same tensor again: %v, %v, size %d", err, ext(again), x.Size())
	}
	big[0] = 7
	if err := x.Place(FloatTensor("a", []int64{1000}, big)); err == nil || !strings.Contains(err.Error(), "two different values") {
		t.Errorf("other bytes under a placed name: %v", err)
	}
}
