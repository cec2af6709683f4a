package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Writing a tensor in parts, out of order, gives the same file as writing it whole.
func TestWriteTensorPart(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 4*64)
	for i := range data {
		data[i] = byte(i * 7)
	}
	h := func() *Header {
		return &Header{KVs: []KV{{Key: "general.architecture", Value: "llama"}},
			Tensors: []TensorInfo{{Name: "a", Type: F32, Shape: []uint64{16, 4}}, {Name: "b", Type: F32, Shape: []uint64{64}}}}
	}
	whole := filepath.Join(dir, "whole.gguf")
	if err := WriteFile(whole, h(), func(i int) ([]byte, error) { return data, nil }); err != nil {
		t.Fatal(err)
	}
	parts := filepath.Join(dir, "parts.gguf")
	w, err := Create(parts, h())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{3, 0, 2, 1} { // rows of 64 bytes, out of order
		if err := w.WriteTensorPart(0, uint64(r*64), data[r*64:(r+1)*64]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteTensorPart(1, 128, data[128:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err == nil || !strings.Contains(err.Error(), "b: only 128 of 256 bytes written") {
		t.Fatalf("Commit with a partial tensor: %v", err)
	}
	if err := w.WriteTensorPart(1, 0, data[:128]); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensorPart(1, 200, data[:100]); err == nil {
		t.Fatal("overrun accepted")
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(whole)
	b, _ := os.ReadFile(parts)
	if !bytes.Equal(a, b) {
		t.Fatal("parts and whole differ")
	}
}
