package verify

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// WriteText renders the report for people: one metric per line.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	ref := r.Reference.Path
	if r.Reference.Logits != "" {
		ref = r.Reference.Logits + " (stored)"
	}
	p("gquant verify: %s against %s\n", r.Artifact.Path, ref)
	p("artifact          %.4f bpw (linear layers %.4f bpw)\n", r.Artifact.BPW, r.Artifact.BPWLinear)
	if e := r.Artifact.ActivationEncodings; e != nil {
		p("activations       %d of the file's %d static encodings simulated\n", e.Simulated, e.InFile)
	}
	p("tokens scored     %d (%d windows of %d tokens, positions %d–%d scored, KL %s)\n",
		r.TokensScored, r.Protocol.Chunks, r.Protocol.Ctx, r.Protocol.First, r.Protocol.Ctx-2, r.Protocol.KL)
	if r.Logits.Available() {
		p("logits SNR        %s dB   (energy: 10·log10(Σref² / Σ(ref−test)²))\n", r.Logits.SNR)
		p("logits PSNR       %s dB   (peak: 20·log10(max|ref| / RMS error))\n", r.Logits.PSNR)
	} else {
		p("logits SNR        n/a (%s)\n", r.Logits.Note)
	}
	if len(r.Layers) > 0 {
		var s []string
		for _, l := range r.Layers {
			s = append(s, fmt.Sprintf("%d: %s", l.Index, l.SNR))
		}
		p("hidden SNR (dB)   %s   (after each block)\n", strings.Join(s, ", "))
	}
	k := r.KL
	p("KL(ref‖test)      mean %.6f ± %.6f, median %.6f, p90 %.6f, p99 %.6f, p99.9 %.6f, max %.6f\n",
		k.Mean, k.MeanErr, k.Median, k.P90, k.P99, k.P999, k.Max)
	p("same top-1        %.3f ± %.3f %%\n", 100*r.Top1, 100*r.Top1Err)
	p("Δp                mean %.3f ± %.3f %%, RMS %.3f %%\n", 100*r.DeltaP.Mean, 100*r.DeltaP.MeanErr, 100*r.DeltaP.RMS)
	p("perplexity        ref %.4f, test %.4f, ratio %.5f\n", r.PPL.Ref, r.PPL.Test, r.PPL.Ratio)
	if g := r.Greedy; g != nil {
		var s []string
		for _, d := range g.FirstDivergence {
			if d == nil {
				s = append(s, "=")
			} else {
				s = append(s, fmt.Sprint(*d))
			}
		}
		p("greedy            %d/%d continuations of %d tokens reproduced exactly; first divergence per prompt: %s\n",
			g.Exact, g.Prompts, g.Gen, strings.Join(s, " "))
	}
	for _, key := range slices.Sorted(maps.Keys(r.Thresholds)) {
		t := r.Thresholds[key]
		verdict := "pass"
		if !t.Passed {
			verdict = "FAIL"
		}
		p("threshold         %s %g: %s (%s)\n", key, t.Limit, verdict, fmtValue(float64(t.Value)))
	}
	for _, n := range r.Notes {
		p("note              %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
