package convert

import (
	"fmt"
	"math"
	"sort"
	"strconv"
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
	experts := map[string][][]float32{} // stacks of experts: each expert's importance
	for _, t := range p.Tensors {
		cols[t.Name] = int(t.Shape[0])
		if t.ref.Role.IsLinear() || t.ref.Role == arch.Output {
			linear[t.Name] = true
		}
		if t.ref.Role.IsExperts() {
			experts[t.Name] = make([][]float32, t.Shape[2])
		}
	}
	out := map[string][]float32{}
	var probs, unknown []string
	for _, l := range st.Linear {
		if stack, e, ok := arch.SplitExpert(l.Weight); ok && experts[stack] != nil {
			imp := st.Importance(l.Weight)
			switch {
			case e >= len(experts[stack]):
				unknown = append(unknown, l.Weight)
			case len(imp) != cols[stack]:
				probs = append(probs, fmt.Sprintf("%s: %d columns in the stats, %d in the model", l.Weight, len(imp), cols[stack]))
			default:
				if err := finite(imp); err != nil {
					probs = append(probs, fmt.Sprintf("%s: %v", l.Weight, err))
				}
				experts[stack][e] = imp
			}
			continue
		}
		if es := experts[l.Weight]; es != nil && len(st.Importance(l.Weight)) == len(es)*cols[l.Weight] {
			// A stack's entry of one count (a legacy .dat imatrix): its experts' columns in turn.
			imp := st.Importance(l.Weight)
			for e := range es {
				es[e] = imp[e*cols[l.Weight] : (e+1)*cols[l.Weight]]
			}
			continue
		}
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
	for i := range p.Tensors {
		pt := &p.Tensors[i]
		es := experts[pt.Name]
		if es == nil {
			continue
		}
		var lacking, unreached []string
		for e, imp := range es {
			switch {
			case imp == nil:
				lacking = append(lacking, arch.ExpertWeight(pt.Name, e))
			case st.LinearFor(arch.ExpertWeight(pt.Name, e)) != nil && st.LinearFor(arch.ExpertWeight(pt.Name, e)).Count == 0:
				unreached = append(unreached, strconv.Itoa(e))
			}
		}
		if len(lacking) > 0 {
			if len(lacking) < len(es) { // all lacking: reported below as a weight without stats
				probs = append(probs, fmt.Sprintf("%s: no stats for %d of its %d experts: %s", pt.Name, len(lacking), len(es), strings.Join(problems.First(lacking, 5), ", ")))
			}
			continue
		}
		if len(unreached) > 0 {
			// llama-quantize weights the columns of an expert of count 0 equally (importance 1).
			pt.Note = joinNote(pt.Note, fmt.Sprintf("expert(s) %s saw no calibration token: importance 1, as llama-quantize", strings.Join(unreached, ", ")))
		}
		for _, imp := range es {
			out[pt.Name] = append(out[pt.Name], imp...)
		}
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

// joinNote appends a remark to a plan tensor's note.
func joinNote(note, more string) string {
	if note == "" {
		return more
	}
	return note + "; " + more
}
