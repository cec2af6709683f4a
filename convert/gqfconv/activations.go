package gqfconv

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// Activation encodings of a gqf graph. Every activation belongs to a point of the model's
// graph (arch.Lowered.Point); all the activations of a point (its tensor and the data
// movement of it) get the point's encoding. The encodings come from an AIMET encodings file,
// or from calibration statistics (every point gquant calibrate observes), and for the points
// the statistics lack (statistics of a version 1 file, an imatrix) from a calibration run of
// the converted file itself — its quantized weights, float activations — on a corpus, with the
// same range setting. Points with no source stay in float (reported).

// DefaultCalibWindows is the number of windows of the graph's length a corpus calibration
// evaluates.
const DefaultCalibWindows = 8

// activationEncodings sets an encoding on every activation of the written file's graph and
// says how they were obtained.
// ef is the AIMET encodings file o.Encodings, read.
func activationEncodings(w *gqf.Writer, graph *arch.Graph, low *arch.Lowered, inv *convert.Inventory, o Options, ef *encodings.File, bits, threads int) (string, error) {
	g := low.Graph
	members := map[string][]*gqf.Value{} // point → its activations
	var points []string
	for _, a := range g.Activations {
		pt := low.Point[a.Name]
		if members[pt] == nil {
			points = append(points, pt)
		}
		members[pt] = append(members[pt], a)
	}
	set := func(pt string, e *gqf.Encoding) {
		for _, a := range members[pt] {
			a.Encoding = proto.Clone(e).(*gqf.Encoding)
		}
	}
	if ef != nil {
		var missing, conflict []string
		for _, pt := range points {
			var chosen *gqf.Encoding
			var from string
			for _, a := range members[pt] { // the point's own name first, then the moved tensors'
				e, ok := ef.Activation(a.Name)
				if !ok {
					continue
				}
				enc, err := fromAIMET(e, bits)
				if err != nil {
					return "", fmt.Errorf("%s: %s: %v", o.Encodings, a.Name, err)
				}
				if chosen == nil {
					chosen, from = enc, a.Name
				} else if !proto.Equal(chosen, enc) {
					conflict = append(conflict, fmt.Sprintf("%s and %s", from, a.Name))
				}
			}
			if chosen == nil {
				missing = append(missing, pt)
				continue
			}
			set(pt, chosen)
		}
		switch {
		case len(missing) > 0:
			return "", fmt.Errorf("%s: no encoding for graph activations %s", o.Encodings, strings.Join(firstN(missing, 5), ", "))
		case len(conflict) > 0:
			return "", fmt.Errorf("%s: data-movement tensors with another encoding than the tensor they move (QNN keeps one): %s", o.Encodings, strings.Join(firstN(conflict, 5), "; "))
		}
		return fmt.Sprintf("AIMET encodings %s", o.Encodings), nil
	}
	r := o.Range
	r.Bits = bits
	r, err := r.Normalize()
	if err != nil {
		return "", problems.Usage(fmt.Errorf("--%v", err))
	}
	var how []string
	done := map[string]bool{}
	if st := o.Stats; st != nil && len(st.Acts) > 0 {
		n := 0
		for _, pt := range points {
			e, err := pointEncoding(st, pt, graph.Mask, r)
			if err != nil {
				return "", fmt.Errorf("%s: %w", st.Source, err)
			}
			if e == nil {
				continue
			}
			set(pt, e)
			done[pt] = true
			n++
		}
		how = append(how, fmt.Sprintf("%d activations from the statistics (%s ranges)", n, r.Mode))
	}
	var rest []string
	for _, pt := range points {
		if !done[pt] {
			rest = append(rest, pt)
		}
	}
	if len(rest) == 0 {
		return strings.Join(how, "; "), nil
	}
	if o.Corpus == "" {
		if len(how) == 0 {
			return "", fmt.Errorf("%s: no activation statistics (an imatrix holds none): give --corpus FILE or --encodings FILE", o.StatsPath)
		}
		how = append(how, fmt.Sprintf("%d graph-only activations left in float (no --corpus to calibrate them)", len(rest)))
		return strings.Join(how, "; "), nil
	}
	// The file as written so far, without activation encodings, is the model to calibrate.
	if err := w.Flush(); err != nil {
		return "", err
	}
	windows := o.CalibWindows
	if windows <= 0 {
		windows = DefaultCalibWindows
	}
	L := int(g.MaxLen)
	res, err := calibrate.Calibrate(w.TempPath(), calibrate.Options{Corpus: o.Corpus, Ctx: L, Tokens: windows * L, Threads: threads, Format: "gqf"})
	if err != nil {
		return "", err
	}
	// The mask, when the statistics did not set it, comes from the scores seen now.
	if lo, hi, ok := scoreRange(res.Stats, inv.Spec); ok && (o.Stats == nil || !hasScores(o.Stats, inv.Spec)) {
		if m := arch.MaskFor(lo, hi); m != graph.Mask {
			graph.Mask = m
			if err := rewriteMask(w, low, m, graph.Window()); err != nil {
				return "", err
			}
		}
	}
	for _, pt := range rest {
		e, err := pointEncoding(res.Stats, pt, graph.Mask, r)
		if err != nil {
			return "", fmt.Errorf("%s: %w", o.Corpus, err)
		}
		if e == nil {
			return "", fmt.Errorf("%s: calibration observed no %s", o.Corpus, pt)
		}
		set(pt, e)
	}
	how = append(how, fmt.Sprintf("%d activations calibrated on the converted weights, %d tokens (windows of %d) of %s (%s ranges)", len(rest), res.Tokens, L, o.Corpus, r.Mode))
	return strings.Join(how, "; "), nil
}

