package kernels

import (
	"runtime"
	"sync"
	"unsafe"
)

// Packed weights (the repacked copies of ggml matrices, gqf group matrices) live outside the
// Go heap where the system allows: they are long-lived and as big as the model, and on the
// heap they would set the garbage collector's target to twice the model, letting the small
// garbage of each evaluation (logits, scratch) pile up to that much before a collection.
// Matrix.Free releases them (the runtime does at Model.Close); a matrix that becomes
// unreachable releases them too.

// bigAlloc is the size from which packed weights are mapped instead of allocated.
const bigAlloc = 1 << 20

// weightBuf is a block of packed weights: mapped memory, or a heap slice.
type weightBuf struct {
	mu   sync.Mutex
	data []byte // mapped (nil once freed); nil for heap buffers
}

// free unmaps the buffer once.
func (w *weightBuf) free() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.data != nil {
		unmapAnon(w.data)
		w.data = nil
	}
}

// allocWeights returns n zero bytes, 64-byte aligned, for the weights of owner (whose
// unreachability releases them), and the buffer to free explicitly (nil for heap memory).
func allocWeights[T any](owner *T, n int) ([]byte, *weightBuf) {
	if n >= bigAlloc {
		if b := mapAnon(n); b != nil {
			w := &weightBuf{data: b}
			runtime.AddCleanup(owner, func(w *weightBuf) { w.free() }, w)
			return b[:n:n], w
		}
	}
	return alignedBytes(n), nil
}

// alignedBytes returns n zero bytes starting at a 64-byte boundary.
func alignedBytes(n int) []byte {
	buf := make([]byte, n+63)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) & 63)
	return buf[off : off+n : off+n]
}

// Free releases m's packed weights now (those mapped outside the heap); m must not be used
// afterwards. Matrices over caller-owned bytes (NewMatrix) keep those.
func (m *Matrix) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil {
		m.buf.free()
		m.Data = nil
	}
	if p := m.pk.Load(); p != nil && p.buf != nil {
		p.buf.free()
		m.pk.Store(nil)
	}
}
