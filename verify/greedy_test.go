package verify

import (
	"slices"
	"testing"
)

// greedyAlone is the greedy continuation of one prompt through Model.Eval, one token a call:
// the reference of TestGreedyTogether.
func greedyAlone(t *testing.T, m Model, prompt []int, n int) []int {
	t.Helper()
	m.Begin(len(prompt) + n)
	logits, _, err := m.Eval(prompt, false, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for {
		next := Argmax(logits)
		out = append(out, next)
		if m.Tokenizer().IsEOS(next) || len(out) == n {
			return out
		}
		if logits, _, err = m.Eval([]int{next}, false, false); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGreedyTogether: the reference's continuations, decoded together, are each prompt's
// continuation decoded alone, in one model call a prompt and one a step; the test model's
// first divergences are those of its continuations decoded alone.
func TestGreedyTogether(t *testing.T) {
	ref := &fakeModel{path: "ref", vocab: 64, nl: 1, h: 1}
	test := &fakeModel{path: "test", vocab: 64, nl: 1, h: 1, noise: 0.8}
	prompts := []string{"Once upon a time", "a", "The little dog ran to the park and", "Lily"}
	const gen = 12
	d, err := ReferenceGreedy(ref, prompts, gen)
	if err != nil {
		t.Fatal(err)
	}
	longest, together := 0, 0 // the longest continuation; steps with several sequences
	for _, p := range d.Prompts {
		longest = max(longest, len(p.Continuation))
	}
	for k := 2; k <= longest; k++ {
		if n := len(slices.DeleteFunc(slices.Clone(d.Prompts), func(p GreedyPrompt) bool { return len(p.Continuation) < k })); n > 1 {
			together++
		}
	}
	if calls := len(prompts) + longest - 1; ref.steps != calls || together == 0 {
		t.Errorf("%d model calls for %d prompts and continuations of up to %d tokens, want %d (%d steps of several)", ref.steps, len(prompts), longest, calls, together)
	}
	stopped := 0
	for i, p := range d.Prompts {
		want := greedyAlone(t, ref, p.Tokens, gen)
		if !slices.Equal(p.Continuation, want) {
			t.Errorf("prompt %d: together %v, alone %v", i, p.Continuation, want)
		}
		if len(want) < gen {
			stopped++
		}
	}
	g, err := CompareGreedy(test, d)
	if err != nil {
		t.Fatal(err)
	}
	diverged := 0
	for i, p := range d.Prompts {
		want := FirstDivergence(p.Continuation, greedyAlone(t, test, p.Tokens, len(p.Continuation)))
		got := -1
		if g.FirstDivergence[i] != nil {
			got = *g.FirstDivergence[i]
			diverged++
		}
		if got != want {
			t.Errorf("prompt %d: first divergence %d, alone %d", i, got, want)
		}
	}
	if diverged == 0 || diverged == len(prompts) {
		t.Errorf("%d of %d test continuations diverge: the test should see both kinds", diverged, len(prompts))
	}
	t.Logf("%d reference continuations stopped early (longest %d), %d test ones diverged", stopped, longest, diverged)
}