// pointEncoding is the encoding of a point from statistics (nil when they lack it). The masked
// scores (kq_masked) are the scaled ones plus the graph's mask above the diagonal: their range
// is that of kq_scaled widened down by the mask, whatever mask the statistics observed.
func pointEncoding(st *stats.Stats, pt string, mask float32, r quantize.RangeOptions) (*gqf.Encoding, error) {
	if base, ok := strings.CutSuffix(pt, "kq_masked"); ok {
		a := st.Act(base + "kq_scaled")
		if a == nil {
			return nil, nil
		}
		lo, hi := quantize.ActRange(a, r)
		e := gqf.RangeEncoding(lo+float64(mask), hi, r.Bits)
		if err := gqf.CheckActivation(e); err != nil {
			return nil, fmt.Errorf("%s: %v", pt, err)
		}
		return e, nil
	}
	a := st.Act(pt)
	if a == nil {
		return nil, nil
	}
	return rangeEncoding(pt, a, r)
}

// scoreRange is the range of the scaled attention scores over every layer, from statistics.
func scoreRange(st *stats.Stats, spec *arch.Spec) (lo, hi float64, ok bool) {
	if st == nil || !hasScores(st, spec) {
		return 0, 0, false
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for l := 0; l < spec.Layers; l++ {
		a := st.Act(fmt.Sprintf("blk.%d.kq_scaled", l))
		lo, hi = math.Min(lo, float64(a.Min)), math.Max(hi, float64(a.Max))
	}
	return lo, hi, true
}

// hasScores reports whether statistics observed every layer's scaled attention scores.
func hasScores(st *stats.Stats, spec *arch.Spec) bool {
	for l := 0; l < spec.Layers; l++ {
		if st.Act(fmt.Sprintf("blk.%d.kq_scaled", l)) == nil {
			return false
		}
	}
	return spec.Layers > 0
}

// rewriteMask writes the mask constants again with mask m (the file being written): the
// causal one and, with a sliding window, the sliding layers' (window the graph's).
func rewriteMask(w *gqf.Writer, low *arch.Lowered, m float32, window int) error {
	L := int(low.Graph.MaxLen)
	for _, c := range []struct {
		name string
		w    int
	}{{arch.ConstMask, 0}, {arch.ConstMaskSWA, window}} {
		t := w.Tensor(c.name)
		if t == nil {
			if c.name == arch.ConstMask {
				return fmt.Errorf("graph: %s: not in the file", c.name)
			}
			continue
		}
		vals := arch.CausalMask(L, c.w, m)
		if err := convert.EmitFloats(gguf.F32, vals, 0, 0, func(_ int, off uint64, b []byte) error { return w.WriteAt(t.Data, off, b) }); err != nil {
			return err
		}
	}
	return nil
}

// rangeEncoding is the per-tensor encoding of an activation from its statistics.
func rangeEncoding(name string, a *stats.ActStats, r quantize.RangeOptions) (*gqf.Encoding, error) {
	lo, hi := quantize.ActRange(a, r)
	e := gqf.RangeEncoding(lo, hi, r.Bits)
	if err := gqf.CheckActivation(e); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return e, nil
}

// fromAIMET converts a per-tensor AIMET encoding to gqf's; its width must be the scheme's
// (bits): a file calibrated for another activation width is refused, not mixed in.
func fromAIMET(e *encodings.Encoding, bits int) (*gqf.Encoding, error) {
	if e.Dtype != encodings.Int || e.Type != encodings.PerTensor {
		return nil, fmt.Errorf("%s %s encodings are not supported for activations (want INT PER_TENSOR)", e.Dtype, e.Type)
	}
	if e.Bitwidth != bits {
		return nil, fmt.Errorf("bw %d, but the scheme's activations are %d-bit (gquant calibrate --scheme writes the encodings of a scheme)", e.Bitwidth, bits)
	}
	dt := gqf.DataType_UINT16
	if e.Bitwidth <= 8 {
		dt = gqf.DataType_UINT8
	} else if e.Bitwidth > 16 {
		return nil, fmt.Errorf("bw %d is not supported for activations (at most 16)", e.Bitwidth)
	}
	enc := &gqf.Encoding{Dtype: dt, Bits: uint32(e.Bitwidth), Granularity: gqf.Granularity_PER_TENSOR,
		Symmetric: e.Symmetric, Scale: []float32{e.Scale[0]}, Offset: []int32{e.Offset[0]}}
	if err := gqf.CheckActivation(enc); err != nil {
		return nil, err
	}
	return enc, nil
}

// firstN keeps the first n strings, sorted, and counts the rest.
func firstN(s []string, n int) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return problems.First(s, n)
}
