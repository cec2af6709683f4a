package convert

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/half"
	"github.com/gquant/gquant/internal/mapped"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// An Encoder writes one planned tensor's bytes from its values, a block of rows at a time; the
// blocks of a tensor may be encoded concurrently and in any order. Its rounding method (rtn,
// imatrix, GPTQ, AWQ: a Rounder) is a stage of it, per block.
type Encoder interface {
	// Buffers lists the byte sizes of the tensor's buffers, in the sink's order (GGUF: its
	// data; gqf: data, scales, zeros, block scales, 0 for absent ones).
	Buffers() []uint64
	// Encode encodes rows [r0, r1) (src: their values, rows of cols, folds applied) and hands
	// each buffer's bytes to emit at their offset in the buffer.
	Encode(src []float32, r0, r1, cols int, emit func(buf int, off uint64, data []byte) error) error
}

// A Finisher is an Encoder told when every block of its tensor is done, so that it can free
// what it holds for the whole tensor (GPTQ's factored Hessian).
type Finisher interface{ Finish() }

// A Preparer is an Encoder whose blocks share a costly result built from the whole tensor's
// statistics (GPTQ's factored Hessian). When Prepares reports true, Execute gives the tensor
// to one worker, which calls Prepare (cols: the row length), encodes the tensor's blocks one
// after another and then calls Finish: the result is built once, no worker waits for another
// to build it, and each worker holds at most one.
type Preparer interface {
	Prepares() bool
	Prepare(cols int) error
}

// Sink receives the bytes of buffer buf of plan tensor t at offset off.
type Sink func(t, buf int, off uint64, data []byte) error

// ExecOptions control execution; none of them but Sequence changes the output bytes.
type ExecOptions struct {
	Threads int // workers (default 1)
	// Progress, when set, is called with the source bytes done so far and the total.
	Progress func(done, total int64)
	// BlockBytes is the float32 working set of one block of rows (default 4 MiB).
	BlockBytes int
	// Sequence, when set, encodes the tensors block by block for the layer-sequential
	// methods (sequential.go).
	Sequence Sequence
}

// job is a block of rows of one tensor, or the whole tensor in blocks of per rows (a
// Preparer's).
type job struct {
	t       int // index into plan.Tensors
	r0, r1  int // rows (GGUF order)
	per     int // rows per block
	prepare bool
}

// rowsOf returns (rows, row length) of a tensor (a vector is one row).
func rowsOf(pt *PlannedTensor) (int, int) {
	n := int(gguf.ElementCount(pt.Shape))
	return n / int(pt.Shape[0]), int(pt.Shape[0])
}

// Execute encodes every planned tensor into sink, in parallel row blocks taken in plan order;
// a tensor whose encoder prepares (Preparer: GPTQ's factored Hessian) is one job, its blocks
// encoded in turn by the worker that prepared it. Peak memory is Threads × BlockBytes, plus
// what the encoders of the tensors in progress hold (at most Threads tensors: GPTQ keeps one
// Hessian factor per tensor, so one per worker) and what the source mapping keeps resident:
// each source tensor's pages are released once all its rows are done.
func Execute(inv *Inventory, p *Plan, sink Sink, opts ExecOptions) error {
	var total int64
	for i := range p.Tensors {
		pt := &p.Tensors[i]
		if pt.enc == nil {
			return fmt.Errorf("%s: no encoder (a plan made outside MakePlan)", pt.Name)
		}
		rows, n := rowsOf(pt)
		total += int64(rows * n * 2)
	}
	var done atomic.Int64
	run := func(ts []int, sink Sink) error { return execute(inv, p, ts, sink, opts, &done, total) }
	if opts.Sequence != nil {
		return executeSequential(inv, p, sink, opts, run, &total)
	}
	all := make([]int, len(p.Tensors))
	for i := range all {
		all[i] = i
	}
	return run(all, sink)
}

