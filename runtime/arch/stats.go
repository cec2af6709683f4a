package arch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/stats"
)

// TensorsDigest is the SHA-256 (hex) of a tensor list, one "name d0,d1\n" line per tensor (GGUF
// name, HF shape), in the order given: the identity statistics record (stats.ModelID).
func TensorsDigest(ts []Tensor) string {
	h := sha256.New()
	for _, t := range ts {
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(h, "%s %s\n", t.Ref.GGUFName(), strings.Join(dims, ","))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// StoredTensors returns the tensors of a model of this spec that files store (rope_freqs,
// generated from the config, excluded), in the order GGUF files hold them.
func StoredTensors(spec *Spec) ([]Tensor, error) {
	f, err := ForSpec(spec)
	if err != nil {
		return nil, err
	}
	var ts []Tensor
	for _, t := range f.Tensors(spec) {
		if !t.Generated {
			ts = append(ts, t)
		}
	}
	return ts, nil
}

// StatsModel describes a model of this spec to its calibration statistics: its identity
// (named name; the config digest is the caller's), the linear weights whose inputs are
// observed, in model order, with their column counts and the weight whose input each shares
// (Graph.SharedInputs: q for k and v, gate for up), the output last as "output.weight" (tied
// or not; optional, as llama-imatrix leaves it out), and the points of the graph. A mixture
// of experts adds its router and, for every stack of expert matrices, each expert's matrix
// (ExpertWeight: the rows routed to that expert; up shares expert e's gate input).
func StatsModel(name string, spec *Spec) (stats.Model, error) {
	ts, err := StoredTensors(spec)
	if err != nil {
		return stats.Model{}, err
	}
	m := stats.Model{ID: stats.ModelID{
		Name: name, Family: spec.Family,
		Hidden: spec.Hidden, Intermediate: spec.Intermediate, Layers: spec.Layers,
		Heads: spec.Heads, KVHeads: spec.KVHeads, HeadDim: spec.HeadDim, Vocab: spec.Vocab,
		TensorsSHA256: TensorsDigest(ts),
	}}
	g := ModelGraph(spec)
	shared := g.SharedInputs()
	for _, t := range ts {
		if !t.Ref.Role.IsLinear() && t.Ref.Role != FFNGateInp {
			continue
		}
		name := t.Ref.GGUFName()
		cols := t.Shape[len(t.Shape)-1]
		if !t.Ref.Role.IsExperts() {
			m.Weights = append(m.Weights, stats.Weight{Name: name, Cols: cols, Leader: shared[name]})
			continue
		}
		gate := TensorRef{Role: FFNGateExps, Layer: t.Ref.Layer}.GGUFName()
		for e := 0; e < spec.Experts; e++ {
			w := stats.Weight{Name: ExpertWeight(name, e), Cols: cols}
			if t.Ref.Role == FFNUpExps {
				w.Leader = ExpertWeight(gate, e)
			}
			m.Weights = append(m.Weights, w)
		}
	}
	m.Weights = append(m.Weights, stats.Weight{Name: string(Output), Cols: spec.Hidden, Optional: true})
	m.Points = g.Points()
	return m, nil
}

// WeightsDigest fingerprints the weights of a HuggingFace model of this spec: the SHA-256 of
// the token embedding's dtype, shape and first 64 KiB of data ("" when m is nil or the tensor
// cannot be read). Statistics record it so that those of another model with the same shapes
// are refused.
func WeightsDigest(spec *Spec, m *hf.Model) string {
	if m == nil || m.Checkpoint == nil {
		return ""
	}
	ts, err := StoredTensors(spec)
	if err != nil {
		return ""
	}
	for _, t := range ts {
		if t.Ref.Role != TokenEmbd {
			continue
		}
		info, ok := m.Checkpoint.Lookup(t.HFName)
		if !ok {
			return ""
		}
		data, err := m.Checkpoint.Data(t.HFName)
		if err != nil {
			return ""
		}
		return TensorDigest(string(info.DType), info.Shape, data)
	}
	return ""
}

// TensorDigest is WeightsDigest's fingerprint of the token embedding: the SHA-256 of its
// dtype, shape (HF order) and first 64 KiB of data. A GGUF file holding the same BF16 bytes
// has the same digest.
func TensorDigest(dtype string, shape []int, data []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %v\n", dtype, shape)
	h.Write(data[:min(len(data), 64<<10)])
	return hex.EncodeToString(h.Sum(nil))
}

// ValidateStats checks statistics against a model of this spec (stats.Stats.Validate with
// StatsModel), before anything relies on them; weights is the model's WeightsDigest ("" when
// unknown).
func ValidateStats(st *stats.Stats, spec *Spec, weights string) error {
	model, err := StatsModel("", spec)
	if err != nil {
		return err
	}
	model.ID.WeightsSHA256 = weights
	return st.Validate(model)
}
