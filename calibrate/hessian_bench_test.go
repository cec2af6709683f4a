package calibrate

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gquant/gquant/formats/hf/synth"
)

// BenchmarkHessianPass measures a Hessian calibration against the imatrix pass in the same
// run: Calibrate with LinearOnly (the linear inputs' statistics only, as `gquant calibrate
// --imatrix` runs), without and with Hessians streamed to a statistics file, back to back, in
// swapped order every other iteration, on 2 threads over DefaultFoldTokens tokens in chunks of
// 512 (one fold group, added as the file is written). The model is GQUANT_BENCH_MODEL, or
// else one of the Qwen3-0.6B shape with 2 layers (synth preset qwen3-0.6b, the tokenizer's
// vocabulary) generated for the run. Metrics: x_imatrix, the Hessian pass's time over the
// imatrix pass's (whole Calibrate calls: load, tokenization, evaluation and, with Hessians,
// the file), and both in seconds per pass.
func BenchmarkHessianPass(b *testing.B) {
	model := os.Getenv("GQUANT_BENCH_MODEL")
	if model == "" {
		spec, err := synth.Preset("qwen3-0.6b")
		if err != nil {
			b.Fatal(err)
		}
		spec.Layers, spec.Vocab = 2, 0
		model = filepath.Join(b.TempDir(), "q06-2l")
		if err := synth.Generate(model, spec, synth.Options{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	out := filepath.Join(b.TempDir(), "h.stats")
	o := Options{Corpus: "../testdata/corpora/tinystories-calib.txt", Ctx: 512, Tokens: DefaultFoldTokens, Threads: 2, LinearOnly: true}
	pass := func(hessian bool) time.Duration {
		o := o
		if hessian {
			o.Hessian, o.Output = true, out
		}
		start := time.Now()
		if _, err := Calibrate(model, o); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		os.Remove(out)
		return d
	}
	var imatrix, hessian time.Duration
	k := 0
	for b.Loop() {
		if k%2 == 0 {
			imatrix += pass(false)
			hessian += pass(true)
		} else {
			hessian += pass(true)
			imatrix += pass(false)
		}
		k++
	}
	b.ReportMetric(hessian.Seconds()/imatrix.Seconds(), "x_imatrix")
	b.ReportMetric(imatrix.Seconds()/float64(k), "imatrix_s")
	b.ReportMetric(hessian.Seconds()/float64(k), "hessian_s")
}
