package convert

import (
	"encoding/binary"
	"fmt"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/atomicfile"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// GGUF output of the gqf methods where a GGUF type carries them exactly: symmetric int4 groups
// of 32 with an fp16 scale, w = d·(u − 8), are ggml's Q4_0 block (quantize/group.go's
// symmetric convention is Q4_0's, d = m/−8), so GPTQ and AWQ weights in that form are written
// as Q4_0 blocks, byte for byte, and stock llama.cpp runs them. AWQ's scales are folded into
// the preceding RMSNorm weights (F32 in the file) and into v and up rows before rounding.
// Every other tensor (embedding, output, fallbacks of rows that are not a multiple of 32) is
// encoded as `--scheme q4_0 --method rtn` encodes it.

// MethodOptions are the inputs of ConvertGGUFMethod besides Options.
type MethodOptions struct {
	// Method is "gptq" or "awq".
	Method string
	// Stats are the calibration statistics (Hessians for gptq).
	Stats *stats.Stats
	GPTQ  quantize.GPTQOptions
	AWQ   quantize.AWQOptions
}

// ConvertGGUFMethod writes a GGUF file of scheme q4_0 whose Q4_0 linear weights are rounded by
// GPTQ or AWQ (see above). o.Scheme must be "q4_0"; o.Method and o.Stats are ignored in favour
// of m. Statistics are checked against the model before anything is read.
func ConvertGGUFMethod(dir, out string, o Options, m MethodOptions) (*Plan, error) {
	if o.Scheme != "q4_0" {
		return nil, fmt.Errorf("--method %s: GGUF output carries GPTQ/AWQ weights exactly only as q4_0 (got --scheme %s; other schemes: --format gqf)", m.Method, o.Scheme)
	}
	if m.Method != MethodGPTQ && m.Method != MethodAWQ {
		return nil, fmt.Errorf("--method: %q is not gptq or awq", m.Method)
	}
	if !o.DryRun {
		if err := atomicfile.CheckNew(out, o.Force); err != nil {
			return nil, err
		}
	}
	inv, err := Open(dir, InventoryOptions{Pre: o.Pre})
	if err != nil {
		return nil, err
	}
	defer inv.Close()
	plan, err := MakePlan(inv, PlanOptions{Scheme: o.Scheme, Overrides: o.Overrides, Name: o.Name})
	if err != nil {
		return nil, err
	}
	gq, err := newGQFQuantizer(inv, gqfScheme{name: "q4_0", linear: "int4", kept: "int8", sym: true},
		&GQFOptions{Method: m.Method, Stats: m.Stats, GroupSize: 32, Keep: "none", GPTQ: m.GPTQ, AWQ: m.AWQ, DryRun: o.DryRun})
	if err != nil {
		return nil, err
	}
	if o.DryRun {
		return plan, nil
	}
	ts, err := gqfTensors(inv)
	if err != nil {
		return nil, err
	}
	if _, err := gq.prepare(ts); err != nil {
		return nil, err
	}
	byName := map[string]arch.Tensor{}
	for _, t := range ts {
		byName[t.Ref.GGUFName()] = t
	}
	// The bytes of every tensor the method changes, in GGUF row order.
	override := map[string][]byte{}
	for i := range plan.Tensors {
		pt := &plan.Tensors[i]
		t, ok := byName[pt.Name]
		if !ok {
			continue
		}
		switch {
		case pt.typ == gguf.Q4_0 && t.Ref.Role.IsLinear():
			if override[pt.Name], err = gq.q4_0Tensor(pt, t); err != nil {
				return nil, err
			}
		case gq.rowDiv[pt.Name] != nil || gq.colScale[pt.Name] != nil:
			// A folded tensor of another type (a norm, a fallback): its scaled values encoded
			// as the plan says.
			if override[pt.Name], err = gq.foldedTensor(pt, t); err != nil {
				return nil, err
			}
		}
	}
	kvs, err := Metadata(inv, plan, o.Name)
	if err != nil {
		return nil, err
	}
	w, err := gguf.Create(out, Header(plan, kvs))
	if err != nil {
		return nil, err
	}
	sink := func(t int, off uint64, data []byte) error {
		if b := override[plan.Tensors[t].Name]; b != nil {
			data = b[off : off+uint64(len(data))]
		}
		return w.WriteTensorPart(t, off, data)
	}
	if err := Execute(inv, plan, sink, ExecOptions{Threads: o.Threads, Progress: o.Progress}); err != nil {
		w.Abort()
		return nil, err
	}
	if err := w.Commit(); err != nil {
		w.Abort()
		return nil, err
	}
	return plan, nil
}

// q4_0Tensor rounds one linear weight by the method as symmetric int4 groups of 32 and lays
// the result out as Q4_0 blocks in GGUF row order (the plan's row transform applied).
func (q *gqfQuantizer) q4_0Tensor(pt *PlannedTensor, t arch.Tensor) ([]byte, error) {
	q.readMu.Lock()
	w, err := readFloat(q.inv, t)
	q.readMu.Unlock()
	if err != nil {
		return nil, err
	}
	rows, cols := t.Shape[0], t.Shape[1]
	q.applyFolds(pt.Name, w, cols)
	gt, _, err := q.round(t, w, rows, cols, quantize.GroupSpec{Bits: 4, Group: 32, Symmetric: true})
	if err != nil {
		return nil, err
	}
	hf := q4_0Rows(gt)
	rowBytes := gguf.Q4_0.RowBytes(cols)
	out := make([]byte, len(hf))
	for r := 0; r < rows; r++ {
		sr := arch.SourceRow(pt.trans, q.inv.Spec, r)
		copy(out[r*rowBytes:(r+1)*rowBytes], hf[sr*rowBytes:(sr+1)*rowBytes])
	}
	return out, nil
}

// foldedTensor reads a tensor, applies its folded scales and encodes it with the plan's type,
// in GGUF row order.
func (q *gqfQuantizer) foldedTensor(pt *PlannedTensor, t arch.Tensor) ([]byte, error) {
	q.readMu.Lock()
	w, err := readFloat(q.inv, t)
	q.readMu.Unlock()
	if err != nil {
		return nil, err
	}
	rows, cols := 1, t.Shape[len(t.Shape)-1]
	if len(t.Shape) == 2 {
		rows = t.Shape[0]
	}
	q.applyFolds(pt.Name, w, cols)
	g := make([]float32, len(w))
	if len(t.Shape) == 1 {
		for i := range g {
			g[i] = w[arch.SourceRow(pt.trans, q.inv.Spec, i)]
		}
	} else {
		for r := 0; r < rows; r++ {
			sr := arch.SourceRow(pt.trans, q.inv.Spec, r)
			copy(g[r*cols:(r+1)*cols], w[sr*cols:(sr+1)*cols])
		}
	}
	return encodeRows(nil, pt, g, rows, cols, nil)
}

// q4_0Rows converts a symmetric 4-bit group-32 GroupTensor to ggml Q4_0 blocks, row by row:
// each block is the fp16 scale d followed by 16 bytes whose byte j holds the code of element j
// (low nibble) and of element j+16 (high nibble); w = d·(u − 8).
func q4_0Rows(gt *quantize.GroupTensor) []byte {
	nb := gt.Rows * gt.Cols / 32
	out := make([]byte, nb*18)
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
