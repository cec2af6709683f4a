package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Sampler chooses the next token from logits.
type Sampler struct {
	// Temperature divides the logits before the softmax; 0 (or less) picks the argmax
	// (greedy, ties to the lowest id).
	Temperature float64
	// TopK keeps the K most likely tokens (0: all).
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability reaches P (0 or 1:
	// all).
	TopP float64
	// Seed seeds the random draws; the same seed gives the same tokens.
	Seed uint64
	// IgnoreEOS keeps generating after an end-of-sequence token (or BOS) instead of stopping.
	IgnoreEOS bool
}

// Generate evaluates prompt, then produces up to n tokens, calling emit with each one; it
// stops early when emit returns false or, unless sample.IgnoreEOS, when the model produces an
// end-of-sequence token or BOS (which TinyStories-style models use between stories); that
// token is not emitted. A prompt and n that do not fit the model's context length (every
// emitted token takes a position) are refused before anything is evaluated.
func (m *Model) Generate(prompt []int, n int, sample Sampler, emit func(id int) bool) error {
	if len(prompt) == 0 {
		return fmt.Errorf("%s: Generate: empty prompt", m.path)
	}
	if n <= 0 {
		return nil
	}
	// Every emitted token takes a position, the last one included (it is not evaluated).
	if len(prompt) > m.spec.Context {
		return fmt.Errorf("%s: prompt of %d tokens exceeds the model's context length %d", m.path, len(prompt), m.spec.Context)
	}
	if n > m.spec.Context-len(prompt) {
		return fmt.Errorf("%s: prompt of %d tokens and %d new tokens exceed the model's context length %d (at most %d new tokens fit)",
			m.path, len(prompt), n, m.spec.Context, m.spec.Context-len(prompt))
	}
	st := m.NewState(len(prompt) + n)
	logits, err := m.Eval(st, prompt, false)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(sample.Seed, sample.Seed^0x9e3779b97f4a7c15))
	for i := 0; i < n; i++ {
		id := sample.Pick(logits, rng)
		if !sample.IgnoreEOS && m.tok != nil && (m.tok.IsEOS(id) || id == m.tok.BOS()) {
			return nil
		}
		if !emit(id) || i == n-1 {
			return nil
		}
		if logits, err = m.Eval(st, []int{id}, false); err != nil {
			return err
		}
	}
	return nil
}

// Pick chooses a token from one position's logits; rng is used only when sampling
// (Temperature > 0).
func (s Sampler) Pick(logits []float32, rng *rand.Rand) int {
	if s.Temperature <= 0 || rng == nil {
		return Argmax(logits)
	}
	type cand struct {
		id int
		p  float64
	}
	cs := make([]cand, len(logits))
	mx := math.Inf(-1)
	for i, v := range logits {
		mx = math.Max(mx, float64(v))
		cs[i] = cand{i, float64(v)}
	}
	var sum float64
	for i := range cs {
		cs[i].p = math.Exp((cs[i].p - mx) / s.Temperature)
		sum += cs[i].p
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].p > cs[b].p })
	keep := len(cs)
	if s.TopK > 0 && s.TopK < keep {
		keep = s.TopK
	}
	if s.TopP > 0 && s.TopP < 1 {
		acc := 0.0
		for i := 0; i < keep; i++ {
			acc += cs[i].p / sum
			if acc >= s.TopP {
				keep = i + 1
				break
			}
		}
	}
	total := 0.0
	for _, c := range cs[:keep] {
		total += c.p
	}
	r := rng.Float64() * total
	for _, c := range cs[:keep] {
		if r -= c.p; r < 0 {
			return c.id
		}
	}
	return cs[keep-1].id
}

// Argmax returns the index of the largest value (the lowest index among equals).
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
