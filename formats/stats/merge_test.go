package stats

import "testing"

// The shards of any split cover every window exactly once, in order, and differ in size by at
// most one chunk.
func TestShardRange(t *testing.T) {
	for m := 1; m <= 60; m++ {
		for n := 1; n <= m; n++ {
			at, lo, hi := 0, m, 0
			for i := 0; i < n; i++ {
				r := ShardRange(i, n, m)
				if r.Start != at || r.End <= r.Start {
					t.Fatalf("%d windows, shard %d/%d: %v after chunk %d", m, i, n, r, at)
				}
				at = r.End
				lo, hi = min(lo, r.End-r.Start), max(hi, r.End-r.Start)
			}
			if at != m || hi-lo > 1 {
				t.Fatalf("%d windows in %d shards: cover %d, sizes %d to %d", m, n, at, lo, hi)
			}
		}
	}
	if r := ShardRange(3, 4, 1<<31-1); r.End != 1<<31-1 {
		t.Errorf("large counts: %v", r)
	}
}

// complement and describeRanges, as the errors use them.
func TestComplement(t *testing.T) {
	got := complement([]ChunkRange{{2, 4}, {5, 6}}, 8)
	if len(got) != 3 || describeRanges(got) != "0–1, 4, 6–7" {
		t.Errorf("complement: %v (%s)", got, describeRanges(got))
	}
}
