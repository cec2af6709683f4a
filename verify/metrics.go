package verify

import (
	"math"
)

// LogSoftmax writes the log-probabilities of logits into dst (len(dst) ≥ len(logits)), computed
// in float64: x − max − log Σ exp(x − max).
func LogSoftmax(dst []float64, logits []float32) {
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range logits {
		s += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(s)
	for i, v := range logits {
		dst[i] = float64(v) - lse
	}
}

// KL returns KL(p‖q) = Σ p·(log p − log q) for log-probability vectors p and q. Terms with
// p = 0 contribute nothing.
func KL(logP, logQ []float64) float64 {
	var s float64
	for i, lp := range logP {
		if math.IsInf(lp, -1) {
			continue
		}
		s += math.Exp(lp) * (lp - logQ[i])
	}
	return s
}

// Argmax returns the index of the first largest value (llama.cpp's rule for ties).
func Argmax[T float32 | float64](x []T) int {
	best := 0
	for i := 1; i < len(x); i++ {
		if x[i] > x[best] {
			best = i
		}
	}
	return best
}

// energy accumulates the sums behind SNR and PSNR of a test signal against a reference.
type energy struct {
	signal float64 // Σ ref²
	noise  float64 // Σ (ref − test)²
	peak   float64 // max |ref|
	n      int     // elements
}

func (e *energy) add(ref, test []float32) {
	for i, r := range ref {
		rf := float64(r)
		d := rf - float64(test[i])
		e.signal += rf * rf
		e.noise += d * d
		e.peak = math.Max(e.peak, math.Abs(rf))
	}
	e.n += len(ref)
}

func (e *energy) snr() float64  { return SNRdB(e.signal, e.noise) }
func (e *energy) psnr() float64 { return PSNRdB(e.peak, e.noise, e.n) }

// Accumulator gathers the per-position metrics of one comparison. Add a scored position with
// AddLive (both models' logits) or AddCached (a stored reference row and the test logits).
type Accumulator struct {
	vocab          int
	kl, dp         []float64 // per position
	nllRef, nllTst []float64 // per position
	sameTop        int
	logits         energy
	haveLogits     bool // every position brought reference logits
	layers         []energy
	lr, lt         []float64 // scratch
}

// NewAccumulator returns an Accumulator for a vocabulary of the given size and n hidden layers
// (0 when no per-layer SNR is wanted).
func NewAccumulator(vocab, layers int) *Accumulator {
	return &Accumulator{
		vocab: vocab, haveLogits: true, layers: make([]energy, layers),
		lr: make([]float64, vocab), lt: make([]float64, vocab),
	}
}

// AddLive adds one scored position from the reference's and the test's logits; next is the token
// that follows in the corpus. KL is computed exactly, in float64 over the whole vocabulary.
func (a *Accumulator) AddLive(ref, test []float32, next int) {
	LogSoftmax(a.lr, ref)
	LogSoftmax(a.lt, test)
	a.add(a.lr, KL(a.lr, a.lt), Argmax(ref), test, next)
	a.logits.add(ref, test)
}

// AddCached adds one scored position from a stored reference row (llama-perplexity's uint16
// log-probabilities) and the test's logits, with llama-perplexity's rules: the reference
// log-probabilities are dequantized in float32 and KL sums only the terms above −16 nats.
// refLogits (the gquant trailer's fp16 logits, widened) may be nil; then no logits SNR is
// available for the whole comparison, and a next token below the row's floor counts with the
// floor's log-probability in the reference's perplexity (llama.cpp's bias).
func (a *Accumulator) AddCached(row RefRow, refLogits, test []float32, next int) {
	row.LogProbs(a.lr)
	LogSoftmax(a.lt, test)
	var kl float64
	for i, lp := range a.lr {
		if lp > -16 {
			kl += math.Exp(lp) * (lp - a.lt[i])
		}
	}
	top := Argmax(a.lr)
	if refLogits != nil && row[4+next] == 0 {
		// The next token lies at or below the row's floor (16 nats under the top), where the
		// row keeps no value: take its log-probability from the stored logits instead, so
		// that the reference's perplexity is not biased low as llama.cpp's PPL(base) is.
		a.lr[next] = logSoftmaxAt(refLogits, next)
	}
	a.add(a.lr, kl, top, test, next)
	if refLogits == nil {
		a.haveLogits = false
	} else {
		a.logits.add(refLogits, test)
	}
}

// logSoftmaxAt returns the log-probability of entry i of logits, in float64.
func logSoftmaxAt(logits []float32, i int) float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range logits {
		s += math.Exp(float64(v) - m)
	}
	return float64(logits[i]) - m - math.Log(s)
}

func (a *Accumulator) add(lr []float64, kl float64, refTop int, test []float32, next int) {
	a.kl = append(a.kl, kl)
	if refTop == Argmax(test) {
		a.sameTop++
	}
	a.dp = append(a.dp, math.Exp(a.lt[next])-math.Exp(lr[next]))
	a.nllRef = append(a.nllRef, -lr[next])
	a.nllTst = append(a.nllTst, -a.lt[next])
}

// AddHidden adds the hidden states after block layer (any number of positions, flattened) to the
// per-layer SNR sums.
func (a *Accumulator) AddHidden(layer int, ref, test []float32) {
	a.layers[layer].add(ref, test)
}

// KLValues returns the per-position KL divergences (not a copy).
func (a *Accumulator) KLValues() []float64 { return a.kl }

// Summary turns the sums into the report's metric sections.
func (a *Accumulator) Summary() Metrics {
	var m Metrics
	n := len(a.kl)
	m.TokensScored = n
	if a.haveLogits && n > 0 {
		m.Logits = newLogitsSNR(a.logits.snr(), a.logits.psnr(), "")
	} else {
		nan := Decibels(math.NaN())
		m.Logits = LogitsSNR{SNR: nan, PSNR: nan,
			Note: "no reference logits: the stored reference holds only log-probabilities (a llama.cpp file)"}
	}
	for i := range a.layers {
		m.Layers = append(m.Layers, newLayerSNR(i, a.layers[i].snr()))
	}
	sorted := sortedCopy(a.kl)
	mean, err := MeanErr(a.kl)
	m.KL = KLStats{
		Mean: mean, MeanErr: err, Median: Median(sorted),
		P90: Percentile(sorted, 0.90), P99: Percentile(sorted, 0.99), P999: Percentile(sorted, 0.999),
	}
	if n > 0 {
		m.KL.Min, m.KL.Max = sorted[0], sorted[n-1]
		m.Top1 = float64(a.sameTop) / float64(n)
		m.Top1Err = BinomialErr(m.Top1, n)
	}
	dpMean, dpErr := MeanErr(a.dp)
	m.DeltaP = DeltaP{Mean: dpMean, MeanErr: dpErr, RMS: RMS(a.dp)}
	ref, _ := MeanErr(a.nllRef)
	tst, _ := MeanErr(a.nllTst)
	m.PPL = PPL{Ref: math.Exp(ref), Test: math.Exp(tst), Ratio: math.Exp(tst - ref)}
	return m
}
