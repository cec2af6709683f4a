package stats

import (
	"fmt"
	"strings"

	"github.com/gquant/gquant/formats/imatrix"
)

// Imatrix converts the statistics to llama.cpp's importance matrix: per weight Σx² (rounded
// to float32) and the row count, the calibration corpus as the dataset, Chunks chunks of Ctx
// tokens. The experts of a stack (ExpertWeight) make one entry of one matrix per expert, in
// expert order, each with its own count, as llama-imatrix records MUL_MAT_ID: an expert no
// token was routed to has count 0 (llama-quantize then weights its columns equally). Like
// llama-imatrix, it leaves output.weight out unless withOutput is set. Σx is not included
// (llama.cpp 34af94cd does not write it either).
func (s *Stats) Imatrix(withOutput bool) (*imatrix.Matrix, error) {
	if s.Kind == "imatrix-dat" {
		return nil, fmt.Errorf("%s: legacy imatrix statistics hold no raw sums to convert", s.name())
	}
	m := &imatrix.Matrix{ChunkCount: s.Meta.Chunks, ChunkSize: s.Meta.Ctx}
	if s.Meta.CorpusName != "" {
		m.Datasets = strings.Split(s.Meta.CorpusName, ",")
	}
	stacks := map[string][]*LinearStats{}
	for _, ls := range s.Linear {
		if ls.Weight == "output.weight" && !withOutput {
			continue
		}
		if st, e, ok := SplitExpert(ls.Weight); ok {
			if e >= len(stacks[st]) {
				stacks[st] = append(stacks[st], make([]*LinearStats, e+1-len(stacks[st]))...)
			}
			stacks[st][e] = ls
			continue
		}
		e := imatrix.Entry{Name: ls.Weight, Sum2: make([]float32, ls.Cols), Counts: []int64{ls.Count}}
		for j, v := range ls.Sum2 {
			e.Sum2[j] = float32(v)
		}
		m.Entries = append(m.Entries, e)
	}
	for st, experts := range stacks {
		e := imatrix.Entry{Name: st}
		for i, ls := range experts {
			switch {
			case ls == nil:
				return nil, fmt.Errorf("%s: %s: no statistics for expert %d of %d", s.name(), st, i, len(experts))
			case ls.Cols != experts[0].Cols:
				return nil, fmt.Errorf("%s: %s: %d columns, expert 0 has %d", s.name(), ls.Weight, ls.Cols, experts[0].Cols)
			}
			for _, v := range ls.Sum2 {
				e.Sum2 = append(e.Sum2, float32(v))
			}
			e.Counts = append(e.Counts, ls.Count)
		}
		m.Entries = append(m.Entries, e)
	}
	m.Sort()
	return m, nil
}

// UnreachedExperts lists the expert matrices (ExpertWeight names) whose statistics have count
// 0: no calibration token was routed to their expert.
func (s *Stats) UnreachedExperts() []string {
	var out []string
	for _, ls := range s.Linear {
		if _, _, ok := SplitExpert(ls.Weight); ok && ls.Count == 0 {
			out = append(out, ls.Weight)
		}
	}
	return out
}

// WriteImatrix writes the statistics as a llama.cpp GGUF imatrix (see Imatrix), which
// llama-quantize --imatrix reads.
func (s *Stats) WriteImatrix(path string, withOutput bool) error {
	m, err := s.Imatrix(withOutput)
	if err != nil {
		return err
	}
	return imatrix.WriteGGUF(path, m)
}
