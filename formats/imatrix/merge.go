package imatrix

import (
	"fmt"
	"math"
)

// Merge combines importance matrices as llama-imatrix --in-file A --in-file B … does without a
// prompt (tools/imatrix/imatrix.cpp load_imatrix, then save_imatrix): entries are the union
// of the inputs' (sorted by name); per entry the Σx² are added in float32, input after input,
// and the counts in integers; a dense entry's single count is broadcast to a stack of expert
// matrices, as llama.cpp does; the datasets are concatenated in input order, and the chunk
// count is the largest summed count divided by the chunk size. names name the inputs in
// errors.
//
// The chunk size is the inputs' (llama-imatrix takes its own -c instead); GGUF inputs of
// different chunk sizes are refused. A legacy .dat input is turned into raw sums as llama.cpp
// does, (Σx²/count)·ncall·chunk size with count ncall·chunk size, which needs the chunk size
// of a GGUF input; inputs that are all legacy stay in the legacy form (sums and ncall added),
// which gives the same importances, and the result is Legacy.
//
// Σx (in_sum, which llama.cpp 34af94cd neither reads nor writes) is kept, added like Σx², for
// entries that have it in every input holding them, and dropped otherwise.
func Merge(ms []*Matrix, names []string) (*Matrix, error) {
	if len(ms) == 0 {
		return nil, fmt.Errorf("imatrix: nothing to merge")
	}
	name := func(i int) string {
		if i < len(names) {
			return names[i]
		}
		return fmt.Sprintf("input %d", i)
	}
	chunk, chunkFrom := 0, -1
	legacyOnly := true
	for i, m := range ms {
		if m.Legacy {
			continue
		}
		legacyOnly = false
		switch {
		case chunkFrom < 0:
			chunk, chunkFrom = m.ChunkSize, i
		case m.ChunkSize != chunk:
			return nil, fmt.Errorf("%s: %s: %d, but %d in %s: imatrix files of different chunk sizes do not merge", name(i), KeyChunkSize, m.ChunkSize, chunk, name(chunkFrom))
		}
	}
	if !legacyOnly && chunk <= 0 {
		return nil, fmt.Errorf("%s: %s: 0: legacy inputs need the chunk size of a GGUF one", name(chunkFrom), KeyChunkSize)
	}
	out := &Matrix{ChunkSize: chunk, Legacy: legacyOnly, Datasets: []string{}}
	idx := map[string]int{}
	hasSum := map[string]bool{}
	for i, m := range ms {
		for k := range m.Entries {
			in := &m.Entries[k]
			j, seen := idx[in.Name]
			if !seen {
				j = len(out.Entries)
				idx[in.Name] = j
				out.Entries = append(out.Entries, Entry{Name: in.Name, Sum2: make([]float32, len(in.Sum2))})
				hasSum[in.Name] = in.Sum != nil
				if in.Sum != nil {
					out.Entries[j].Sum = make([]float32, len(in.Sum))
				}
			}
			e := &out.Entries[j]
			if len(in.Sum2) != len(e.Sum2) {
				return nil, fmt.Errorf("%s: %s%s: %d values, %d in the inputs before it", name(i), printable(in.Name), SuffixSum2, len(in.Sum2), len(e.Sum2))
			}
			if m.Legacy && !legacyOnly {
				// Raw sums back from (Σx²/count)·ncall, with llama.cpp's float arithmetic.
				cs := float32(chunk)
				for v, x := range in.Sum2 {
					e.Sum2[v] += x * cs
				}
				if e.Counts == nil {
					e.Counts = make([]int64, 1)
				}
				for c := range e.Counts {
					e.Counts[c] += in.Counts[0] * int64(chunk)
				}
			} else {
				for v, x := range in.Sum2 {
					e.Sum2[v] += x
				}
				switch n := len(in.Counts); {
				case e.Counts == nil:
					e.Counts = make([]int64, n)
				case len(e.Counts) == 1 && n > 1:
					c0 := e.Counts[0]
					e.Counts = make([]int64, n)
					for c := range e.Counts {
						e.Counts[c] = c0
					}
				case len(e.Counts) != n:
					return nil, fmt.Errorf("%s: %s%s: %d matrices, %d in the inputs before it", name(i), printable(in.Name), SuffixCounts, n, len(e.Counts))
				}
				for c, x := range in.Counts {
					if e.Counts[c] > math.MaxInt64-x {
						return nil, fmt.Errorf("%s: %s%s: the summed count overflows", name(i), printable(in.Name), SuffixCounts)
					}
					e.Counts[c] += x
				}
			}
			if in.Sum == nil || !hasSum[in.Name] {
				hasSum[in.Name] = false
				e.Sum = nil
				continue
			}
			for v, x := range in.Sum {
				e.Sum[v] += x
			}
		}
		out.Datasets = append(out.Datasets, m.Datasets...)
	}
	var maxCount int64
	for _, e := range out.Entries {
		for _, c := range e.Counts {
			maxCount = max(maxCount, c)
		}
	}
	if legacyOnly {
		out.ChunkCount = int(maxCount)
	} else {
		out.ChunkCount = int(maxCount / int64(chunk))
	}
	if out.ChunkCount > math.MaxInt32 {
		return nil, fmt.Errorf("%s: %s: %d chunks do not fit", name(len(ms)-1), KeyChunkCount, out.ChunkCount)
	}
	out.Sort()
	if err := out.Validate("merged imatrix"); err != nil {
		return nil, err
	}
	return out, nil
}
