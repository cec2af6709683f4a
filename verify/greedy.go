package verify

import "fmt"

// greedyAll generates up to n tokens greedily (argmax, first on ties) after each of prompts,
// stopping after an end-of-sequence token; with want, continuation i is of at most
// len(want[i]) tokens and stops at the first token that differs from want[i] (that token
// included). The prompts are evaluated one by one, then their continuations decode
// together: one Model.EvalSeqs a step for those still going, which reads the weights once for
// all of them.
func greedyAll(m Model, prompts [][]int, n int, want [][]int) ([][]int, error) {
	limit := func(i int) int {
		if want != nil {
			return len(want[i])
		}
		return n
	}
	longest := 0
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("%s: greedy: prompt %d is empty", m.Path(), i+1)
		}
		longest = max(longest, len(p)+limit(i))
	}
	out := make([][]int, len(prompts))
	m.BeginSeqs(len(prompts), longest)
	tok := m.Tokenizer()
	var live, next []int // the sequences still going, and their new tokens
	for i, p := range prompts {
		if limit(i) <= 0 {
			continue
		}
		logits, err := m.EvalSeq(i, p)
		if err != nil {
			return nil, err
		}
		live, next = append(live, i), append(next, Argmax(logits))
	}
	V := m.Vocab()
	for len(live) > 0 {
		// Record the new tokens; the sequences that go on feed theirs back.
		k := 0
		for r, i := range live {
			t := next[r]
			out[i] = append(out[i], t)
			if want != nil && want[i][len(out[i])-1] != t || tok.IsEOS(t) || len(out[i]) == limit(i) {
				continue
			}
			live[k], next[k] = i, t
			k++
		}
		live, next = live[:k], next[:k]
		if k == 0 {
			break
		}
		logits, err := m.EvalSeqs(live, next)
		if err != nil {
			return nil, err
		}
		for r := range live {
			next[r] = Argmax(logits[r*V : (r+1)*V])
		}
	}
	return out, nil
}

// FirstDivergence returns the first index where got differs from want, or −1 when got
// reproduces want exactly (same length, same tokens).
func FirstDivergence(want, got []int) int {
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			return i
		}
	}
	if len(got) > len(want) {
		return len(want)
	}
	return -1
}

// CompareGreedy runs the test model's greedy continuations against the reference's and summarises.
func CompareGreedy(test Model, ref *GreedyRefData) (*Greedy, error) {
	g := &Greedy{Prompts: len(ref.Prompts), Gen: ref.Gen, FirstDivergence: make([]*int, len(ref.Prompts))}
	prompts, want := make([][]int, len(ref.Prompts)), make([][]int, len(ref.Prompts))
	for i, p := range ref.Prompts {
		prompts[i], want[i] = p.Tokens, p.Continuation
	}
	got, err := greedyAll(test, prompts, 0, want)
	if err != nil {
		return nil, err
	}
	for i, p := range ref.Prompts {
		g.RefLength = append(g.RefLength, len(p.Continuation))
		if d := FirstDivergence(p.Continuation, got[i]); d >= 0 {
			g.FirstDivergence[i] = &d
		} else {
			g.Exact++
		}
	}
	return g, nil
}

// ReferenceGreedy tokenizes prompts with the reference's tokenizer (BOS added as the tokenizer
// does) and generates its greedy continuations of gen tokens. A prompt whose tokens and the gen
// new ones do not fit the reference's context is refused (its error names the prompt's number).
func ReferenceGreedy(ref Model, prompts []string, gen int) (*GreedyRefData, error) {
	d := &GreedyRefData{Gen: gen}
	var ids [][]int
	for i, text := range prompts {
		p := ref.Tokenizer().Encode(text, true)
		if len(p) == 0 {
			return nil, fmt.Errorf("prompt %q: no tokens", text)
		}
		if len(p)+gen > ref.Context() {
			return nil, fmt.Errorf("prompt %d: %d tokens and --gen %d exceed the context length %d of %s", i+1, len(p), gen, ref.Context(), ref.Path())
		}
		ids = append(ids, p)
	}
	conts, err := greedyAll(ref, ids, gen, nil)
	if err != nil {
		return nil, err
	}
	for i, text := range prompts {
		d.Prompts = append(d.Prompts, GreedyPrompt{Text: text, Tokens: ids[i], Continuation: conts[i]})
	}
	return d, nil
}
