package convert

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"strings"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/quantize"
)

// Activation encodings of a gqf graph: read from an AIMET encodings file, or calibrated by
// running the graph (with the file's quantized weights, float activations) over windows of a
// corpus and taking each activation's min and max. This is deliberately simple — the
// calibrate package will provide better range setting.

// gqfValues decodes every tensor of f for the evaluator.
func gqfValues(f *gqf.File) (map[string]*value, error) {
	vals := map[string]*value{}
	for _, t := range f.Manifest.Tensors {
		shape := make([]int, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int(d)
		}
		v := &value{shape: shape}
		if t.Encoding.Dtype == gqf.DataType_INT64 && t.Encoding.Granularity == gqf.Granularity_FLOAT {
			b := f.Bytes(t.Data)
			v.i = make([]int64, len(b)/8)
			for i := range v.i {
				v.i[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
			}
		} else {
			var err error
			if v.f, err = f.Decode(t); err != nil {
				return nil, err
			}
		}
		vals[t.Name] = v
	}
	return vals, nil
}

// activationEncodings sets an encoding on every activation of the graph of f (the builder's
// manifest shares the graph) and says how they were obtained.
func activationEncodings(f *gqf.File, graph *gqf.Graph, inv *Inventory, o GQFOptions, bits int) (string, error) {
	if o.Encodings != "" {
		ef, err := encodings.Read(o.Encodings)
		if err != nil {
			return "", err
		}
		var missing []string
		for _, a := range graph.Activations {
			e, ok := ef.Activation(a.Name)
			if !ok {
				missing = append(missing, a.Name)
				continue
			}
			enc, err := fromAIMET(e)
			if err != nil {
				return "", fmt.Errorf("%s: %s: %v", o.Encodings, a.Name, err)
			}
			a.Encoding = enc
		}
		if len(missing) > 0 {
			if len(missing) > 5 {
				missing = append(missing[:5], fmt.Sprintf("and %d more", len(missing)-5))
			}
			return "", fmt.Errorf("%s: no encoding for graph activations %s", o.Encodings, strings.Join(missing, ", "))
		}
		return fmt.Sprintf("AIMET encodings %s", o.Encodings), nil
	}
	var how []string
	if st := o.Stats; st != nil && len(st.Acts) > 0 {
		r := o.Range
		r.Bits = bits
		encs, err := quantize.ActivationEncodings(st, r)
		if err != nil {
			return "", err
		}
		byName := map[string]int{}
		for i, e := range encs {
			byName[e.Name] = i
		}
		n := 0
		for _, a := range graph.Activations {
			i, ok := byName[a.Name]
			if !ok {
				continue
			}
			enc, err := fromAIMET(&encs[i])
			if err != nil {
				return "", fmt.Errorf("%s: %s: %v", st.Source, a.Name, err)
			}
			enc.Min, enc.Max = float32(enc.Scale[0]*float32(enc.Offset[0])), float32(enc.Scale[0]*float32(int32(1)<<bits-1+enc.Offset[0]))
			a.Encoding = enc
			n++
		}
		mode := r.Mode
		if mode == "" {
			mode = quantize.RangeSQNR
		}
		how = append(how, fmt.Sprintf("%d activations from the statistics (%s ranges)", n, mode))
	}
	var rest []*gqf.Value
	for _, a := range graph.Activations {
		if a.Encoding == nil {
			rest = append(rest, a)
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
	windows, err := calibrationWindows(o.Corpus, inv, int(graph.MaxLen), o.CalibLines, o.CalibWindows)
	if err != nil {
		return "", err
	}
	vals, err := gqfValues(f)
	if err != nil {
		return "", err
	}
	lo, hi := map[string]float64{}, map[string]float64{}
	observe := func(name string, v *value) {
		l, h := lo[name], hi[name]
		for _, x := range v.f {
			l, h = min(l, float64(x)), max(h, float64(x))
		}
		lo[name], hi[name] = l, h
	}
	for _, w := range windows {
		ids := &value{shape: []int{1, len(w)}, i: w}
		if _, err := evalGraph(f.Manifest.Graph, map[string]*value{inputIDs: ids}, vals, observe); err != nil {
			return "", err
		}
	}
	for _, a := range rest {
		a.Encoding = gqf.RangeEncoding(lo[a.Name], hi[a.Name], bits)
	}
	how = append(how, fmt.Sprintf("%d activations min-max over %d windows of %d tokens from %s", len(rest), len(windows), graph.MaxLen, o.Corpus))
	return strings.Join(how, "; "), nil
}

// fromAIMET converts a per-tensor AIMET encoding to gqf's.
func fromAIMET(e *encodings.Encoding) (*gqf.Encoding, error) {
	if e.Dtype != encodings.Int || e.Type != encodings.PerTensor {
		return nil, fmt.Errorf("%s %s encodings are not supported for activations (want INT PER_TENSOR)", e.Dtype, e.Type)
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

// calibrationWindows tokenizes the first lines of the corpus (BOS added to each) and makes
// one window of L tokens per line: the line followed by the next ones, so that position 0
// holds BOS as it does at inference (the stream repeats when shorter than one window).
func calibrationWindows(path string, inv *Inventory, L, lines, maxWindows int) ([][]int64, error) {
	if lines <= 0 {
		lines = 64
	}
	if maxWindows <= 0 {
		maxWindows = 8
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var stream []int64
	var starts []int
	for n := 0; n < lines && sc.Scan(); {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		starts = append(starts, len(stream))
		for _, id := range inv.Tokenizer.Encode(text, true) {
			stream = append(stream, int64(id))
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(stream) == 0 {
		return nil, fmt.Errorf("%s: no text to calibrate on", path)
	}
	for len(stream) < 2*L {
		stream = append(stream, stream...)
	}
	// Spread the windows over the lines read.
	var out [][]int64
	step := max(1, len(starts)/maxWindows)
	for i := 0; i < len(starts) && len(out) < maxWindows; i += step {
		s := starts[i]
		if s+L > len(stream) {
			s = len(stream) - L
		}
		out = append(out, stream[s:s+L])
	}
	return out, nil
}
