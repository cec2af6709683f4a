package tokenizer

import (
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// TestGGUFFile writes the metadata to a vocabulary-only GGUF file with
// formats/gguf, reads it back and tokenizes with the result.
func TestGGUFFile(t *testing.T) {
	for _, dir := range []string{stories260k, "testdata/tiny-qwen"} {
		tk := loadT(t, dir)
		kvs, err := tk.GGUFMetadata()
		if err != nil {
			t.Fatal(err)
		}
		kvs = append(kvs, gguf.KV{Key: "general.architecture", Value: "llama"})
		path := filepath.Join(t.TempDir(), "vocab.gguf")
		if err := gguf.WriteFile(path, &gguf.Header{KVs: kvs}, nil); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromGGUF(func(k string) (any, bool) { kv, ok := f.Get(k); return kv.Value, ok })
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		text := "Once upon a time, there was a little dog. 12345 café"
		if got, want := back.Encode(text, true), tk.Encode(text, true); !equalIDs(got, want) {
			t.Errorf("%s: from the file %v, want %v", dir, got, want)
		}
	}
}
