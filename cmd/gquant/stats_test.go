package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/stats"
)

// The acceptance of sharded calibration: calibrate --shard 0/2 and 1/2, merged, give the
// unsharded run's statistics file byte for byte, and convert --scheme q4_k_m with them writes
// the GGUF of the unsharded statistics, byte for byte (and not the GGUF without statistics).
func TestStatsMergeShardsCLI(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	cal := []string{"calibrate", stories3m, "--corpus", calibCorpus, "--ctx", "128", "--tokens", "1280", "--threads", "2", "-q"}
	must := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := run(args...)
		if code != 0 {
			t.Fatalf("gquant %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		if stdout != "" {
			t.Errorf("gquant %s printed on stdout: %q", args[0], stdout)
		}
		return stderr
	}
	must(append(cal, "-o", p("full.stats"))...)
	if e := must(append(cal[:len(cal)-1], "--shard", "0/2", "-o", p("s0.stats"))...); !strings.Contains(e, "shard 0/2: chunks 0–4 of 10") {
		t.Errorf("shard 0/2 reports %q", e)
	}
	must(append(cal, "--shard", "1/2", "-o", p("s1.stats"))...)
	if e := must("stats", "merge", p("s1.stats"), p("s0.stats"), "-o", p("mrgd.stats")); !strings.Contains(e, "merged 2 files: all 10 chunks, as one run") {
		t.Errorf("merge reports %q", e)
	}
	a, _ := os.ReadFile(p("mrgd.stats"))
	b, _ := os.ReadFile(p("full.stats"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatal("merged shards differ from the unsharded statistics file")
	}
	for _, c := range [][]string{{"mrgd.stats", "a.gguf"}, {"full.stats", "b.gguf"}} {
		must("convert", stories3m, "--scheme", "q4_k_m", "--stats", p(c[0]), "-o", p(c[1]), "-q")
	}
	must("convert", stories3m, "--scheme", "q4_k_m", "-o", p("plain.gguf"), "-q")
	ga, _ := os.ReadFile(p("a.gguf"))
	gb, _ := os.ReadFile(p("b.gguf"))
	plain, _ := os.ReadFile(p("plain.gguf"))
	// The two differ in the statistics file they record (quantize.imatrix.file, a name of the
	// same length) and nowhere else.
	if len(ga) == 0 || !bytes.Equal(ga, bytes.Replace(gb, []byte(p("full.stats")), []byte(p("mrgd.stats")), 1)) {
		t.Error("q4_k_m with the merged statistics differs from q4_k_m with the unsharded ones")
	}
	if bytes.Equal(ga, plain) {
		t.Error("q4_k_m with statistics equals q4_k_m without: the test shows nothing")
	}

	// llama.cpp imatrix files merge too (sums and counts added).
	must(append(cal, "--shard", "0/2", "--imatrix", p("i0.gguf"))...)
	must(append(cal, "--shard", "1/2", "--imatrix", p("i1.gguf"))...)
	if e := must("stats", "merge", p("i0.gguf"), p("i1.gguf"), "-o", p("i.gguf")); !strings.Contains(e, "merged 2 imatrix files (10 chunks)") {
		t.Errorf("imatrix merge reports %q", e)
	}

	// A shard in llama.cpp's arithmetic (--acts quant) records it and does not merge with one
	// in float32 activations.
	must(append(cal, "--shard", "1/2", "--acts", "quant", "-o", p("q1.stats"))...)
	q1, err := stats.Read(p("q1.stats"))
	if err != nil {
		t.Fatal(err)
	}
	s1, err := stats.Read(p("s1.stats"))
	if err != nil {
		t.Fatal(err)
	}
	if q1.Meta.Acts != "quant" || s1.Meta.Acts != "" {
		t.Errorf("calibration.acts: %q with --acts quant, %q without", q1.Meta.Acts, s1.Meta.Acts)
	}
	// The arithmetic changed: the last layer's input sums differ (stories3m is BF16).
	lq, ls := q1.Linear[len(q1.Linear)-1], s1.Linear[len(s1.Linear)-1]
	if lq.Weight != ls.Weight || slices.Equal(lq.Sum2, ls.Sum2) {
		t.Errorf("%s: the same Σx² with --acts quant as without", lq.Weight)
	}

	// Refusals: one line, exit 1 (2 for usage), nothing written.
	out := t.TempDir()
	o := filepath.Join(out, "m.stats")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stats", "merge", p("s0.stats"), p("s0.stats"), "-o", o}, exitError, "s0.stats: calibration.chunk_set: chunks 0–4 are also in"},
		{[]string{"stats", "merge", p("s0.stats"), "-o", o}, exitError, "s0.stats: calibration.chunk_set: the inputs hold 5 of the 10 chunks, shard 1 of 2 (chunks 5–9) missing"},
		{[]string{"stats", "merge", p("s0.stats"), p("i1.gguf"), "-o", o}, exitError, "i1.gguf: general.type: a llama.cpp imatrix, but"},
		{[]string{"stats", "merge", p("s0.stats"), p("q1.stats"), "-o", o}, exitError, "q1.stats: calibration.acts: quant, but default in"},
		{append(cal, "--acts", "int8", "-o", o), exitUsage, `calibrate: --acts: "int8" is not default, float or quant`},
		{[]string{"stats", "merge", p("s0.stats"), p("s1.stats"), "-o", p("full.stats")}, exitError, "full.stats"},
		{[]string{"stats", "merge", p("s0.stats"), p("s1.stats"), "-o", p("s1.stats"), "--force"}, exitError, "s1.stats"},
		{[]string{"stats", "merge", p("s0.stats"), p("s1.stats")}, exitUsage, "stats merge: -o OUT is required"},
		{[]string{"stats", "merge", "-o", o}, exitUsage, "merge: wrong number of arguments"},
		{[]string{"stats"}, exitUsage, "stats: a subcommand is required"},
		{append(cal, "--shard", "2/2", "-o", o), exitUsage, "calibrate: --shard: 2/2: want I/N with 0 ≤ I < N"},
		{append(cal, "--shard", "half", "-o", o), exitUsage, `calibrate: --shard: "half" is not I/N`},
		{append(cal, "--shard", "11/12", "-o", o), exitError, "tinystories-calib.txt: --shard 11/12: the corpus gives 10 chunks of 128 tokens, fewer than 12 shards"},
	} {
		code, _, stderr := run(c.args...)
		if code != c.code || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("gquant %s: exit %d, %q; want exit %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.want)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("gquant %s left %d files", strings.Join(c.args, " "), len(entries))
		}
	}
	// --partial merges an incomplete set.
	if e := must("stats", "merge", p("s0.stats"), "--partial", "-o", p("half.stats")); !strings.Contains(e, "5 of 10 chunks (shards [1] missing)") {
		t.Errorf("partial merge reports %q", e)
	}
}