// execute encodes the plan tensors ts (see Execute); done counts the source bytes done, of
// total.
func execute(inv *Inventory, p *Plan, ts []int, sink Sink, opts ExecOptions, done *atomic.Int64, total int64) error {
	threads := max(opts.Threads, 1)
	blockBytes := opts.BlockBytes
	if blockBytes <= 0 {
		blockBytes = 4 << 20
	}
	var jobs []job
	remaining := make([]atomic.Int64, len(p.Tensors))
	for _, i := range ts {
		pt := &p.Tensors[i]
		rows, n := rowsOf(pt)
		per := max(1, blockBytes/(4*n))
		if pr, ok := pt.enc.(Preparer); ok && pr.Prepares() {
			jobs = append(jobs, job{i, 0, rows, per, true})
			remaining[i].Add(1)
		} else {
			for r := 0; r < rows; r += per {
				jobs = append(jobs, job{i, r, min(rows, r+per), per, false})
				remaining[i].Add(1)
			}
		}
	}
	var (
		next     atomic.Int64
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
			mapped.Guard()
			defer mapped.Recover(fail)
			var src []float32
			// block encodes rows [r0, r1) of tensor t.
			block := func(t, r0, r1 int) error {
				pt := &p.Tensors[t]
				_, n := rowsOf(pt)
				src = grow(src, (r1-r0)*n)
				if err := inv.readRows(pt, p.spec, r0, r1, src); err != nil {
					return err
				}
				emit := func(buf int, off uint64, data []byte) error { return sink(t, buf, off, data) }
				if err := pt.enc.Encode(src, r0, r1, n, emit); err != nil {
					return fmt.Errorf("%s: %w", pt.Name, err)
				}
				d := done.Add(int64((r1 - r0) * n * 2))
				if opts.Progress != nil {
					opts.Progress(d, total)
				}
				return nil
			}
			for !failed() {
				k := int(next.Add(1) - 1)
				if k >= len(jobs) {
					return
				}
				j := jobs[k]
				pt := &p.Tensors[j.t]
				var err error
				if j.prepare {
					_, n := rowsOf(pt)
					if err = pt.enc.(Preparer).Prepare(n); err != nil {
						err = fmt.Errorf("%s: %w", pt.Name, err)
					}
					for r := j.r0; err == nil && r < j.r1; r += j.per {
						if failed() {
							return
						}
						err = block(j.t, r, min(j.r1, r+j.per))
					}
				} else {
					err = block(j.t, j.r0, j.r1)
				}
				if err != nil {
					fail(err)
					return
				}
				if remaining[j.t].Add(-1) == 0 {
					for _, src := range pt.sources() {
						inv.release(src)
					}
					if f, ok := pt.enc.(Finisher); ok && !pt.again {
						f.Finish()
					}
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

// ggufEncoder writes a tensor of one ggml type; imatrix is its importance (nil for none),
// rounder, when set (Q4_0 tensors only), rounds its rows with a method (GPTQ, AWQ) instead of
// ggml's encoder.
type ggufEncoder struct {
	typ     gguf.Type
	name    string
	bytes   uint64
	imatrix []float32
	rounder *Rounder
	// expertRows is the rows of each expert of a stack of expert matrices (0: not one);
	// imatrix then holds every expert's importance in turn, as llama-quantize takes it, and
	// experts (nil for ggml's encoders) each expert's rounding stage.
	expertRows int
	experts    []*Rounder
}

// q4_0Spec is Q4_0's grid in quantize's groups (see q4_0Rows).
var q4_0Spec = quantize.GroupSpec{Bits: 4, Group: 32, Symmetric: true}

func (e *ggufEncoder) Buffers() []uint64 { return []uint64{e.bytes} }

func (e *ggufEncoder) Prepares() bool {
	for _, r := range e.experts { // a stack: its experts' GPTQ factors built in turn (expert)
		if r.Prepares() {
			return true
		}
	}
	return e.rounder != nil && e.rounder.Prepares()
}

func (e *ggufEncoder) Prepare(cols int) error {
	if e.experts != nil {
		return nil // each expert's factor is built at its first block
	}
	if _, key, _ := blockCodec(e.typ, 1, cols); key != 0 {
		return e.rounder.PrepareBlocks(key, cols)
	}
	return e.rounder.Prepare(q4_0Spec, cols)
}

// gptqBlockType reports whether GPTQ writes typ through a blockCodec (every GPTQ type but
// Q4_0, which goes through quantize's groups).
func gptqBlockType(typ gguf.Type) bool {
	switch typ {
	case gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.IQ4_XS, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.IQ4_NL:
		return true
	}
	return false
}

func (e *ggufEncoder) Finish() {
	if e.rounder != nil {
		e.rounder.Finish()
	}
	for _, r := range e.experts {
		r.Finish()
	}
}

func (e *ggufEncoder) Encode(src []float32, r0, r1, cols int, emit func(int, uint64, []byte) error) error {
	nr := r1 - r0
	rowBytes := e.typ.RowBytes(cols)
	bp := getBuf()
	defer putBuf(bp)
	var err error
	if e.expertRows > 0 {
		// A stack of experts: llama-quantize quantizes it expert by expert, each with its own
		// importance; GPTQ rounds each expert with its own Hessian.
		*bp = grow(*bp, nr*rowBytes)
		for r := r0; r < r1; {
			x := r / e.expertRows
			end := min(r1, (x+1)*e.expertRows)
			sub, err := e.expert(x, cols)
			if err != nil {
				return err
			}
			if err := sub.encode(bp, (*bp)[(r-r0)*rowBytes:(end-r0)*rowBytes], src[(r-r0)*cols:(end-r0)*cols], end-r, cols); err != nil {
				return err
			}
			r = end
		}
	} else if err = e.encode(bp, nil, src, nr, cols); err != nil {
		return err
	}
	if err := CheckEncodable(e.typ, src[:nr*cols], *bp, r0, cols); err != nil {
		return err
	}
	return emit(0, uint64(r0)*uint64(rowBytes), *bp)
}

// expert returns the encoder of expert x of a stack: its importance and its rounder. With
// GPTQ (one worker encodes the stack's blocks in turn: Prepares), the experts before x are
// done and release what their rounders hold.
func (e *ggufEncoder) expert(x, cols int) (*ggufEncoder, error) {
	sub := &ggufEncoder{typ: e.typ, name: arch.ExpertWeight(e.name, x)}
	if e.imatrix != nil {
		if len(e.imatrix) < (x+1)*cols {
			return nil, fmt.Errorf("%s: importance matrix has %d values, expert %d needs %d", e.name, len(e.imatrix), x, (x+1)*cols)
		}
		sub.imatrix = e.imatrix[x*cols : (x+1)*cols]
	}
	if e.experts != nil {
		sub.rounder = e.experts[x]
		if e.Prepares() {
			for _, r := range e.experts[:x] {
				r.Finish()
			}
		}
	}
	return sub, nil
}

// encode encodes nr rows of src into *bp (a matrix's whole block) or, when dst is set, into
// dst (its part of a stack's block; *bp is not touched then).
func (e *ggufEncoder) encode(bp *[]byte, dst []byte, src []float32, nr, cols int) error {
	tmp := bp
	if dst != nil {
		tmp = getBuf()
		defer putBuf(tmp)
	}
	var err error
	switch {
	case e.rounder != nil && gptqBlockType(e.typ):
		b, rerr := e.rounder.RoundBlocks(e.typ, src[:nr*cols], nr, cols)
		if rerr != nil {
			return rerr
		}
		if b != nil {
			*tmp = append((*tmp)[:0], b...)
		} else if *tmp, err = encodeRows(*tmp, e.typ, e.name, src, nr, cols, e.imatrix); err != nil {
			return err // no Hessian for the matrix: llama.cpp's quantizer with the importance
		}
	case e.rounder != nil:
		gt, _, rerr := e.rounder.Round(q4_0Spec, src, nr, cols)
		if rerr != nil {
			return rerr
		}
		*tmp = q4_0Rows(*tmp, gt)
	default:
		if *tmp, err = encodeRows(*tmp, e.typ, e.name, src, nr, cols, e.imatrix); err != nil {
			return err
		}
	}
	if dst != nil {
		copy(dst, *tmp)
	}
	return nil
}

// bufs holds the byte buffers blocks are encoded into.
var bufs sync.Pool

func getBuf() *[]byte {
	if bp, _ := bufs.Get().(*[]byte); bp != nil {
		return bp
	}
	return new([]byte)
}

func putBuf(bp *[]byte) { bufs.Put(bp) }

// EmitFloats encodes v as little-endian float32, fp16 or bf16 (typ F32, F16 or BF16) into a
// pooled buffer and hands it to emit (which must not keep it) as buffer buf at offset off.
func EmitFloats(typ gguf.Type, v []float32, buf int, off uint64, emit func(int, uint64, []byte) error) error {
	bp := getBuf()
	defer putBuf(bp)
	*bp = putFloats(*bp, typ, v)
	return emit(buf, off, *bp)
}

// overflowErr is the error for a finite value x at pos that typ cannot hold (its caller names
// the tensor).
func overflowErr(x float32, pos string, typ gguf.Type) error {
	if typ == gguf.F16 {
		return fmt.Errorf("%s: %g does not fit fp16 (largest %g): use bf16 or f32", pos, x, half.F16Max)
	}
	return fmt.Errorf("%s: %g overflows the fp16 block scale of %s (weights up to %g fit every type): use bf16 or f32 for this tensor", pos, x, typ, half.F16Max)
}

// CheckEncodable catches weights that typ cannot hold: beyond fp16 in F16, or making typ's
// fp16 scales overflow. src holds rows r0, … of cols columns and enc their encoding (nil for
// F16, F32 and BF16). Only when some |x| in src exceeds the largest fp16 is anything more than
// one scan done: F16 checks those values' rounding, other types decode enc and fail when a
// value is not finite or such a weight did not come back within half of itself. Real weights
// are far below that bound.
func CheckEncodable(typ gguf.Type, src []float32, enc []byte, r0, cols int) error {
	if typ == gguf.F32 || typ == gguf.BF16 {
		return nil
	}
	big := -1
	for i, x := range src {
		if x > half.F16Max || x < -half.F16Max {
			big = i
			break
		}
	}
	if big < 0 {
		return nil
	}
	at := func(i int) error {
		return overflowErr(src[i], fmt.Sprintf("row %d, column %d", r0+i/cols, i%cols), typ)
	}
	if typ == gguf.F16 {
		for i := big; i < len(src); i++ {
			if x := src[i]; half.F32ToF16(x)&0x7FFF == 0x7C00 && !math.IsInf(float64(x), 0) {
				return at(i)
			}
		}
		return nil
	}
	codec, err := quantize.For(typ)
	if err != nil {
		return err
	}
	dec := make([]float32, len(src))
	codec.Dequantize(dec, enc)
	for i, x := range dec {
		bad := math.IsInf(float64(x), 0) || math.IsNaN(float64(x))
		if y := src[i]; y > half.F16Max || y < -half.F16Max {
			// The encoders' sums of squares overflow too: a huge weight can come back finite
			// but lost (Q6_K), so it must come back near itself.
			bad = bad || !(math.Abs(float64(x-y)) <= 0.5*math.Abs(float64(y)))
		}
		if bad {
			return at(big)
		}
	}
	return nil
}

// putFloats encodes v as little-endian float32, fp16 or bf16 (typ F32, F16 or BF16) into dst,
// grown as needed.
func putFloats(dst []byte, typ gguf.Type, v []float32) []byte {
	switch typ {
	case gguf.F32:
		dst = grow(dst, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(x))
		}
	case gguf.F16:
		dst = grow(dst, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToF16(x))
		}
	case gguf.BF16:
		dst = grow(dst, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToBF16(x))
		}
	default:
		panic("putFloats: type " + typ.String())
	}
	return dst
}

// encodeRows encodes nr rows of n floats to type typ.
func encodeRows(dst []byte, typ gguf.Type, name string, src []float32, nr, n int, imatrix []float32) ([]byte, error) {
	switch typ {
	case gguf.F32, gguf.F16, gguf.BF16:
		return putFloats(dst, typ, src[:nr*n]), nil
	}
	dst = grow(dst, nr*typ.RowBytes(n))
	enc, err := quantize.For(typ)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if imatrix != nil && len(imatrix) != n {
		return nil, fmt.Errorf("%s: importance matrix has %d columns, tensor rows have %d", name, len(imatrix), n)
	}
	enc.Quantize(dst, src, nr, n, imatrix)
	return dst, nil
}

// q4_0Rows lays a symmetric 4-bit group-32 GroupTensor out as ggml Q4_0 blocks, row by row:
// each block is the fp16 scale d followed by 16 bytes whose byte j holds the code of element j
// (low nibble) and of element j+16 (high nibble); w = d·(u − 8). quantize/group.go's
// symmetric convention is Q4_0's (d = m/−8), so GPTQ and AWQ weights in that form are Q4_0
// blocks byte for byte, and stock llama.cpp runs them.
func q4_0Rows(out []byte, gt *quantize.GroupTensor) []byte {
	nb := gt.Rows * gt.Cols / 32
	out = grow(out, nb*18)
	scales := gt.ScalesF16()
	code := func(i int) byte { return gt.Q[i/2] >> (4 * (i % 2)) & 0xF }
	for b := 0; b < nb; b++ {
		blk := out[b*18 : (b+1)*18]
		binary.LittleEndian.PutUint16(blk, scales[b])
		for j := 0; j < 16; j++ {
			blk[2+j] = code(b*32+j) | code(b*32+j+16)<<4
		}
	}
	return out
}

// readRows fills dst with rows [r0,r1) of a planned tensor as float32, in the plan's row order
// (its transform applied) with its folds applied, and rejects non-finite weights. A vector is
// one row; a generated tensor's values come from the plan.
func (inv *Inventory) readRows(pt *PlannedTensor, spec *arch.Spec, r0, r1 int, dst []float32) error {
	_, n := rowsOf(pt)
	if pt.gen {
		copy(dst, pt.values[r0*n:r1*n])
		return nil
	}
	if pt.parts != nil { // a stack of experts: each expert's rows from its part
		per := int(pt.Shape[1])
		for r := r0; r < r1; {
			e := r / per
			end := min(r1, (e+1)*per)
			part := *pt
			part.Source, part.parts, part.Shape, part.fold = pt.parts[e], nil, pt.Shape[:2], nil
			if err := inv.readRows(&part, spec, r-e*per, end-e*per, dst[(r-r0)*n:(end-r0)*n]); err != nil {
				return err
			}
			r = end
		}
		if f := pt.fold; f != nil { // folds index the stack's rows
			for r := r0; r < r1; r++ {
				f.apply(dst[(r-r0)*n:(r-r0+1)*n], r, false)
			}
		}
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
	rowLen, r0e, r1e := n, r0, r1
	if len(pt.Shape) == 1 { // 1-D tensors: the transform permutes elements
		rowLen, r0e, r1e = 1, 0, n
	}
	f := pt.fold
	for r := r0e; r < r1e; r++ {
		sr := arch.SourceRow(pt.trans, spec, r) + pt.row0
		in := data[sr*rowLen*esz : (sr+1)*rowLen*esz]
		out := dst[(r-r0e)*rowLen : (r-r0e+1)*rowLen]
		bad := false
		switch dtype {
		case "BF16":
			// widening is exact; a bf16 is non-finite exactly when its exponent bits are all set
			for i := range out {
				h := binary.LittleEndian.Uint16(in[2*i:])
				bad = bad || h&0x7f80 == 0x7f80
				out[i] = math.Float32frombits(uint32(h) << 16)
			}
		case "F16":
			for i := range out {
				h := binary.LittleEndian.Uint16(in[2*i:])
				bad = bad || h&0x7c00 == 0x7c00
				out[i] = half.F16ToF32(h)
			}
		case "F32":
			for i := range out {
				u := binary.LittleEndian.Uint32(in[4*i:])
				bad = bad || u&0x7f800000 == 0x7f800000
				out[i] = math.Float32frombits(u)
			}
		default:
			return fmt.Errorf("%s: %s: unsupported dtype %s", file, pt.Source, dtype)
		}
		if bad {
			return nonFinite(file, pt.Source, out, sr)
		}
		if pt.offset != 0 {
			for i := range out {
				out[i] += pt.offset
			}
		}
		if f != nil {
			f.apply(out, sr, rowLen == 1)
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
