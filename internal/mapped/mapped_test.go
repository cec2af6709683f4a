//go:build unix

package mapped

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file truncated while mapped faults on its lost pages: under Guard that is an error naming
// the file, also when the mapping has been released while the panic unwound.
func TestFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Map(f, 1<<20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var got error
	func() {
		defer Recover(func(err error) { got = err })
		Guard()
		defer Unmap(b) // runs before Recover, as a model's Close does
		sink = b[len(b)-1]
		t.Fatal("reading a truncated page did not fault")
	}()
	if got == nil || got.Error() != path+": the file changed while being read (truncated or replaced?)" {
		t.Errorf("fault: %v", got)
	}
	// A wrapped fault (a pool re-raising its worker's panic) is recognised too.
	if Fault(errors.New("plain")) != nil || Fault("text") != nil || Fault(nil) != nil {
		t.Errorf("a panic that is no fault gives an error")
	}
}

// A fault outside any mapping (a nil pointer) is not reported as a file error: Recover
// re-raises it.
func TestNotAFault(t *testing.T) {
	defer func() {
		v := recover()
		if v == nil || Fault(v) != nil || !strings.Contains(v.(error).Error(), "nil pointer") {
			t.Errorf("recovered %v", v)
		}
	}()
	defer Recover(func(err error) { t.Errorf("reported %v", err) })
	var p *[4]byte
	sink = p[1]
}

var sink byte
