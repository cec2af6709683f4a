package verify

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// logits32 returns float32 logits whose softmax is p.
func logits32(p ...float64) []float32 {
	out := make([]float32, len(p))
	for i, v := range p {
		out[i] = float32(math.Log(v))
	}
	return out
}

func TestIdenticalInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const V = 50
	a := NewAccumulator(V, 2)
	for pos := 0; pos < 40; pos++ {
		x := make([]float32, V)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
		}
		a.AddLive(x, x, pos%V)
		a.AddHidden(pos%2, x, x)
	}
	m := a.Summary()
	if m.KL.Mean != 0 || m.KL.Max != 0 || m.Top1 != 1 || m.DeltaP.RMS != 0 || m.PPL.Ratio != 1 {
		t.Errorf("identical: KL mean %g max %g, top-1 %g, RMS Δp %g, PPL ratio %g; want 0 0 1 0 1",
			m.KL.Mean, m.KL.Max, m.Top1, m.DeltaP.RMS, m.PPL.Ratio)
	}
	if !math.IsInf(float64(m.Logits.SNR), 1) || !math.IsInf(float64(m.Logits.PSNR), 1) || !m.Logits.Identical {
		t.Errorf("identical: SNR %v, PSNR %v, identical %v; want inf inf true", m.Logits.SNR, m.Logits.PSNR, m.Logits.Identical)
	}
	for _, l := range m.Layers {
		if !l.Identical || !math.IsInf(float64(l.SNR), 1) {
			t.Errorf("layer %d: SNR %v, identical %v", l.Index, l.SNR, l.Identical)
		}
	}
	// Printed "inf"; JSON null with the flag.
	r := &Report{Schema: Schema, Metrics: m}
	var sb strings.Builder
	r.WriteText(&sb)
	if !strings.Contains(sb.String(), "logits SNR        inf dB") {
		t.Errorf("text does not print inf:\n%s", sb.String())
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"logits":{"snr_db":null,"psnr_db":null,"identical":true}`) {
		t.Errorf("JSON: %s", b)
	}
	back, err := ReadReport(b)
	if err != nil || !math.IsInf(float64(back.Logits.SNR), 1) || !math.IsInf(float64(back.Layers[1].SNR), 1) {
		t.Errorf("ReadReport: %v, SNR %v", err, back.Logits.SNR)
	}
}

func TestKnownValues(t *testing.T) {
	a := NewAccumulator(2, 0)
	// KL((½,½) ‖ (0.9,0.1)) = ½ ln(25/9); the argmaxes agree (0 both: ties go to the first).
	a.AddLive(logits32(0.5, 0.5), logits32(0.9, 0.1), 1)
	m := a.Summary()
	if want := 0.5108256237659906; math.Abs(m.KL.Mean-want) > 1e-6 {
		t.Errorf("KL = %.9f, want %.9f", m.KL.Mean, want)
	}
	if m.Top1 != 1 {
		t.Errorf("top-1 = %g, want 1", m.Top1)
	}
	if math.Abs(m.DeltaP.Mean-(0.1-0.5)) > 1e-6 || math.Abs(m.PPL.Ref-2) > 1e-6 || math.Abs(m.PPL.Test-10) > 1e-5 {
		t.Errorf("Δp %g (want −0.4), PPL ref %g (2), test %g (10)", m.DeltaP.Mean, m.PPL.Ref, m.PPL.Test)
	}

	a = NewAccumulator(3, 0)
	// KL((0.7,0.2,0.1) ‖ uniform) = ln 3 − H; the test's argmax (first of three ties) is 0 too.
	a.AddLive(logits32(0.7, 0.2, 0.1), []float32{5, 5, 5}, 0)
	// Reversed: argmaxes differ, KL(uniform ‖ (0.7,0.2,0.1)) = −ln 3 − (ln .7 + ln .2 + ln .1)/3.
	a.AddLive([]float32{0, 0, 0}, logits32(0.1, 0.2, 0.7), 0)
	m = a.Summary()
	want2 := -math.Log(3) - (math.Log(0.7)+math.Log(0.2)+math.Log(0.1))/3
	if math.Abs(a.kl[0]-0.2967937361247722) > 1e-6 || math.Abs(a.kl[1]-want2) > 1e-6 {
		t.Errorf("KL = %.9f, %.9f; want %.9f, %.9f", a.kl[0], a.kl[1], 0.2967937361247722, want2)
	}
	if m.Top1 != 0.5 {
		t.Errorf("top-1 = %g, want 0.5", m.Top1)
	}

	// SNR of (3, 4) against (3, 4.05): 25 / 0.0025 → 40 dB; PSNR 20·log10(4 / sqrt(0.0025/2)).
	a = NewAccumulator(2, 0)
	a.AddLive([]float32{3, 4}, []float32{3, 4.05}, 0)
	m = a.Summary()
	if math.Abs(float64(m.Logits.SNR)-40) > 1e-4 || math.Abs(float64(m.Logits.PSNR)-41.07209969647869) > 1e-4 {
		t.Errorf("SNR %v, PSNR %v; want 40, 41.0721", m.Logits.SNR, m.Logits.PSNR)
	}
}

// TestAgainstFloat64 compares the accumulator with a direct float64 computation on random
// distributions.
func TestAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const V, N = 97, 300
	a := NewAccumulator(V, 0)
	var kls []float64
	var sig, noise, peak float64
	same := 0
	for pos := 0; pos < N; pos++ {
		r, q := make([]float32, V), make([]float32, V)
		for i := range r {
			r[i] = float32(rng.NormFloat64() * 4)
			q[i] = r[i] + float32(rng.NormFloat64()*0.3)
		}
		next := rng.IntN(V)
		a.AddLive(r, q, next)
		// Direct: probabilities by normalising exp, KL as Σ p log(p/q).
		var zr, zq float64
		for i := range r {
			zr += math.Exp(float64(r[i]))
			zq += math.Exp(float64(q[i]))
		}
		var kl float64
		br, bq := 0, 0
		for i := range r {
			p, qq := math.Exp(float64(r[i]))/zr, math.Exp(float64(q[i]))/zq
			kl += p * math.Log(p/qq)
			if r[i] > r[br] {
				br = i
			}
			if q[i] > q[bq] {
				bq = i
			}
			d := float64(r[i]) - float64(q[i])
			sig += float64(r[i]) * float64(r[i])
			noise += d * d
			peak = math.Max(peak, math.Abs(float64(r[i])))
		}
		if br == bq {
			same++
		}
		kls = append(kls, kl)
	}
	m := a.Summary()
	var mean float64
	for _, v := range kls {
		mean += v
	}
	mean /= N
	if math.Abs(m.KL.Mean-mean) > 1e-9*mean {
		t.Errorf("mean KL %.12g, direct %.12g", m.KL.Mean, mean)
	}
	if m.Top1 != float64(same)/N {
		t.Errorf("top-1 %g, direct %g", m.Top1, float64(same)/N)
	}
	if want := 10 * math.Log10(sig/noise); math.Abs(float64(m.Logits.SNR)-want) > 1e-9 {
		t.Errorf("SNR %v, direct %g", m.Logits.SNR, want)
	}
	if want := 20 * math.Log10(peak/math.Sqrt(noise/(N*V))); math.Abs(float64(m.Logits.PSNR)-want) > 1e-9 {
		t.Errorf("PSNR %v, direct %g", m.Logits.PSNR, want)
	}
}

// A next token below the stored row's floor: llama.cpp counts the floor (16 nats + log Σ under
// the top); with the stored logits verify counts its true log-probability.
func TestCachedClippedNext(t *testing.T) {
	ref := []float32{0, -30}
	row := make(RefRow, RowLen(2))
	QuantizeLogProbs(row, ref)
	if row[5] != 0 {
		t.Fatalf("q[1] = %d, want 0 (below the floor)", row[5])
	}
	a := NewAccumulator(2, 0)
	a.AddCached(row, nil, ref, 1)
	if got, want := math.Log(a.Summary().PPL.Ref), 16+math.Log1p(math.Exp(-30)); math.Abs(got-want) > 1e-4 {
		t.Errorf("without logits: ln PPL(ref) %g, want llama.cpp's %g", got, want)
	}
	a = NewAccumulator(2, 0)
	a.AddCached(row, ref, ref, 1)
	if got := math.Log(a.Summary().PPL.Ref); math.Abs(got-30) > 1e-4 {
		t.Errorf("with logits: ln PPL(ref) %g, want 30", got)
	}
}

// TestRowsMatchOneByOne adds a window's positions with AddLiveRows and AddCachedRows on 1 and
// several workers, and one by one with AddLive and AddCached: the metrics must be the same
// bits; and checks liveStats' KL, which sums p·(x − y) and adds the log-sum-exps, against
// the log-probabilities' Σ p·(log p − log q) (LogSoftmax, KL).
func TestRowsMatchOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const V, N = 211, 37
	ref, test := make([]float32, N*V), make([]float32, N*V)
	for i := range ref {
		ref[i] = float32(rng.NormFloat64() * 5)
		test[i] = ref[i] + float32(rng.NormFloat64()*0.2)
	}
	test[3*V+5] = float32(math.Inf(-1)) // a test log-probability of −inf: KL +inf there
	next := make([]int, N)
	rows := make([]RefRow, N)
	for j := range next {
		next[j] = rng.IntN(V)
		rows[j] = make(RefRow, RowLen(V))
		QuantizeLogProbs(rows[j], ref[j*V:(j+1)*V])
	}
	rows[2][4+next[2]] = 0 // below the floor: the logits give its log-probability
	one, cached := NewAccumulator(V, 0), NewAccumulator(V, 0)
	lp, lq := make([]float64, V), make([]float64, V)
	for j := range next {
		r, q := ref[j*V:(j+1)*V], test[j*V:(j+1)*V]
		one.AddLive(r, q, next[j])
		cached.AddCached(rows[j], r, q, next[j])
		LogSoftmax(lp, r)
		LogSoftmax(lq, q)
		want := KL(lp, lq)
		if got := one.kl[j]; !(math.Abs(got-want) <= 1e-12*(1+math.Abs(want))) && !(math.IsInf(got, 1) && math.IsInf(want, 1)) {
			t.Errorf("position %d: KL %v, from the log-probabilities %v", j, got, want)
		}
		// llama-perplexity's KL from the stored row: the terms above −16 nats.
		rows[j].LogProbs(lp)
		want, floor := 0, 0
		for i, l := range lp {
			if l > -16 {
				want += math.Exp(l) * (l - lq[i])
			} else {
				floor++
			}
		}
		if got := cached.kl[j]; !(math.Abs(got-want) <= 1e-12*(1+math.Abs(want))) && !(math.IsInf(got, 1) && math.IsInf(want, 1)) {
			t.Errorf("position %d: cached KL %v, from the row's log-probabilities %v (%d at the floor)", j, got, want, floor)
		}
		if floor == 0 || floor == V {
			t.Fatalf("position %d: %d of %d log-probabilities at the floor: the test does not cross it", j, floor, V)
		}
	}
	same := func(what string, a, b *Accumulator) {
		t.Helper()
		ma, mb := a.Summary(), b.Summary()
		for j := range a.kl {
			if math.Float64bits(a.kl[j]) != math.Float64bits(b.kl[j]) || a.dp[j] != b.dp[j] ||
				a.nllRef[j] != b.nllRef[j] || a.nllTst[j] != b.nllTst[j] {
				t.Fatalf("%s: position %d: KL %v Δp %v NLL %v %v, one by one %v %v %v %v", what, j,
					b.kl[j], b.dp[j], b.nllRef[j], b.nllTst[j], a.kl[j], a.dp[j], a.nllRef[j], a.nllTst[j])
			}
		}
		if ma.Top1 != mb.Top1 || ma.Logits.SNR != mb.Logits.SNR || ma.Logits.PSNR != mb.Logits.PSNR {
			t.Errorf("%s: top-1 %v SNR %v PSNR %v, one by one %v %v %v", what, mb.Top1, mb.Logits.SNR, mb.Logits.PSNR,
				ma.Top1, ma.Logits.SNR, ma.Logits.PSNR)
		}
	}
	for _, workers := range []int{1, 4} {
		a := NewAccumulator(V, 0)
		a.AddLiveRows(ref, test, next, workers)
		same(fmt.Sprintf("AddLiveRows, %d workers", workers), one, a)
		c := NewAccumulator(V, 0)
		c.AddCachedRows(rows, ref, test, next, workers)
		same(fmt.Sprintf("AddCachedRows, %d workers", workers), cached, c)
	}
}
