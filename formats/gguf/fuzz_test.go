package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to Parse. A file that parses must be self-consistent, and
// when its header can be written again, writing, parsing and writing once more must give the
// same bytes.
func FuzzOpen(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.gguf")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, c := range malformed {
		f.Add(c.file.bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data, "fuzz.gguf")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.gguf: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error not one line naming the file: %q", err)
			}
			return
		}
		for i, ti := range g.Tensors {
			if uint64(len(g.TensorData(i))) != ti.Size {
				t.Fatalf("%s: %d bytes of data, size %d", ti.Name, len(g.TensorData(i)), ti.Size)
			}
		}
		for _, kv := range g.KVs {
			if got, ok := g.Get(kv.Key); !ok || got.Key != kv.Key {
				t.Fatalf("Get(%q) failed", kv.Key)
			}
		}
		h := &Header{KVs: g.KVs, Tensors: append([]TensorInfo(nil), g.Tensors...)}
		if h.Layout() != nil {
			return // the writer is stricter than the reader (empty names, 0-D shapes)
		}
		hdr, total := h.encode()
		if total > 1<<20 {
			return
		}
		buf := make([]byte, total)
		copy(buf, hdr)
		g2, err := Parse(buf, "again.gguf")
		if err != nil {
			t.Fatalf("our own output does not parse: %v", err)
		}
		h2 := &Header{KVs: g2.KVs, Tensors: g2.Tensors}
		if err := h2.Layout(); err != nil {
			t.Fatalf("layout of reparsed header: %v", err)
		}
		if hdr2, _ := h2.encode(); !bytes.Equal(hdr, hdr2) {
			t.Fatal("header bytes changed after a round trip")
		}
	})
}
