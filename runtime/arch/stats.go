package arch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

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
	for _, f := range Families() {
		if f.Name() == spec.Family {
			var ts []Tensor
			for _, t := range f.Tensors(spec) {
				if !t.Generated {
					ts = append(ts, t)
				}
			}
			return ts, nil
		}
	}
	return nil, fmt.Errorf("family %q is unknown", spec.Family)
}

// StatsModel describes a model of this spec to its calibration statistics: its identity
// (named name; the config digest is the caller's), the linear weights whose inputs are
// observed, in model order, with their column counts and the weight whose input each shares
// (Graph.SharedInputs: q for k and v, gate for up), the output last as "output.weight" (tied
// or not; optional, as llama-imatrix leaves it out), and the points of the graph.
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
		if !t.Ref.Role.IsLinear() {
			continue
		}
		name := t.Ref.GGUFName()
		m.Weights = append(m.Weights, stats.Weight{Name: name, Cols: t.Shape[len(t.Shape)-1], Leader: shared[name]})
	}
	m.Weights = append(m.Weights, stats.Weight{Name: string(Output), Cols: spec.Hidden, Optional: true})
	m.Points = g.Points()
	return m, nil
}

// ValidateStats checks statistics against a model of this spec (stats.Stats.Validate with
// StatsModel), before anything relies on them.
func ValidateStats(st *stats.Stats, spec *Spec) error {
	model, err := StatsModel("", spec)
	if err != nil {
		return err
	}
	return st.Validate(model)
}
