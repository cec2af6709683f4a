package verify

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gquant/gquant/runtime/kernels"
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
	var d energy
	d.sums(ref, test)
	e.merge(d)
}

// sums sets e to the sums of ref against test alone.
func (e *energy) sums(ref, test []float32) {
	test = test[:len(ref)]
	var sig, noise, peak float64
	for i, r := range ref {
		rf := float64(r)
		d := rf - float64(test[i])
		sig += rf * rf
		noise += d * d
		peak = max(peak, math.Abs(rf))
	}
	*e = energy{signal: sig, noise: noise, peak: peak, n: len(ref)}
}

// merge adds the sums of d to e.
func (e *energy) merge(d energy) {
	e.signal += d.signal
	e.noise += d.noise
	e.peak = max(e.peak, d.peak)
	e.n += d.n
}

func (e *energy) snr() float64  { return SNRdB(e.signal, e.noise) }
func (e *energy) psnr() float64 { return PSNRdB(e.peak, e.noise, e.n) }

// Accumulator gathers the per-position metrics of one comparison. Add a scored position with
// AddLive (both models' logits) or AddCached (a stored reference row and the test logits), or
// a window's positions at once, their metrics computed in parallel, with AddLiveRows or
// AddCachedRows.
type Accumulator struct {
	vocab          int
	kl, dp         []float64 // per position
	nllRef, nllTst []float64 // per position
	sameTop        int
	logits         energy
	haveLogits     bool // every position brought reference logits
	layers         []energy
	pos            []posStats  // scratch of the Rows methods
	scratch        [][]float32 // a vocabulary row per goroutine of the Rows methods
}

// NewAccumulator returns an Accumulator for a vocabulary of the given size and n hidden layers
// (0 when no per-layer SNR is wanted).
func NewAccumulator(vocab, layers int) *Accumulator {
	return &Accumulator{vocab: vocab, haveLogits: true, layers: make([]energy, layers)}
}

// posStats is what one scored position adds to an Accumulator, computed on its own (so that
// the positions of a window can be computed in parallel) and added in order.
type posStats struct {
	kl, dp, nllRef, nllTst float64
	sameTop                bool
	logits                 energy
	noLogits               bool // no reference logits (AddCached without them)
}

// AddLive adds one scored position from the reference's and the test's logits; next is the token
// that follows in the corpus. KL is computed exactly, in float64 over the whole vocabulary.
func (a *Accumulator) AddLive(ref, test []float32, next int) {
	a.addPos(liveStats(ref, test, next))
}

// AddLiveRows adds len(next) scored positions, row j of ref and test (Vocab logits each) and
// next[j] being AddLive's arguments for position j, computing them on up to workers
// goroutines. The result is the same whatever workers is.
func (a *Accumulator) AddLiveRows(ref, test []float32, next []int, workers int) {
	V := a.vocab
	a.rows(len(next), workers, func(j int, _ []float32) posStats {
		return liveStats(ref[j*V:(j+1)*V], test[j*V:(j+1)*V], next[j])
	})
}

// liveStats computes a position's metrics from both models' logits x (ref) and y (test), in
// two passes over the vocabulary: the maxima, top-1s and SNR sums; then the sums of the
// exponentials, in float64 (kernels.ExpSums), and with them KL(p‖q) = Σ p_i·(x_i − y_i) + lse(y) − lse(x)
// (p = softmax(x), q = softmax(y), lse = log Σ exp: log p_i − log q_i = x_i − y_i − lse(x) +
// lse(y), and Σ p_i = 1), the terms with p_i = 0 left out. The log-probabilities of next are
// LogSoftmax's.
func liveStats(ref, test []float32, next int) posStats {
	test = test[:len(ref)]
	var ps posStats
	mr, ir := ref[0], 0
	mt, it := test[0], 0
	var sig, noise, peak float64 // energy.sums
	for i, r := range ref {
		t := test[i]
		if r > mr {
			mr, ir = r, i
		}
		if t > mt {
			mt, it = t, i
		}
		x := float64(r)
		d := x - float64(t)
		sig += x * x
		noise += d * d
		peak = max(peak, math.Abs(x))
	}
	ps.logits = energy{signal: sig, noise: noise, peak: peak, n: len(ref)}
	var lx, ly float64
	ps.kl, lx, ly = softmaxKL(ref, test, float64(mr), float64(mt))
	ps.sameTop = ir == it
	lp, lq := float64(ref[next])-lx, float64(test[next])-ly
	ps.dp = math.Exp(lq) - math.Exp(lp)
	ps.nllRef, ps.nllTst = -lp, -lq
	return ps
}

// softmaxKL returns KL(softmax(x) ‖ softmax(y)) = w/sx + lse(y) − lse(x) and the log-sum-exps
// lse(x), lse(y), from the rows' maxima mx, my and kernels.ExpSums' sums (liveStats has the
// derivation); NaN when a logit is.
func softmaxKL(x, y []float32, mx, my float64) (kl, lx, ly float64) {
	sx, sy, w := kernels.ExpSums(x, y, mx, my)
	lx, ly = mx+math.Log(sx), my+math.Log(sy)
	return w/sx + (ly - lx), lx, ly
}

// AddCached adds one scored position from a stored reference row (llama-perplexity's uint16
// log-probabilities) and the test's logits, with llama-perplexity's rules: the reference
// log-probabilities are dequantized in float32 and KL sums only the terms above −16 nats.
// refLogits (the gquant trailer's fp16 logits, widened) may be nil; then no logits SNR is
// available for the whole comparison, and a next token below the row's floor counts with the
// floor's log-probability in the reference's perplexity (llama.cpp's bias).
func (a *Accumulator) AddCached(row RefRow, refLogits, test []float32, next int) {
	if len(a.scratch) == 0 {
		a.scratch = append(a.scratch, make([]float32, a.vocab))
	}
	a.addPos(cachedStats(row, refLogits, test, next, a.scratch[0]))
}

