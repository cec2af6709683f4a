package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawFile assembles a safetensors file by hand: the 8-byte length, the header text as given
// and dataLen bytes of data (0, 1, 2, ...), so that malformed headers can be written.
func rawFile(header string, dataLen int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	for i := range dataLen {
		b = append(b, byte(i))
	}
	return b
}

// writeRaw writes bytes to name inside dir and returns the path.
func writeRaw(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantErr fails unless err is non-nil, one line, and contains every substring.
func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", subs)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, s := range subs {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not contain %q", msg, s)
		}
	}
}

// validHeader is a well-formed three-tensor header used by several tests and fuzz seeds:
// a (F32 [2]), b (BF16 [2, 2]), c (F16 []), 18 data bytes.
const validHeader = `{"__metadata__":{"format":"pt"},` +
	`"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
	`"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]},` +
	`"c":{"dtype":"F16","shape":[],"data_offsets":[16,18]}}`
