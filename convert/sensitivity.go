package convert

import (
	"fmt"
	"sync/atomic"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/sensitivity"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// measureSensitivities measures, weight by weight in model order, every candidate encoding's
// output error and the probe's KL at one of them (see target.go). Every weight but the linear
// layers' is encoded as the file writes it: llama.cpp's quantizer, with the importance where
// the statistics have it (the output's). The candidates are encoded
// by the encoders execute writes the file with (the same bytes), in parallel; the probe runs
// the model with the runtime's workers.
func measureSensitivities(inv *Inventory, base *Plan, st *stats.Stats, imp map[string][]float32, names []string, cands map[string][]gguf.Type,
	method string, key sensitivity.Key, o Options) (*sensitivity.File, error) {
	pc := o.Probe
	probe, err := pc.Open(pc.Corpus, key.Ctx, key.Chunks)
	if err != nil {
		return nil, err
	}
	if c, ok := probe.(interface{ Close() error }); ok {
		defer c.Close()
	}
	at := map[string]int{}
	for i, pt := range base.Tensors {
		at[pt.Name] = i
	}
	f := &sensitivity.File{Key: key}
	for n, name := range names {
		t, err := measureWeight(inv, base, &base.Tensors[at[name]], st, imp[name], cands[name], method, o, probe)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		f.Tensors = append(f.Tensors, t)
		if o.MeasureProgress != nil {
			o.MeasureProgress(n+1, len(names))
		}
	}
	return f, nil
}

// measureWeight encodes one weight with each candidate, measures the output errors and probes
// the model with the probe candidate.
func measureWeight(inv *Inventory, base *Plan, pt *PlannedTensor, st *stats.Stats, imp []float32, cands []gguf.Type,
	method string, o Options, probe Prober) (sensitivity.Tensor, error) {
	t := sensitivity.Tensor{Name: pt.Name}
	rows, cols := rowsOf(pt)
	orig := make([]float32, rows*cols)
	if err := inv.readRows(pt, base.spec, 0, rows, orig); err != nil {
		return t, err
	}
	// The candidates as tensors of a plan of their own, encoded as execute encodes a file.
	cp := &Plan{spec: base.spec}
	bufs := make([][]byte, len(cands))
	for k, typ := range cands {
		c := *pt
		c.typ, c.Type = typ, typ.String()
		c.Bytes = uint64(typ.RowBytes(cols)) * uint64(rows)
		e := &ggufEncoder{typ: typ, name: pt.Name, bytes: c.Bytes, imatrix: imp}
		m := MethodImatrix
		if imp == nil {
			m = MethodRTN // the token embedding: no statistics
		}
		if method == MethodGPTQ && pt.ref.Role.IsLinear() && st.HasHessian(pt.Name) {
			e.rounder = &Rounder{Method: MethodGPTQ, Stats: st, Weight: pt.Name, GPTQ: o.GPTQ}
			m = MethodGPTQ
		}
		c.enc = e
		cp.Tensors = append(cp.Tensors, c)
		bufs[k] = make([]byte, c.Bytes)
		t.Candidates = append(t.Candidates, sensitivity.Candidate{Type: typ, Method: m, Bytes: c.Bytes})
	}
	idx := make([]int, len(cands))
	for k := range idx {
		idx[k] = k
	}
	sink := func(k, _ int, off uint64, data []byte) error {
		copy(bufs[k][off:], data)
		return nil
	}
	var done atomic.Int64
	if err := execute(inv, cp, idx, sink, ExecOptions{Threads: o.Threads}, &done, 0); err != nil {
		return t, err
	}
	H, _, err := st.Hessian(pt.Name)
	if err != nil {
		return t, err
	}
	count := 1.0
	diag := imp
	switch {
	case H != nil:
		count = float64(st.LinearFor(pt.Name).Count)
	case imp == nil: // the token embedding: the squared error of its rows
		diag = make([]float32, cols)
		for j := range diag {
			diag[j] = 1
		}
	}
	deq := make([]float32, rows*cols)
	decoded := make([][]float32, len(cands))
	for k, typ := range cands {
		codec, err := quantize.For(typ)
		if err != nil {
			return t, err
		}
		codec.Dequantize(deq, bufs[k])
		// Σ xᵀx over count tokens, or the importance (Σx²/count) as its diagonal.
		t.Candidates[k].Error = quantize.OutputError(orig, deq, rows, cols, H, diag) / count
		if k == probeCandidate(t.Candidates) || probeAll {
			decoded[k] = append([]float32(nil), deq...)
		}
	}
	t.Probe = probeCandidate(t.Candidates)
	src := toSourceOrder(pt, base.spec, orig, rows, cols)
	for k := range cands {
		if decoded[k] == nil {
			continue
		}
		kl, err := probe.KL(pt.Name, toSourceOrder(pt, base.spec, decoded[k], rows, cols), src)
		if err != nil {
			return t, err
		}
		if k == t.Probe {
			t.ProbeKL = kl
		}
		if probeAll {
			probeLog(pt.Name, t.Candidates[k], kl)
		}
	}
	return t, nil
}

// probeAll and probeLog let a test probe every candidate (to check the gain model).
var (
	probeAll bool
	probeLog = func(name string, c sensitivity.Candidate, kl float64) {}
)

// toSourceOrder returns rows × cols values of a planned tensor (the plan's row order) in the
// source's row order (the Q/K permutation of llama's GGUF layout undone).
func toSourceOrder(pt *PlannedTensor, spec *arch.Spec, v []float32, rows, cols int) []float32 {
	if pt.trans == arch.NoTransform {
		return v
	}
	src := make([]float32, len(v))
	for r := 0; r < rows; r++ {
		sr := arch.SourceRow(pt.trans, spec, r)
		copy(src[sr*cols:(sr+1)*cols], v[r*cols:(r+1)*cols])
	}
	return src
}
