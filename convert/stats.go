package convert

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gquant/gquant/formats/imatrix"
	"github.com/gquant/gquant/runtime/arch"
)

// LoadImportance reads an importance matrix (llama.cpp's GGUF imatrix or legacy .dat) and
// returns, for every planned tensor it covers, what llama-quantize passes to the quantizer
// (Σx² / count per input column). Before anything is written it rejects stats that do not fit
// the model: an entry whose row length differs from the tensor's, a linear weight of a block
// with no entry, an entry for a tensor the model does not have, or a non-finite value.
func LoadImportance(path string, p *Plan) (map[string][]float32, error) {
	m, err := imatrix.Read(path)
	if err != nil {
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
	for _, e := range m.Entries {
		n, ok := cols[e.Name]
		if !ok {
			unknown = append(unknown, e.Name)
			continue
		}
		imp := m.Importance(e.Name)
		if len(imp) != n {
			probs = append(probs, fmt.Sprintf("%s: %d columns in the stats, %d in the model", e.Name, len(imp), n))
			continue
		}
		for j, v := range imp {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
				probs = append(probs, fmt.Sprintf("%s: column %d: invalid importance %v", e.Name, j, v))
				break
			}
		}
		out[e.Name] = imp
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		probs = append(probs, fmt.Sprintf("%d tensors not in the model (stats of another model?): %s", len(unknown), strings.Join(first(unknown, 5), ", ")))
	}
	var missing []string
	for _, t := range p.Tensors {
		if linear[t.Name] && t.ref.Layer >= 0 && out[t.Name] == nil {
			missing = append(missing, t.Name)
		}
	}
	if len(missing) > 0 {
		probs = append(probs, fmt.Sprintf("no stats for %d linear weights: %s", len(missing), strings.Join(first(missing, 5), ", ")))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", path, strings.Join(probs, "; "))
	}
	return out, nil
}

func first(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string(nil), s[:n]...), fmt.Sprintf("and %d more", len(s)-n))
}

// ImportanceFile reads an importance matrix without matching it to a plan (gqf conversion
// checks each tensor as it uses it).
func ImportanceFile(path string) (map[string][]float32, error) {
	m, err := imatrix.Read(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]float32{}
	for _, e := range m.Entries {
		imp := m.Importance(e.Name)
		for j, v := range imp {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
				return nil, fmt.Errorf("%s: %s: column %d: invalid importance %v", path, e.Name, j, v)
			}
		}
		out[e.Name] = imp
	}
	return out, nil
}
