package stats

import (
	"fmt"
	"strings"

	"github.com/gquant/gquant/formats/imatrix"
)

// Imatrix converts the statistics to llama.cpp's importance matrix: per weight Σx² (rounded
// to float32) and the row count, the calibration corpus as the dataset, Chunks chunks of Ctx
// tokens. Like llama-imatrix, it leaves output.weight out unless withOutput is set. Σx is
// not included (llama.cpp 34af94cd does not write it either).
func (s *Stats) Imatrix(withOutput bool) (*imatrix.Matrix, error) {
	if s.Kind == "imatrix-dat" {
		return nil, fmt.Errorf("%s: legacy imatrix statistics hold no raw sums to convert", s.name())
	}
	m := &imatrix.Matrix{ChunkCount: s.Meta.Chunks, ChunkSize: s.Meta.Ctx}
	if s.Meta.CorpusName != "" {
		m.Datasets = strings.Split(s.Meta.CorpusName, ",")
	}
	for _, ls := range s.Linear {
		if ls.Weight == "output.weight" && !withOutput {
			continue
		}
		e := imatrix.Entry{Name: ls.Weight, Sum2: make([]float32, ls.Cols), Counts: []int64{ls.Count}}
		for j, v := range ls.Sum2 {
			e.Sum2[j] = float32(v)
		}
		m.Entries = append(m.Entries, e)
	}
	m.Sort()
	return m, nil
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
