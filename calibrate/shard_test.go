package calibrate

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/stats"
)

// shardOpts are the options of the sharding tests: 10 chunks of 64 tokens, Hessians.
func shardOpts() Options {
	return Options{Ctx: 64, Tokens: 640, Hessian: true, Threads: 2, FoldChunks: 2}
}

// calibShards calibrates the n shards of o into dir/s<i>.stats and returns their paths; shard 1
// streams its Hessians one pass each (their exact triangles in a scratch file when it folds
// more than once), which leaves no file behind.
func calibShards(t *testing.T, o Options, dir string, n int) []string {
	t.Helper()
	var paths []string
	for i := 0; i < n; i++ {
		o.Shard = Shard{i, n}
		o.Output = filepath.Join(dir, "s"+string(rune('0'+i))+".stats")
		o.HessianMemory = 0
		if i == 1 {
			o.HessianMemory = 1
		}
		calib(t, o)
		paths = append(paths, o.Output)
		if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
			t.Fatalf("shard %d left %v", i, left)
		}
	}
	return paths
}

// The shards' chunks are disjoint contiguous ranges covering every window once; merged in any
// order, the shards' statistics are the unsharded run's statistics file byte for byte
// (Hessians, histograms, held-out extremes, metadata), whether the shards streamed their
// Hessians or not; in memory, a shard writes the same bytes as streamed.
func TestShardsMergeToOneRun(t *testing.T) {
	dir := t.TempDir()
	o := shardOpts()
	o.Output = filepath.Join(dir, "full.stats")
	full := calib(t, o)
	if m := full.Stats.Meta; m.Shards != 1 || !slices.Equal(m.ShardIndex, []int{0}) || !reflect.DeepEqual(m.ChunkSet, []stats.ChunkRange{{Start: 0, End: 10}}) || m.WindowChunks != 10 || m.WindowTokens != 640 {
		t.Fatalf("unsharded run records shards %d %v, chunks %v of %d (%d tokens)", m.Shards, m.ShardIndex, m.ChunkSet, m.WindowChunks, m.WindowTokens)
	}
	paths := calibShards(t, o, dir, 3)
	covered := make([]int, 10)
	for i, p := range paths {
		s, err := stats.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		m := s.Meta
		if m.Shards != 3 || !slices.Equal(m.ShardIndex, []int{i}) || len(m.ChunkSet) != 1 || m.WindowChunks != 10 || m.WindowTokens != 640 {
			t.Fatalf("shard %d records shards %d %v, chunks %v of %d", i, m.Shards, m.ShardIndex, m.ChunkSet, m.WindowChunks)
		}
		r := m.ChunkSet[0]
		if m.Chunks != r.End-r.Start || m.Tokens != 64*m.Chunks {
			t.Errorf("shard %d: %d chunks, %d tokens for the range %v", i, m.Chunks, m.Tokens, r)
		}
		for c := r.Start; c < r.End; c++ {
			covered[c]++
		}
	}
	if !slices.Equal(covered, slices.Repeat([]int{1}, 10)) {
		t.Fatalf("chunks evaluated per window: %v, want each once", covered)
	}

	want, _ := os.ReadFile(o.Output)
	// The same bytes on one thread, and with the exact triangles in a scratch file.
	for _, v := range []struct {
		threads int
		mem     int64
	}{{1, 0}, {2, 1}} {
		o := o
		o.Threads, o.HessianMemory, o.Output = v.threads, v.mem, filepath.Join(dir, "again.stats")
		calib(t, o)
		if got, _ := os.ReadFile(o.Output); !bytes.Equal(got, want) {
			t.Errorf("the unsharded run on %d threads (Hessian memory %d) differs", v.threads, v.mem)
		}
	}
	for k, order := range [][]string{{paths[0], paths[1], paths[2]}, {paths[2], paths[0], paths[1]}} {
		out := filepath.Join(dir, "merged"+string(rune('a'+k))+".stats")
		res, err := stats.MergeFiles(order, out, stats.MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Complete || res.Chunks != 10 {
			t.Errorf("merge: complete %v, %d chunks", res.Complete, res.Chunks)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
			t.Errorf("merged shards (order %d) differ from the unsharded statistics file", k)
		}
	}
	// The merged file reads back to the statistics of an unsharded run in memory.
	got, err := stats.Read(filepath.Join(dir, "mergeda.stats"))
	if err != nil {
		t.Fatal(err)
	}
	inMem := o
	inMem.Output = ""
	full = calib(t, inMem)
	for _, w := range full.Stats.Linear {
		g := got.LinearFor(w.Weight)
		if !slices.Equal(g.Sum2, w.Sum2) || !slices.Equal(g.Sum, w.Sum) || g.Count != w.Count {
			t.Errorf("%s: sums differ", w.Weight)
		}
		gh, _, err := got.Hessian(w.Weight)
		wh, _, _ := full.Stats.Hessian(w.Weight)
		if err != nil || !slices.Equal(gh, wh) || wh == nil {
			t.Errorf("%s: Hessian differs (%v)", w.Weight, err)
		}
	}

	// A shard in memory, then written: the streamed file's bytes, for a shard of one fold
	// group (its Hessians stored as float64s) and one of two (128-bit integers).
	for i, compact := range []bool{true, false} {
		o.Shard, o.Output = Shard{i, 3}, ""
		mem := calib(t, o)
		p := filepath.Join(dir, "mem.stats")
		if err := stats.Write(p, mem.Stats); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(paths[i])
		if !bytes.Equal(a, b) {
			t.Errorf("shard %d calibrated in memory and written differs from the streamed one", i)
		}
		if m := mem.Stats.Meta; m.OneFold() != compact {
			t.Errorf("shard %d: chunks %v in groups of %d: one fold group %v, want %v", i, m.ChunkSet, m.FoldChunks, m.OneFold(), compact)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

// Sampled chunks (a seed) shard and merge the same way, and a partial merge merges later with
// the rest to the same bytes.
func TestShardsSeededAndPartial(t *testing.T) {
	dir := t.TempDir()
	o := Options{Ctx: 32, Tokens: 32 * 8, Seed: 11, Threads: 1, Output: filepath.Join(dir, "full.stats")}
	calib(t, o)
	o.Hessian = false
	paths := calibShards(t, o, dir, 4)
	if _, err := stats.MergeFiles(paths[:2], filepath.Join(dir, "x.stats"), stats.MergeOptions{}); err == nil ||
		!strings.Contains(err.Error(), paths[0]+": calibration.chunk_set: the inputs hold 4 of the 8 chunks, shard 2, 3 of 4 (chunks 4–7) missing") {
		t.Errorf("incomplete set: %v", err)
	}
	half := filepath.Join(dir, "half.stats")
	res, err := stats.MergeFiles([]string{paths[3], paths[0]}, half, stats.MergeOptions{Partial: true})
	if err != nil || res.Complete || !slices.Equal(res.Missing, []int{1, 2}) {
		t.Fatalf("partial merge: %+v %v", res, err)
	}
	s, err := stats.Read(half)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Meta; m.Shards != 4 || !slices.Equal(m.ShardIndex, []int{0, 3}) || !reflect.DeepEqual(m.ChunkSet, []stats.ChunkRange{{Start: 0, End: 2}, {Start: 6, End: 8}}) || m.Chunks != 4 {
		t.Errorf("partial merge records shards %v of %d, chunks %v (%d)", m.ShardIndex, m.Shards, m.ChunkSet, m.Chunks)
	}
	out := filepath.Join(dir, "all.stats")
	if _, err := stats.MergeFiles([]string{paths[2], half, paths[1]}, out, stats.MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(o.Output)
	if !bytes.Equal(a, b) {
		t.Error("partial merge + the rest differs from the unsharded statistics")
	}
	if _, err := stats.MergeFiles([]string{half, paths[3]}, filepath.Join(dir, "y.stats"), stats.MergeOptions{Partial: true}); err == nil ||
		!strings.Contains(err.Error(), paths[3]+": calibration.chunk_set: chunks 6–7 are also in "+half) {
		t.Errorf("a shard merged twice: %v", err)
	}
}

// rewriteStats copies a statistics file with its metadata edited and the tensors whose names
// end in one of drop left out.
func rewriteStats(t *testing.T, src, dst string, edit func(kvs []gguf.KV) []gguf.KV, drop ...string) string {
	t.Helper()
	gf, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	h := &gguf.Header{KVs: edit(slices.Clone(gf.KVs))}
	var data [][]byte
	for i, ti := range gf.Tensors {
		if slices.ContainsFunc(drop, func(s string) bool { return strings.HasSuffix(ti.Name, s) }) {
			continue
		}
		h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: ti.Name, Type: ti.Type, Shape: ti.Shape})
		data = append(data, gf.TensorData(i))
	}
	if err := gguf.WriteFile(dst, h, func(i int) ([]byte, error) { return data[i], nil }); err != nil {
		t.Fatal(err)
	}
	return dst
}

// setKV returns an edit that sets key to v (deleting it when v is nil).
func setKV(key string, v any) func([]gguf.KV) []gguf.KV {
	return func(kvs []gguf.KV) []gguf.KV {
		for i := range kvs {
			if kvs[i].Key == key {
				if v == nil {
					return slices.Delete(kvs, i, i+1)
				}
				kvs[i].Value = v
			}
		}
		return kvs
	}
}

// Merging refuses, in one line naming the file and the key: the same shard twice, shards of
// another model (other shapes, or the same shapes with other weights), another chunking (ctx,
// tokens), of another split, older statistics without exact sums, and mixed kinds; nothing is
// written.
func TestMergeRefusals(t *testing.T) {
	dir := t.TempDir()
	o := Options{Ctx: 32, Tokens: 32 * 6, Threads: 1}
	paths := calibShards(t, o, dir, 2)
	s0, s1 := paths[0], paths[1]
	other := func(name string, o Options, model string) string {
		o.Shard, o.Output = Shard{1, 2}, filepath.Join(dir, name)
		if _, err := Calibrate(model, func() Options { o.Corpus = corpus; return o }()); err != nil {
			t.Fatal(err)
		}
		return o.Output
	}
	ctx16 := other("ctx16.stats", Options{Ctx: 16, Tokens: 32 * 6, Threads: 1}, model260k)
	tok := other("tok.stats", Options{Ctx: 32, Tokens: 32 * 8, Threads: 1}, model260k)
	split3 := func() string {
		o := o
		o.Shard, o.Output = Shard{2, 3}, filepath.Join(dir, "split3.stats")
		calib(t, o)
		return o.Output
	}()
	weights := rewriteStats(t, s1, filepath.Join(dir, "weights.stats"), setKV("calibration.model.weights_sha256", strings.Repeat("ab", 32)))
	// Hessians folded in groups of 3 chunks and of 1; a version 3 file (each chunk folded on its
	// own); a file whose chunks do not lie on its fold groups.
	h := Options{Ctx: 32, Tokens: 32 * 6, Threads: 1, Hessian: true, FoldChunks: 3}
	fold3 := calibShards(t, h, t.TempDir(), 2)
	fold1 := other("fold1.stats", func() Options { h.FoldChunks = 1; return h }(), model260k)
	v3 := rewriteStats(t, fold3[1], filepath.Join(dir, "v3.stats"), func(kvs []gguf.KV) []gguf.KV {
		return setKV("calibration.version", uint32(3))(setKV("calibration.fold_chunks", nil)(kvs))
	})
	misaligned := rewriteStats(t, fold3[1], filepath.Join(dir, "misaligned.stats"), setKV("calibration.fold_chunks", uint32(2)))
	v2 := rewriteStats(t, s1, filepath.Join(dir, "v2.stats"), func(kvs []gguf.KV) []gguf.KV {
		for _, k := range []string{"exact", "windows.chunks", "windows.tokens", "shard.count", "shard.index", "chunk_set"} {
			kvs = setKV("calibration."+k, nil)(kvs)
		}
		return setKV("calibration.version", uint32(2))(kvs)
	}, "_exact")
	cases := []struct {
		name   string
		inputs []string
		want   string
	}{
		{"same shard twice", []string{s0, s1, s0}, s0 + ": calibration.chunk_set: chunks 0–2 are also in " + s0},
		{"other ctx", []string{s0, ctx16}, ctx16 + ": calibration.ctx: 16, but 32 in " + s0 + ": statistics of different chunkings do not merge"},
		{"other tokens", []string{s0, tok}, tok + ": calibration.windows.chunks: 8, but 6 in " + s0},
		{"other split", []string{s0, split3}, split3 + ": calibration.shard.count: 3, but 2 in " + s0 + ": shards of different splits"},
		{"other weights", []string{s0, weights}, weights + ": calibration.model.weights_sha256: ababababab"},
		{"version 2", []string{s0, v2}, v2 + ": calibration.version: version 2 statistics hold no exact sums and cannot be merged"},
		{"mixed kinds", []string{s0, llamaGGUF}, llamaGGUF + ": general.type: a llama.cpp imatrix, but " + s0 + " holds gquant statistics"},
		{"other fold group", []string{fold3[0], fold1}, fold1 + ": calibration.fold_chunks: 1, but 3 in " + fold3[0] + ": Hessians folded in different groups of chunks do not merge"},
		{"version 3", []string{fold3[0], v3}, v3 + ": calibration.fold_chunks: 1, but 3 in " + fold3[0]},
		{"misaligned", []string{fold3[0], misaligned}, misaligned + ": calibration.chunk_set: [{3 6}] does not begin and end on the fold groups of 2 chunks (calibration.fold_chunks)"},
	}
	if _, err := os.Stat(model3m); err == nil {
		cases = append(cases, struct {
			name   string
			inputs []string
			want   string
		}{"other model", []string{s0, other("3m.stats", o, model3m)}, "3m.stats: calibration.model.hidden: 256, but 64 in " + s0 + ": statistics of different models do not merge"})
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), "m.stats")
		_, err := stats.MergeFiles(c.inputs, out, stats.MergeOptions{Partial: true})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
			t.Errorf("%s: the merge left %d files", c.name, len(entries))
		}
	}
	// The version 2 and 3 files still read, as before; the version 3 one folded each chunk.
	if _, err := stats.Read(v2); err != nil {
		t.Errorf("version 2 file: %v", err)
	}
	if s, err := stats.Read(v3); err != nil || s.Meta.FoldChunks != 1 || s.Version != 3 {
		t.Errorf("version 3 file: %v", err)
	}
	// Without Hessians, version 3 and 4 statistics merge (both fold each chunk).
	s1v3 := rewriteStats(t, s1, filepath.Join(dir, "s1v3.stats"), func(kvs []gguf.KV) []gguf.KV {
		return setKV("calibration.version", uint32(3))(setKV("calibration.fold_chunks", nil)(kvs))
	})
	if _, err := stats.MergeFiles([]string{s0, s1v3}, filepath.Join(t.TempDir(), "m.stats"), stats.MergeOptions{}); err != nil {
		t.Errorf("version 3 and 4 statistics without Hessians: %v", err)
	}
}

