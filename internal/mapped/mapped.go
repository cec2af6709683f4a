// Package mapped maps input files read-only, whole, and turns a memory fault on a mapping
// (the file was truncated or replaced while mapped, so its pages are gone: SIGBUS) into an
// error naming the file instead of a crash with a stack trace.
//
// Every goroutine that reads mapped bytes calls Guard first and recovers: Fault(v) gives the
// error for a recovered value that is such a fault, and nil for any other panic (which the
// goroutine re-raises). Where mmap is not available Map reads the file into memory.
package mapped

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"
)

// mapping is a registered mapping: [start, start+n) holds the file name.
type mapping struct {
	start, n uintptr
	name     string
}

// registry holds the live mappings and the ranges of unmapped ones until a new mapping
// overlaps them: a fault is often looked up after the mapping is gone, since the deferred
// Closes run while the panic unwinds, before the recover that reports it.
var registry struct {
	mu   sync.Mutex
	maps []mapping
}

func register(b []byte, name string) {
	if len(b) == 0 {
		return
	}
	m := mapping{uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), name}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	kept := registry.maps[:0]
	for _, o := range registry.maps {
		if o.start+o.n <= m.start || m.start+m.n <= o.start {
			kept = append(kept, o)
		}
	}
	registry.maps = append(kept, m)
}

// lookup returns the name of the file mapped at addr, or "".
func lookup(addr uintptr) string {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for _, m := range registry.maps {
		if addr-m.start < m.n {
			return m.name
		}
	}
	return ""
}

// Guard makes a memory fault on the calling goroutine a panic (a runtime.Error with the
// faulting address) instead of a fatal crash. Call it at the start of every goroutine that
// reads mapped bytes, and recover with Fault.
func Guard() { debug.SetPanicOnFault(true) }

// addrError is the runtime's error for a memory fault under Guard.
type addrError interface {
	error
	Addr() uintptr
}

// Fault returns the error for a recovered panic value v when it is a memory fault in a file
// mapped by Map (also when v is an error wrapping one): "<file>: the file changed while being
// read (truncated or replaced?)". For any other value, a fault elsewhere included, it is nil.
func Fault(v any) error {
	err, ok := v.(error)
	if !ok {
		return nil
	}
	var ae addrError
	if !errors.As(err, &ae) {
		return nil
	}
	name := lookup(ae.Addr())
	if name == "" {
		return nil
	}
	return fmt.Errorf("%s: the file changed while being read (truncated or replaced?)", name)
}

// Recover is for a deferred call in a guarded goroutine: it recovers a fault in a mapped file
// and passes its error to fail; any other panic is re-raised.
//
//	defer mapped.Recover(func(err error) { ... })
//
// It must be called directly by the deferred function (recover's rule), so use it as
// `defer mapped.Recover(fail)`.
func Recover(fail func(error)) {
	v := recover()
	if v == nil {
		return
	}
	if err := Fault(v); err != nil {
		fail(err)
		return
	}
	panic(v)
}
