package runtime_test

import (
	"os"
	"testing"

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
