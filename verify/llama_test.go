package verify

import (
	"math"
	"testing"
)

// llamaGolden is what llama-perplexity --kl-divergence printed for gquant's stories260k GGUFs
// against the bf16 GGUF's base file (testdata/README.md).
type llamaGolden struct {
	file                         string
	pplQ, pplBase                float64
	klMean, klErr, klMax, klP999 float64
	klP90, klMedian              float64
	dpMean, dpRMS, sameTop       float64 // fractions
}

var llamaGoldens = []llamaGolden{
	{"testdata/stories260k-q8_0-c64.kld", 5.906669, 5.979585, 0.000993, 0.000102, 0.008971, 0.008482, 0.002238, 0.000734,
		0.00119, 0.00819, 0.99194},
	{"testdata/stories260k-q4_0-c64.kld", 6.292407, 5.979585, 0.082723, 0.006993, 0.430173, 0.419895, 0.170959, 0.069157,
		-0.02403, 0.09975, 0.87903},
}

// TestLlamaPerplexityMetrics reproduces llama-perplexity's statistics from its own files: the base
// rows (bf16 model) against the quantized model's rows, read back as its logits (log-probabilities
// are logits up to a constant; the entries the rows floor 16 nats below the top get −100). The
// runtimes do not enter: this checks the file reader and the metric code against llama.cpp's.
func TestLlamaPerplexityMetrics(t *testing.T) {
	base, err := OpenKLD("testdata/stories260k-bf16-c64.kld")
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	for _, g := range llamaGoldens {
		q, err := OpenKLD(g.file)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := NewWindows(base.Tokens, base.Ctx, 0, 1)
		a := NewAccumulator(base.Vocab, 0)
		lq := make([]float64, base.Vocab)
		logits := make([]float32, base.Vocab)
		for c := 0; c < base.Chunks; c++ {
			qrows, err := q.ReadChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			qcopy := make([]RefRow, len(qrows))
			for j, r := range qrows {
				qcopy[j] = append(RefRow(nil), r...)
			}
			brows, err := base.ReadChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			for j := range brows {
				qcopy[j].LogProbs(lq)
				for i, v := range lq {
					logits[i] = float32(v)
					if qcopy[j][4+i] == 0 {
						// Below the row's floor the true value is unknown but smaller; the
						// floor itself would add ~e^-16 of mass per entry, which LogSoftmax
						// renormalises away, shifting every KL by ~2e-5.
						logits[i] = -100
					}
				}
				a.AddCached(brows[j], nil, logits, w.Next(c, j))
			}
		}
		q.Close()
		m := a.Summary()
		if m.TokensScored != 4*31 {
			t.Fatalf("%s: %d positions, want 124", g.file, m.TokensScored)
		}
		check := func(what string, got, want, tol float64) {
			if math.Abs(got-want) > tol {
				t.Errorf("%s: %s = %.6f, llama-perplexity %.6f (tolerance %g)", g.file, what, got, want, tol)
			}
		}
		t.Logf("%s: PPL(Q) %.6f base %.6f KL %.6f median %.6f p90 %.6f max %.6f top %.5f dp %.5f rms %.5f", g.file, m.PPL.Test, m.PPL.Ref, m.KL.Mean, m.KL.Median, m.KL.P90, m.KL.Max, m.Top1, m.DeltaP.Mean, m.DeltaP.RMS)
		check("PPL(Q)", m.PPL.Test, g.pplQ, 2e-3*g.pplQ)
		check("PPL(base)", m.PPL.Ref, g.pplBase, 1e-5*g.pplBase)
		check("mean KL", m.KL.Mean, g.klMean, 0.01*g.klMean+1e-6)
		check("KL error", m.KL.MeanErr, g.klErr, 0.02*g.klErr+1e-6)
		check("max KL", m.KL.Max, g.klMax, 0.02*g.klMax+1e-6)
		check("p99.9 KL", m.KL.P999, g.klP999, 0.02*g.klP999+1e-6)
		check("p90 KL", m.KL.P90, g.klP90, 0.02*g.klP90+1e-6)
		check("median KL", m.KL.Median, g.klMedian, 0.02*g.klMedian+1e-6)
		check("mean Δp", m.DeltaP.Mean, g.dpMean, 1e-4)
		check("RMS Δp", m.DeltaP.RMS, g.dpRMS, 1e-4)
		check("same top-1", m.Top1, g.sameTop, 1e-4)
	}
}
