package convert

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/half"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// ExecOptions control execution; none of them changes the output bytes.
type ExecOptions struct {
	Threads int // workers (default 1)
	// Imatrix maps GGUF tensor names to per-column importance (row length), for the
	// importance-weighted encoders. Tensors without an entry are quantized without one.
	Imatrix map[string][]float32
	// Progress, when set, is called with the source bytes done so far and the total.
	Progress func(done, total int64)
	// BlockBytes is the float32 working set of one job (default 4 MiB).
	BlockBytes int
}

// job is a block of rows of one tensor.
type job struct {
	t      int // index into plan.Tensors
	r0, r1 int // GGUF rows
}

// rowsOf returns (rows, row length) of a tensor in GGUF order.
func rowsOf(pt *PlannedTensor) (int, int) {
	n := int(gguf.ElementCount(pt.Shape))
	return n / int(pt.Shape[0]), int(pt.Shape[0])
}

// Execute writes the planned tensors through sink, in parallel row blocks. Peak memory is
// Threads × BlockBytes plus what the source mapping keeps resident; each source tensor's pages
// are released once all its rows are done.
func Execute(inv *Inventory, p *Plan, sink func(t int, off uint64, data []byte) error, opts ExecOptions) error {
	threads := opts.Threads
	if threads < 1 {
		threads = 1
	}
	blockBytes := opts.BlockBytes
	if blockBytes <= 0 {
		blockBytes = 4 << 20
	}
	var jobs []job
	remaining := make([]atomic.Int64, len(p.Tensors))
	var total int64
	for i := range p.Tensors {
		pt := &p.Tensors[i]
		rows, n := rowsOf(pt)
		per := max(1, blockBytes/(4*n))
		for r := 0; r < rows; r += per {
			jobs = append(jobs, job{i, r, min(rows, r+per)})
			remaining[i].Add(1)
		}
		total += int64(rows * n * 2)
	}
	var (
		next     atomic.Int64
		done     atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return firstErr != nil }
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var src []float32
			var dst []byte
			for !failed() {
				k := int(next.Add(1) - 1)
				if k >= len(jobs) {
					return
				}
				j := jobs[k]
				pt := &p.Tensors[j.t]
				_, n := rowsOf(pt)
				nr := j.r1 - j.r0
				src = grow(src, nr*n)
				if err := inv.readRows(pt, p.spec, j.r0, j.r1, src); err != nil {
					fail(err)
					return
				}
				var err error
				dst, err = encodeRows(dst, pt, src, nr, n, opts.Imatrix[pt.Name])
				if err != nil {
					fail(err)
					return
				}
				off := uint64(j.r0) * uint64(pt.typ.RowBytes(n))
				if err := sink(j.t, off, dst); err != nil {
					fail(err)
					return
				}
				if remaining[j.t].Add(-1) == 0 && pt.Source != "" {
					inv.release(pt.Source)
				}
				d := done.Add(int64(nr * n * 2))
				if opts.Progress != nil {
					opts.Progress(d, total)
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// encodeRows encodes nr rows of n floats to the tensor's type.
func encodeRows(dst []byte, pt *PlannedTensor, src []float32, nr, n int, imatrix []float32) ([]byte, error) {
	size := nr * pt.typ.RowBytes(n)
	dst = grow(dst, size)
	switch pt.typ {
	case gguf.F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return dst, nil
	case gguf.F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToF16(v))
		}
		return dst, nil
	case gguf.BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToBF16(v))
		}
		return dst, nil
	}
	enc, err := quantize.For(pt.typ)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", pt.Name, err)
	}
	if imatrix != nil && len(imatrix) != n {
		return nil, fmt.Errorf("%s: importance matrix has %d columns, tensor rows have %d", pt.Name, len(imatrix), n)
	}
	enc.Quantize(dst, src, nr, n, imatrix)
	return dst, nil
}

// readRows fills dst with GGUF rows [r0,r1) of a planned tensor as float32, applying its
// transform, and rejects non-finite weights.
func (inv *Inventory) readRows(pt *PlannedTensor, spec *arch.Spec, r0, r1 int, dst []float32) error {
	_, n := rowsOf(pt)
	if pt.gen {
		vals := generated(pt, spec)
		copy(dst, vals[r0*n:r1*n])
		return nil
	}
	data, dtype, file, err := inv.data(pt.Source)
	if err != nil {
		return err
	}
	esz := 2
	if dtype == "F32" {
		esz = 4
	}
	rowLen := n
	if len(pt.Shape) == 1 { // 1-D tensors: the transform permutes elements
		rowLen = 1
		r0, r1 = 0, n
	}
	for r := r0; r < r1; r++ {
		sr := arch.SourceRow(pt.trans, spec, r)
		in := data[sr*rowLen*esz : (sr+1)*rowLen*esz]
		out := dst[(r-r0)*rowLen : (r-r0+1)*rowLen]
		switch dtype {
		case "BF16":
			// widening is exact; a bf16 is non-finite exactly when its exponent bits are all set
			bad := false
			for i := range out {
				h := binary.LittleEndian.Uint16(in[2*i:])
				bad = bad || h&0x7f80 == 0x7f80
				out[i] = math.Float32frombits(uint32(h) << 16)
			}
			if bad {
				return nonFinite(file, pt.Source, out, sr)
			}
		case "F16":
			bad := false
			for i := range out {
				h := binary.LittleEndian.Uint16(in[2*i:])
				bad = bad || h&0x7c00 == 0x7c00
				out[i] = half.F16ToF32(h)
			}
			if bad {
				return nonFinite(file, pt.Source, out, sr)
			}
		case "F32":
			bad := false
			for i := range out {
				u := binary.LittleEndian.Uint32(in[4*i:])
				bad = bad || u&0x7f800000 == 0x7f800000
				out[i] = math.Float32frombits(u)
			}
			if bad {
				return nonFinite(file, pt.Source, out, sr)
			}
		default:
			return fmt.Errorf("%s: %s: unsupported dtype %s", file, pt.Source, dtype)
		}
	}
	return nil
}

// nonFinite names the first NaN or infinity of a source row.
func nonFinite(file, tensor string, row []float32, r int) error {
	for i, v := range row {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%s: %s: non-finite weight %v at row %d, column %d", file, tensor, v, r, i)
		}
	}
	return nil
}

func generated(pt *PlannedTensor, spec *arch.Spec) []float32 {
	if pt.ref.Role == arch.RopeFreqs {
		return arch.RopeFreqFactors(spec)
	}
	return nil
}
