package convert

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/sensitivity"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// measureSensitivities measures, weight by weight in model order, every candidate encoding's
// output error and the probe's KL at one candidate of each rounding method (see target.go). Every weight but the linear
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

// extendSensitivities completes f, measured in a beginning of targetTypes (f.Key.Candidates)
// or with fewer probes (a file of layout 1: one per weight), weight by weight (names and
// cands: what measuring in every type measures): each candidate it lacks gets its output
// error, and each rounding method among the candidates without a probe gets one (with
// o.Probe, on the file's windows), each measured as measureSensitivities measures it. The
// probes the file has are kept (the types added are further from probeBPW than those), so
// the file is the one measuring in every type writes, and a file that lacks no probe needs no
// corpus. It returns the types added.
func extendSensitivities(inv *Inventory, base *Plan, st *stats.Stats, imp map[string][]float32, f *sensitivity.File, names []string,
	cands map[string][]gguf.Type, method string, o Options) ([]gguf.Type, error) {
	have := f.Key.Candidates
	oldNames, oldCands := measured(base, have, imp)
	if err := sameWeights(o.Sensitivity, f, oldNames, oldCands); err != nil {
		return nil, err
	}
	if !slices.Equal(oldNames, names) {
		return nil, fmt.Errorf("%s: sensitivity.tensors: the weights measured in %s are not those measured in %s: measure again (remove the file, or name another)",
			o.Sensitivity, typeList(have), typeList(targetTypes))
	}
	at := map[string]int{}
	for i, pt := range base.Tensors {
		at[pt.Name] = i
	}
	var probe Prober
	defer func() {
		if c, ok := probe.(interface{ Close() error }); ok {
			c.Close()
		}
	}()
	for n := range f.Tensors {
		t := &f.Tensors[n]
		pt := &base.Tensors[at[t.Name]]
		old, want := oldCands[t.Name], cands[t.Name]
		if len(want) < len(old) || !slices.Equal(want[:len(old)], old) {
			return nil, fmt.Errorf("%s: %s: candidates %v measured, not a beginning of %v: measure again", o.Sensitivity, t.Name, old, want)
		}
		if len(want) > len(old) {
			m, err := measureWeight(inv, base, pt, st, imp[t.Name], want[len(old):], method, o, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.Name, err)
			}
			t.Candidates = append(t.Candidates, m.Candidates...)
		}
		wantProbes := probeCandidates(t.Candidates)
		for k, c := range t.Candidates {
			switch {
			case c.Probed && !slices.Contains(wantProbes, k):
				return nil, fmt.Errorf("%s: %s: probed with %v, which is no longer the probe of its method: measure again", o.Sensitivity, t.Name, c.Type)
			case c.Probed:
				continue
			case !slices.Contains(wantProbes, k):
				continue
			}
			if probe == nil {
				if o.Probe == nil {
					return nil, problems.Usage(fmt.Errorf("--%s: %s: %s has no probe of its %s candidates: extending the file needs --corpus FILE (the calibration text it was measured on, %s)",
						strings.Fields(o.targetName())[0], o.Sensitivity, t.Name, c.Method, f.Key.CorpusName))
				}
				var err error
				if probe, err = o.Probe.Open(o.Probe.Corpus, f.Key.Ctx, f.Key.Chunks); err != nil {
					return nil, err
				}
			}
			m, err := measureWeight(inv, base, pt, st, imp[t.Name], []gguf.Type{c.Type}, method, o, probe)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.Name, err)
			}
			if mc := m.Candidates[0]; mc.Error != c.Error || mc.Method != c.Method {
				return nil, fmt.Errorf("%s: %s: %v measures an error of %g by %s, the file %g by %s: measure again", o.Sensitivity, t.Name, c.Type, mc.Error, mc.Method, c.Error, c.Method)
			}
			t.Candidates[k].Probed, t.Candidates[k].ProbeKL = true, m.Candidates[0].ProbeKL
		}
		if o.MeasureProgress != nil {
			o.MeasureProgress(n+1, len(f.Tensors))
		}
	}
	return slices.Clone(targetTypes[len(have):]), nil
}

// measureWeight encodes one weight with each candidate, measures the output errors and, when
// probe is not nil, probes the model with the candidates probeCandidates names (one per
// rounding method).
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
		// GPTQ where Convert rounds with it (gptqBlockType, and Q4_0 in quantize's groups);
		// the i-quants with llama.cpp's quantizer and the importance.
		if method == MethodGPTQ && pt.ref.Role.IsLinear() && st.HasHessian(pt.Name) && (typ == gguf.Q4_0 || gptqBlockType(typ)) {
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
	var probes []int
	if probe != nil {
		probes = probeCandidates(t.Candidates)
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
		if probe != nil && (slices.Contains(probes, k) || probeAll) {
			decoded[k] = append([]float32(nil), deq...)
		}
	}
	if probe == nil {
		return t, nil
	}
	src := toSourceOrder(pt, base.spec, orig, rows, cols)
	for k := range cands {
		if decoded[k] == nil {
			continue
		}
		kl, err := probe.KL(pt.Name, toSourceOrder(pt, base.spec, decoded[k], rows, cols), src)
		if err != nil {
			return t, err
		}
		if slices.Contains(probes, k) {
			t.Candidates[k].Probed, t.Candidates[k].ProbeKL = true, kl
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