// AddCachedRows adds len(next) scored positions, rows[j], row j of refLogits (nil: none) and
// of test (Vocab values each) and next[j] being AddCached's arguments for position j,
// computing them on up to workers goroutines. The result is the same whatever workers is.
func (a *Accumulator) AddCachedRows(rows []RefRow, refLogits, test []float32, next []int, workers int) {
	V := a.vocab
	a.rows(len(next), workers, func(j int, lp []float32) posStats {
		var r []float32
		if refLogits != nil {
			r = refLogits[j*V : (j+1)*V]
		}
		return cachedStats(rows[j], r, test[j*V:(j+1)*V], next[j], lp)
	})
}

// cachedStats computes AddCached's metrics of one position; lp is scratch of the vocabulary's
// size. The row's log-probabilities lp_i above −16 (RefRow.LogProbs' float32 values; −∞
// for the others) go through kernels.ExpSums with the test's logits y, which gives
// s = Σ e^lp_i, the test's Σ e^(y_i − max y) and w = Σ e^lp_i·(lp_i − y_i): then
// KL = Σ e^lp_i·(lp_i − (y_i − lse(y))) = w + lse(y)·s.
func cachedStats(row RefRow, refLogits, test []float32, next int, lp []float32) posStats {
	var ps posStats
	if refLogits == nil {
		ps.noLogits = true
	} else {
		ps.logits.sums(refLogits, test)
	}
	scale, mn := row.Scale(), row.MinLogProb()
	q := row[4 : 4+len(test)]
	lp = lp[:len(q)]
	top, best := 0, float32(math.Inf(-1))
	mt, it := test[0], 0
	// The codes below c0 have log-probabilities at or below −16 (they grow with the code when
	// scale ≥ 0; a row with another scale is compared entry by entry): their lp is −∞, set
	// without a branch (the comparison would be a coin toss for the branch predictor).
	lpOf := func(c uint16) float32 { return float32(scale*float32(c)) + mn } // RefRow.LogProbs
	c0, monotone := 0, scale >= 0
	if monotone {
		c0 = sort.Search(1<<16, func(c int) bool { return float64(lpOf(uint16(c))) > -16 })
	}
	for i, c := range q {
		v := lpOf(c)
		if v > best || i == 0 {
			top, best = i, v
		}
		m := uint32((int32(c) - int32(c0)) >> 31) // all ones below c0
		if !monotone {
			m = 0
			if !(float64(v) > -16) {
				m = ^uint32(0)
			}
		}
		lp[i] = math.Float32frombits(math.Float32bits(v)&^m | 0xff800000&m)
		if y := test[i]; y > mt {
			mt, it = y, i
		}
	}
	s, sy, w := kernels.ExpSums(lp, test, 0, float64(mt))
	ly := float64(mt) + math.Log(sy) // NaN when a logit is
	ps.kl = w + ly*s
	ps.sameTop = top == it
	lr := float64(float32(scale*float32(q[next])) + mn)
	if refLogits != nil && q[next] == 0 {
		// The next token lies at or below the row's floor (16 nats under the top), where the
		// row keeps no value: take its log-probability from the stored logits instead, so
		// that the reference's perplexity is not biased low as llama.cpp's PPL(base) is.
		lr = logSoftmaxAt(refLogits, next)
	}
	lq := float64(test[next]) - ly
	ps.dp = math.Exp(lq) - math.Exp(lr)
	ps.nllRef, ps.nllTst = -lr, -lq
	return ps
}

// logSumExp returns log Σ exp(x_i) = max + log Σ exp(x_i − max) in float64 (kernels.ExpSum;
// NaN when x holds a NaN).
func logSumExp(x []float32) float64 {
	m := x[0]
	for _, v := range x {
		m = max(m, v) // NaN if any is
	}
	mf := float64(m)
	return mf + math.Log(kernels.ExpSum(x, mf))
}

// logSoftmaxAt returns the log-probability of entry i of logits, in float64.
func logSoftmaxAt(logits []float32, i int) float64 {
	return float64(logits[i]) - logSumExp(logits)
}

// rows computes n positions' metrics with f on up to workers goroutines, then adds them in
// order; f gets the position and a scratch row of the vocabulary's size, its goroutine's own.
func (a *Accumulator) rows(n, workers int, f func(j int, scratch []float32) posStats) {
	if cap(a.pos) < n {
		a.pos = make([]posStats, n)
	}
	ps := a.pos[:n]
	workers = max(1, min(workers, n))
	for len(a.scratch) < workers {
		a.scratch = append(a.scratch, make([]float32, a.vocab))
	}
	var next atomic.Int64
	run := func(w int) {
		for j := int(next.Add(1) - 1); j < n; j = int(next.Add(1) - 1) {
			ps[j] = f(j, a.scratch[w])
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { run(w) })
	}
	run(0)
	wg.Wait()
	for _, p := range ps {
		a.addPos(p)
	}
}

func (a *Accumulator) addPos(p posStats) {
	a.kl = append(a.kl, p.kl)
	if p.sameTop {
		a.sameTop++
	}
	a.dp = append(a.dp, p.dp)
	a.nllRef = append(a.nllRef, p.nllRef)
	a.nllTst = append(a.nllTst, p.nllTst)
	if p.noLogits {
		a.haveLogits = false
	} else {
		a.logits.merge(p.logits)
	}
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
