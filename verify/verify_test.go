package verify

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRunIdentical(t *testing.T) {
	o, _ := fakeSetup(t, 0)
	o.LayerSNR = true
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if r.KL.Mean != 0 || r.KL.Max != 0 || r.Top1 != 1 || !r.Logits.Identical || len(r.Layers) != 3 || !r.Layers[2].Identical {
		t.Errorf("identical models: KL %g/%g top-1 %g identical %v layers %+v", r.KL.Mean, r.KL.Max, r.Top1, r.Logits.Identical, r.Layers)
	}
	if r.Greedy == nil || r.Greedy.Exact != len(DefaultPrompts) || r.Greedy.Prompts != 12 {
		t.Errorf("greedy: %+v", r.Greedy)
	}
	if r.TokensScored != r.Protocol.Chunks*(32-1-16) || r.Protocol.Chunks < 10 {
		t.Errorf("scored %d over %d windows", r.TokensScored, r.Protocol.Chunks)
	}
}

func TestRunCachedMatchesLive(t *testing.T) {
	o, models := fakeSetup(t, 0.3)
	o.SaveRef = filepath.Join(t.TempDir(), "ref.kld")
	live, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if live.KL.Mean <= 0 || live.Top1 >= 1 || live.Logits.Identical {
		t.Fatalf("perturbed model should differ: KL %g top-1 %g", live.KL.Mean, live.Top1)
	}
	// One forward pass of the corpus per model (the windows' tokens), plus the greedy prompts.
	N := live.Protocol.Chunks * live.Protocol.Ctx
	if got := models[o.Artifact].evaluated; got > N+12*40 {
		t.Errorf("test model evaluated %d tokens for a corpus of %d", got, N)
	}

	c := o
	c.SaveRef, c.RefLogits, c.Ref, c.Corpus, c.Ctx = "", o.SaveRef, "", "", 0
	cached, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 2 || models[o.Ref] == nil {
		t.Fatalf("opened %d models", len(models))
	}
	if math.Abs(cached.KL.Mean-live.KL.Mean) > 0.05*live.KL.Mean || math.Abs(cached.Top1-live.Top1) > 0.02 {
		t.Errorf("stored reference: KL %g top-1 %g; live KL %g top-1 %g", cached.KL.Mean, cached.Top1, live.KL.Mean, live.Top1)
	}
	if math.Abs(float64(cached.Logits.SNR-live.Logits.SNR)) > 0.5 {
		t.Errorf("stored reference: SNR %v, live %v", cached.Logits.SNR, live.Logits.SNR)
	}
	if cached.Greedy == nil || cached.Greedy.Exact != live.Greedy.Exact || !slices.EqualFunc(cached.Greedy.FirstDivergence, live.Greedy.FirstDivergence,
		func(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }) {
		t.Errorf("greedy from the stored continuations %+v, live %+v", cached.Greedy, live.Greedy)
	}
	if cached.Protocol.KL != "llama.cpp" || cached.TokensScored != live.TokensScored {
		t.Errorf("protocol %+v, scored %d vs %d", cached.Protocol, cached.TokensScored, live.TokensScored)
	}
	if _, ok := cached.Inputs[o.SaveRef]; !ok {
		t.Errorf("inputs lack the stored reference: %v", cached.Inputs)
	}
}

// TestForwardPasses is the cost bound: verifying N corpus tokens evaluates at most 2N tokens,
// and N with a stored reference.
func TestForwardPasses(t *testing.T) {
	o, models := fakeSetup(t, 0.1)
	o.Gen = 0
	o.SaveRef = filepath.Join(t.TempDir(), "r.kld")
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	N := r.Protocol.Chunks * r.Protocol.Ctx
	if got := models[o.Ref].evaluated + models[o.Artifact].evaluated; got > 2*N {
		t.Errorf("live: %d tokens evaluated for %d", got, 2*N)
	}
	clear(models)
	o.RefLogits, o.SaveRef, o.Ref = o.SaveRef, "", ""
	if _, err := Run(o); err != nil {
		t.Fatal(err)
	}
	if len(models) != 1 || models[o.Artifact].evaluated > N {
		t.Errorf("stored: %d models, %d tokens for %d", len(models), models[o.Artifact].evaluated, N)
	}
}

