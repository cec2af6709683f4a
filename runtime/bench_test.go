package runtime_test

import (
	"os"
	"testing"
	"time"

	. "github.com/gquant/gquant/runtime"
)

// benchModel loads the model named by GQUANT_BENCH_MODEL (default: the bundled stories260k).
func benchModel(b *testing.B) *Model {
	path := os.Getenv("GQUANT_BENCH_MODEL")
	if path == "" {
		path = modelDir(b, stories260k)
	}
	return loadModel(b, path, Options{Threads: 1})
}

// BenchmarkPrefill evaluates 128 tokens at once.
func BenchmarkPrefill(b *testing.B) {
	m := benchModel(b)
	ids := make([]int, 128)
	for i := range ids {
		ids[i] = 3 + i*7%(m.Vocab()-3)
	}
	st := m.NewState(len(ids))
	for b.Loop() {
		st.Reset()
		if _, err := m.Eval(st, ids, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkDecode evaluates 64 tokens one at a time.
func BenchmarkDecode(b *testing.B) {
	m := benchModel(b)
	st := m.NewState(64)
	for b.Loop() {
		st.Reset()
		id := 1
		for i := 0; i < 64; i++ {
			l, err := m.Eval(st, []int{id}, false)
			if err != nil {
				b.Fatal(err)
			}
			id = Argmax(l)
		}
	}
	b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkDecodeBatch decodes 16 tokens after a 4-token prompt in each of 12 sequences (verify's
// greedy prompts), together (EvalBatch: the weights read once a step) and one sequence after
// the other (Eval), alternately in each round: batched_tok/s, alone_tok/s and their ratio,
// speedup. On a model whose decode is bound by reading the weights (GQUANT_BENCH_MODEL=a real
// size file) the ratio approaches the batch size until the products become compute-bound.
func BenchmarkDecodeBatch(b *testing.B) {
	const seqs, steps = 12, 16
	m := benchModel(b)
	sts := make([]*State, seqs)
	for i := range sts {
		sts[i] = m.NewState(4 + steps)
	}
	prefill := func() {
		for i, st := range sts {
			st.Reset()
			if _, err := m.Eval(st, []int{1, 3 + i, 5 + i, 7 + i}, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	toks := make([]int, seqs)
	var together, alone time.Duration
	for b.Loop() {
		prefill()
		t0 := time.Now()
		for s := range steps {
			for i := range toks {
				toks[i] = 3 + (i*31+s*7)%(m.Vocab()-3)
			}
			if _, err := m.EvalBatch(sts, toks); err != nil {
				b.Fatal(err)
			}
		}
		together += time.Since(t0)
		prefill()
		t0 = time.Now()
		for s := range steps {
			for i, st := range sts {
				if _, err := m.Eval(st, []int{3 + (i*31+s*7)%(m.Vocab()-3)}, false); err != nil {
					b.Fatal(err)
				}
			}
		}
		alone += time.Since(t0)
	}
	tokens := float64(seqs * steps * b.N)
	b.ReportMetric(tokens/together.Seconds(), "batched_tok/s")
	b.ReportMetric(tokens/alone.Seconds(), "alone_tok/s")
	b.ReportMetric(alone.Seconds()/together.Seconds(), "speedup")
}
