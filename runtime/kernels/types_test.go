package kernels

import (
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// TestTypeTable checks that the kernels' types take their names and sizes from formats/gguf's
// table and that only the kernels' own list is supported.
func TestTypeTable(t *testing.T) {
	for _, wt := range Types {
		g := gguf.Type(wt)
		if !wt.Supported() || wt.String() != g.String() || wt.BlockSize() != g.BlockSize() || wt.TypeSize() != g.TypeSize() {
			t.Errorf("%v: %v %d %d, gguf %v %d %d", wt, wt.String(), wt.BlockSize(), wt.TypeSize(), g, g.BlockSize(), g.TypeSize())
		}
		if rb, err := wt.RowBytes(256); err != nil || rb != g.RowBytes(256) {
			t.Errorf("%v: RowBytes(256) = %d, %v; gguf %d", wt, rb, err, g.RowBytes(256))
		}
	}
	for _, wt := range []WType{WType(gguf.Q8_1), WType(gguf.Q8_K), WType(gguf.I8), WType(gguf.F64), 99} {
		if wt.Supported() || wt.BlockSize() != 0 {
			t.Errorf("%v is supported", wt)
		}
		if _, err := wt.RowBytes(256); err == nil {
			t.Errorf("%v: RowBytes took it", wt)
		}
	}
	if got := WType(gguf.Q8_1).String(); got != "Q8_1" {
		t.Errorf("Q8_1 is named %q", got)
	}
	if got := WType(99).String(); got != "type(99)" {
		t.Errorf("type 99 is named %q", got)
	}
}