// More shards than chunks or than fold groups, a negative fold group, or a shard outside its
// split, is refused.
func TestShardErrors(t *testing.T) {
	_, err := Calibrate(model260k, Options{Corpus: corpus, Ctx: 32, Tokens: 96, Threads: 1, Shard: Shard{3, 4}})
	if err == nil || !strings.Contains(err.Error(), corpus+": --shard 3/4: the corpus gives 3 chunks of 32 tokens, fewer than 4 shards") {
		t.Errorf("more shards than chunks: %v", err)
	}
	_, err = Calibrate(model260k, Options{Corpus: corpus, Ctx: 32, Tokens: 96, Threads: 1, Hessian: true, FoldChunks: 2, Shard: Shard{2, 3}})
	if err == nil || !strings.Contains(err.Error(), corpus+": --shard 2/3: the corpus gives 3 chunks of 32 tokens, whose Hessians fold in 2 groups of 2 chunks, fewer than 3 shards") {
		t.Errorf("more shards than fold groups: %v", err)
	}
	if _, err := Calibrate(model260k, Options{Corpus: corpus, Ctx: 32, Tokens: 96, Threads: 1, Hessian: true, FoldChunks: -1}); err == nil || !strings.Contains(err.Error(), "fold group: -1 chunks is negative") {
		t.Errorf("a negative fold group: %v", err)
	}
	for _, s := range []string{"2/2", "-1/2", "1", "a/b", "0/0"} {
		if _, err := ParseShard(s); err == nil || !strings.Contains(err.Error(), "--shard") {
			t.Errorf("ParseShard(%q): %v", s, err)
		}
	}
	if s, err := ParseShard("1/3"); err != nil || s != (Shard{1, 3}) {
		t.Errorf("ParseShard(1/3) = %v, %v", s, err)
	}
}
