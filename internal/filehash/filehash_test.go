package filehash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The published FIPS 180-2 example: SHA-256("abc").
func TestSHA256PublishedVector(t *testing.T) {
	p := filepath.Join(t.TempDir(), "abc")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := SHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got != want {
		t.Fatalf("SHA256(abc) = %s, want %s", got, want)
	}
}

func TestSHA256MissingFileNamesIt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "absent.bin")
	_, err := SHA256(p)
	if err == nil || !strings.Contains(err.Error(), "absent.bin") {
		t.Fatalf("err = %v, want an error naming absent.bin", err)
	}
}
