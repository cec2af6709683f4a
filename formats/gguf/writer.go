package gguf

import (
	"fmt"
	"sync"

	"github.com/gquant/gquant/internal/atomicfile"
	problemlist "github.com/gquant/gquant/internal/problems"
)

// Writer writes one GGUF file. The header is written by Create; tensor data goes straight to
// its precomputed offset, so tensors may be written in any order and from several goroutines.
// Nothing appears at the final path until Commit renames the temporary file.
type Writer struct {
	path       string
	tmp        *atomicfile.File
	tensors    []TensorInfo
	dataOffset uint64

	mu       sync.Mutex
	written  []uint64 // bytes written per tensor; complete when equal to its Size
	inflight int
	closed   bool
}

// Create lays out h (see Header.Layout), creates a temporary file beside path (see
// atomicfile.Create), writes the header and sizes the file, padding included; the padding
// reads as zeros.
func Create(path string, h *Header) (*Writer, error) {
	if err := h.Layout(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	hdr, total := h.encode()
	tmp, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	w := &Writer{
		path:       path,
		tmp:        tmp,
		tensors:    append([]TensorInfo(nil), h.Tensors...),
		dataOffset: uint64(len(hdr)),
		written:    make([]uint64, len(h.Tensors)),
	}
	_, err = tmp.WriteAt(hdr, 0)
	if err == nil {
		err = tmp.Truncate(int64(total))
	}
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// WriteTensor writes tensor i's data, which must be exactly its Size long. It is safe for
// concurrent use; each tensor must be written once.
func (w *Writer) WriteTensor(i int, data []byte) error {
	w.mu.Lock()
	if err := w.checkWrite(i, data); err != nil {
		w.mu.Unlock()
		return err
	}
	w.mu.Unlock()
	return w.WriteTensorPart(i, 0, data)
}

// WriteTensorPart writes data at byte offset off within tensor i, so that a tensor can be
// streamed in row blocks by several goroutines. The parts of one tensor must not overlap; the
// tensor counts as written once its parts add up to its Size.
func (w *Writer) WriteTensorPart(i int, off uint64, data []byte) error {
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return fmt.Errorf("%s: write after Commit or Abort", w.path)
	case i < 0 || i >= len(w.tensors):
		w.mu.Unlock()
		return fmt.Errorf("%s: tensor index %d out of range [0, %d)", w.path, i, len(w.tensors))
	case off+uint64(len(data)) > w.tensors[i].Size || w.written[i]+uint64(len(data)) > w.tensors[i].Size:
		w.mu.Unlock()
		return fmt.Errorf("%s: %s: %d bytes at offset %d overrun its %d bytes (or overlap earlier writes)",
			w.path, problemlist.Printable(w.tensors[i].Name), len(data), off, w.tensors[i].Size)
	}
	w.written[i] += uint64(len(data))
	w.inflight++
	w.mu.Unlock()

	t := w.tensors[i]
	_, err := w.tmp.WriteAt(data, int64(w.dataOffset+t.Offset+off))

	w.mu.Lock()
	w.inflight--
	if err != nil {
		w.written[i] -= uint64(len(data))
	}
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %s: %w", w.path, problemlist.Printable(t.Name), err)
	}
	return nil
}

// checkWrite validates a WriteTensor call; w.mu is held.
func (w *Writer) checkWrite(i int, data []byte) error {
	switch {
	case w.closed:
		return fmt.Errorf("%s: write after Commit or Abort", w.path)
	case i < 0 || i >= len(w.tensors):
		return fmt.Errorf("%s: tensor index %d out of range [0, %d)", w.path, i, len(w.tensors))
	case uint64(len(data)) != w.tensors[i].Size:
		return fmt.Errorf("%s: %s: got %d bytes of data, want %d", w.path, w.tensors[i].Name, len(data), w.tensors[i].Size)
	case w.written[i] != 0:
		return fmt.Errorf("%s: %s: written twice", w.path, w.tensors[i].Name)
	}
	return nil
}

// Commit checks that every tensor was written, flushes the file to disk and renames it to the
// final path. When tensors are missing or writes are still running it fails and leaves the
// writer open; on any other failure the temporary file is removed. Call Abort after a failed
// Commit to be sure.
func (w *Writer) Commit() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("%s: Commit after Commit or Abort", w.path)
	}
	if w.inflight > 0 {
		return fmt.Errorf("%s: Commit while %d tensor writes are running", w.path, w.inflight)
	}
	var ps problems
	for i, n := range w.written {
		switch {
		case n == 0:
			ps.add("%s: not written", problemlist.Printable(w.tensors[i].Name))
		case n != w.tensors[i].Size:
			ps.add("%s: only %d of %d bytes written", problemlist.Printable(w.tensors[i].Name), n, w.tensors[i].Size)
		}
	}
	if err := ps.err(); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	w.closed = true
	return w.tmp.Commit()
}

// Abort closes and removes the temporary file. It does nothing after a successful Commit, and
// may be called more than once.
func (w *Writer) Abort() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.tmp.Abort()
}

// WriteFile writes a whole file: data(i) supplies tensor i's bytes, called in order. An error
// from data is returned as "<path>: <tensor>: <error>", so data should not name the file or the
// tensor again. On any error nothing is left at path.
func WriteFile(path string, h *Header, data func(i int) ([]byte, error)) error {
	w, err := Create(path, h)
	if err != nil {
		return err
	}
	for i := range h.Tensors {
		b, err := data(i)
		if err == nil {
			err = w.WriteTensor(i, b)
		} else {
			err = fmt.Errorf("%s: %s: %w", path, problemlist.Printable(h.Tensors[i].Name), err)
		}
		if err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Commit(); err != nil {
		w.Abort()
		return err
	}
	return nil
}
