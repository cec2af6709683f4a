package verify

import "fmt"

// GreedyContinue generates up to n tokens greedily (argmax, first on ties) after prompt, stopping
// after an end-of-sequence token.
func GreedyContinue(m Model, prompt []int, n int) ([]int, error) {
	return greedyUntil(m, prompt, n, nil)
}

// greedyUntil generates like GreedyContinue; with want it stops at the first token that differs
// from want (that token included).
func greedyUntil(m Model, prompt []int, n int, want []int) ([]int, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("%s: greedy: empty prompt", m.Path())
	}
	m.Begin(len(prompt) + n)
	logits, _, err := m.Eval(prompt, false, false)
	if err != nil {
		return nil, err
	}
	tok := m.Tokenizer()
	var out []int
	for len(out) < n {
		next := Argmax(logits)
		out = append(out, next)
		if want != nil && (len(out) > len(want) || want[len(out)-1] != next) {
			break
		}
		if tok.IsEOS(next) || len(out) == n {
			break
		}
		if logits, _, err = m.Eval([]int{next}, false, false); err != nil {
			return nil, err
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
	for i, p := range ref.Prompts {
		got, err := greedyUntil(test, p.Tokens, len(p.Continuation), p.Continuation)
		if err != nil {
			return nil, err
		}
		g.RefLength = append(g.RefLength, len(p.Continuation))
		if d := FirstDivergence(p.Continuation, got); d >= 0 {
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
	for i, text := range prompts {
		ids := ref.Tokenizer().Encode(text, true)
		if len(ids) == 0 {
			return nil, fmt.Errorf("prompt %q: no tokens", text)
		}
		if len(ids)+gen > ref.Context() {
			return nil, fmt.Errorf("prompt %d: %d tokens and --gen %d exceed the context length %d of %s", i+1, len(ids), gen, ref.Context(), ref.Path())
		}
		cont, err := GreedyContinue(ref, ids, gen)
		if err != nil {
			return nil, err
		}
		d.Prompts = append(d.Prompts, GreedyPrompt{Text: text, Tokens: ids, Continuation: cont})
	}
	return d, nil
}
