package convert

import (
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/internal/atomicfile"
)

// writeGGUF executes the plan into one GGUF file, or into split parts when SplitMaxSize asks.
// On any error every temporary file is removed and nothing appears at the output paths.
func writeGGUF(inv *Inventory, p *Plan, kvs []gguf.KV, out string, o Options) error {
	h := Header(p, kvs)
	headers := []*gguf.Header{h}
	paths := []string{out}
	if o.SplitMaxSize > 0 {
		hs, err := gguf.SplitHeaders(h, o.SplitMaxSize)
		if err != nil {
			return fmt.Errorf("%s: %v", out, err)
		}
		if len(hs) > 1 {
			headers, paths = hs, nil
			for i, hp := range hs {
				paths = append(paths, gguf.SplitName(out, i, len(hs)))
				if err := hp.Layout(); err != nil {
					return fmt.Errorf("%s: %v", paths[i], err)
				}
				var bytes uint64
				if n := len(hp.Tensors); n > 0 {
					bytes = hp.Tensors[n-1].Offset + hp.Tensors[n-1].Size
				}
				p.Parts = append(p.Parts, Part{Path: paths[i], Bytes: bytes, OverLimit: bytes > uint64(o.SplitMaxSize)})
			}
		}
	}
	for _, path := range paths[min(1, len(paths)-1):] {
		if err := atomicfile.CheckNew(path, o.Force); err != nil {
			return err
		}
	}
	// where[i] locates plan tensor i: part and index within the part.
	type loc struct{ part, idx int }
	where := make([]loc, 0, len(p.Tensors))
	for pi, hp := range headers {
		for ti := range hp.Tensors {
			where = append(where, loc{pi, ti})
		}
	}
	writers := make([]*gguf.Writer, len(headers))
	abort := func() {
		for _, w := range writers {
			if w != nil {
				w.Abort()
			}
		}
	}
	for i, hp := range headers {
		w, err := gguf.Create(paths[i], hp)
		if err != nil {
			abort()
			return err
		}
		writers[i] = w
	}
	sink := func(t, _ int, off uint64, data []byte) error {
		l := where[t]
		return writers[l.part].WriteTensorPart(l.idx, off, data)
	}
	if err := Execute(inv, p, sink, ExecOptions{Threads: o.Threads, Progress: o.Progress, Sequence: o.Sequence}); err != nil {
		abort()
		return err
	}
	for _, w := range writers {
		if err := w.Commit(); err != nil {
			abort()
			return err
		}
	}
	return nil
}