func TestRunErrors(t *testing.T) {
	o, _ := fakeSetup(t, 0.1)
	cases := map[string]func(*Options){
		"no ref":        func(o *Options) { o.Ref = "" },
		"no corpus":     func(o *Options) { o.Corpus = "" },
		"save and read": func(o *Options) { o.SaveRef, o.RefLogits = "a", "b" },
		"snr cached":    func(o *Options) { o.RefLogits, o.LayerSNR = "x", true },
	}
	for name, edit := range cases {
		c := o
		edit(&c)
		if _, err := Run(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	c := o
	c.Ctx = 100000
	if _, err := Run(c); err == nil || !strings.Contains(err.Error(), c.Corpus) {
		t.Errorf("corpus shorter than a window: %v", err)
	}
}

func TestThresholdsAndJSON(t *testing.T) {
	o, _ := fakeSetup(t, 0.3)
	o.LayerSNR = true
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	f := func(x float64) *float64 { return &x }
	if fails := r.Apply(Limits{MinSNR: f(-100), MaxKL: f(10), MinTop1: f(0)}); len(fails) != 0 || !r.Passed {
		t.Errorf("loose limits failed: %v", fails)
	}
	fails := r.Apply(Limits{MinSNR: f(float64(r.Logits.SNR) + 1), MaxKL: f(r.KL.Mean / 2), MinTop1: f(1)})
	if len(fails) != 3 || r.Passed || !strings.Contains(fails[0], "--min-snr") {
		t.Errorf("tight limits: %v, passed %v", fails, r.Passed)
	}
	r.Command, r.GquantVersion = "gquant verify x", "test"
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, path := range []string{"schema", "command", "gquant_version", "inputs", "artifact.path", "artifact.bpw",
		"artifact.bpw_linear", "tokens_scored", "logits.snr_db", "logits.psnr_db", "layers", "kl.mean", "kl.mean_err",
		"kl.median", "kl.p90", "kl.p99", "kl.p999", "kl.max", "top1", "top1_err", "delta_p.mean", "delta_p.rms",
		"ppl.ref", "ppl.test", "ppl.ratio", "greedy.prompts", "greedy.exact", "greedy.first_divergence",
		"thresholds.min_snr_db", "passed"} {
		var v any = m
		for _, k := range strings.Split(path, ".") {
			mm, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v, ok = mm[k]
			if !ok {
				t.Errorf("JSON lacks %s", path)
			}
		}
	}
	if m["schema"] != Schema {
		t.Errorf("schema %v", m["schema"])
	}
	if l := m["layers"].([]any); len(l) != 3 || l[0].(map[string]any)["index"] != 0.0 {
		t.Errorf("layers %v", l)
	}
	back, err := ReadReport(b)
	if err != nil || back.KL != r.KL || back.Passed != r.Passed {
		t.Errorf("round trip: %v", err)
	}
	plot := filepath.Join(t.TempDir(), "p.png")
	if err := r.WritePlot(plot); err != nil {
		t.Error(err)
	}
}

// A llama.cpp base file (no gquant trailer): no logits SNR (n/a, JSON null, not identical),
// --min-snr refused, a note on PPL(ref).
func TestRunLlamaFile(t *testing.T) {
	o, _ := fakeSetup(t, 0.3)
	o.SaveRef = filepath.Join(t.TempDir(), "ref.kld")
	live, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(o.SaveRef)
	n := kldHeaderSize + 4*live.Protocol.Chunks*live.Protocol.Ctx + live.TokensScored*RowLen(64)*2
	os.WriteFile(o.SaveRef, b[:n], 0o644)
	c := o
	c.RefLogits, c.SaveRef, c.Ref, c.Ctx, c.Gen = o.SaveRef, "", "", 0, 0
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Logits.Available() || r.Logits.Identical || r.Logits.Note == "" || len(r.Notes) == 0 {
		t.Errorf("logits %+v, notes %v", r.Logits, r.Notes)
	}
	var sb strings.Builder
	r.WriteText(&sb)
	js, _ := json.Marshal(r)
	if !strings.Contains(sb.String(), "logits SNR        n/a") || !strings.Contains(string(js), `"snr_db":null,"psnr_db":null,"identical":false`) {
		t.Errorf("text:\n%s\nJSON %s", sb.String(), js)
	}
	if math.Abs(r.KL.Mean-live.KL.Mean) > 0.05*live.KL.Mean {
		t.Errorf("KL %g, live %g", r.KL.Mean, live.KL.Mean)
	}
	if fails := r.Apply(Limits{MinSNR: new(float64)}); len(fails) != 1 {
		t.Errorf("--min-snr without logits should fail: %v", fails)
	}
	c.NeedSNR = true
	if _, err := Run(c); err == nil || !strings.Contains(err.Error(), "--min-snr") {
		t.Errorf("NeedSNR with a llama.cpp file: %v", err)
	}
}
