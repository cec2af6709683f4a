package convert

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/runtime/arch"
)

// LoadImportance reads statistics (gquant calibrate's stats file, or llama.cpp's GGUF imatrix
// or legacy .dat) and
// returns, with the statistics, for every planned tensor it covers, what llama-quantize passes to the quantizer
// (Σx² / count per input column). Before anything is written it rejects stats that do not fit
// the model: stats recorded on another model (stats.CheckModel: other tensors, or the same
// shapes with other weights, weights being the model's arch.WeightsDigest), an entry whose row length differs from the tensor's, a linear weight of a block
// with no entry, an entry for a tensor the model does not have, or a non-finite value.
func LoadImportance(path string, p *Plan, weights string) (map[string][]float32, *stats.Stats, error) {
	st, err := stats.Read(path)
	if err != nil {
		return nil, nil, err
	}
	imp, err := importance(st, p, weights)
	return imp, st, err
}

// importance is LoadImportance over statistics already read.
func importance(st *stats.Stats, p *Plan, weights string) (map[string][]float32, error) {
	model, err := arch.StatsModel("", p.spec)
	if err != nil {
		return nil, err
	}
	model.ID.WeightsSHA256 = weights
	if err := st.CheckModel(model.ID); err != nil {
		return nil, err
	}
	cols := map[string]int{}
	linear := map[string]bool{}
	for _, t := range p.Tensors {
		cols[t.Name] = int(t.Shape[0])
		if t.ref.Role.IsLinear() || t.ref.Role == arch.Output {
			linear[t.Name] = true
		}
	}
	out := map[string][]float32{}
	var probs, unknown []string
	for _, l := range st.Linear {
		n, ok := cols[l.Weight]
		if !ok && l.Weight == "output.weight" && p.spec.Tied {
			continue // the head of a tied model is token_embd, which llama-quantize looks up by its own name
		}
		if !ok {
			unknown = append(unknown, l.Weight)
			continue
		}
		imp := st.Importance(l.Weight)
		if len(imp) != n {
			probs = append(probs, fmt.Sprintf("%s: %d columns in the stats, %d in the model", l.Weight, len(imp), n))
			continue
		}
		if err := finite(imp); err != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", l.Weight, err))
			continue
		}
		out[l.Weight] = imp
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		probs = append(probs, fmt.Sprintf("%d tensors not in the model (stats of another model?): %s", len(unknown), strings.Join(problems.First(unknown, 5), ", ")))
	}
	var missing []string
	for _, t := range p.Tensors {
		if linear[t.Name] && t.ref.Layer >= 0 && out[t.Name] == nil {
			missing = append(missing, t.Name)
		}
	}
	if len(missing) > 0 {
		probs = append(probs, fmt.Sprintf("no stats for %d linear weights: %s", len(missing), strings.Join(problems.First(missing, 5), ", ")))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", st.Source, strings.Join(probs, "; "))
	}
	return out, nil
}

// finite rejects NaN, infinite or negative importances.
func finite(imp []float32) error {
	for j, v := range imp {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
			return fmt.Errorf("column %d: invalid importance %v", j, v)
		}
	}
	return nil
}
