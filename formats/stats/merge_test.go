package stats

import "testing"

// The shards of any split cover every window exactly once, in order, begin and end on fold
// groups (the last at the end of the windows) and differ in size by at most one group; with
// groups of one chunk, they are the ranges ⌊i·m/n⌋ that version 3 cut.
func TestShardRange(t *testing.T) {
	for _, fold := range []int{1, 2, 3, 8} {
		for m := 1; m <= 60; m++ {
			groups := (m + fold - 1) / fold
			for n := 1; n <= groups; n++ {
				at, lo, hi := 0, m, 0
				for i := 0; i < n; i++ {
					r := ShardRange(i, n, m, fold)
					if r.Start != at || r.End <= r.Start || r.Start%fold != 0 || (r.End%fold != 0 && r.End != m) {
						t.Fatalf("%d windows in groups of %d, shard %d/%d: %v after chunk %d", m, fold, i, n, r, at)
					}
					if fold == 1 && (r.Start != i*m/n || r.End != (i+1)*m/n) {
						t.Fatalf("%d windows, shard %d/%d: %v", m, i, n, r)
					}
					at = r.End
					// The last group may be short: count the shard in groups.
					size := (r.End - r.Start + fold - 1) / fold
					lo, hi = min(lo, size), max(hi, size)
				}
				if at != m || hi-lo > 1 {
					t.Fatalf("%d windows in groups of %d in %d shards: cover %d, sizes %d to %d groups", m, fold, n, at, lo, hi)
				}
			}
			// More shards than groups: some hold nothing (calibrate refuses such a split).
			if r := ShardRange(0, groups+1, m, fold); r.Start != 0 || r.End != 0 {
				t.Fatalf("%d windows in groups of %d, shard 0/%d: %v, want none", m, fold, groups+1, r)
			}
		}
	}
	if r := ShardRange(3, 4, 1<<31-1, 1); r.End != 1<<31-1 {
		t.Errorf("large counts: %v", r)
	}
	if r := ShardRange(3, 4, 1<<31-1, 1000); r.End != 1<<31-1 || r.Start%1000 != 0 {
		t.Errorf("large counts in groups: %v", r)
	}
}

// complement and describeRanges, as the errors use them.
func TestComplement(t *testing.T) {
	got := complement([]ChunkRange{{2, 4}, {5, 6}}, 8)
	if len(got) != 3 || describeRanges(got) != "0–1, 4, 6–7" {
		t.Errorf("complement: %v (%s)", got, describeRanges(got))
	}
}
