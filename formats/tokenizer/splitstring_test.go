package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
)

// The Split pre-tokenizer with a String pattern gives HF tokenizers' pieces: the expected
// values of NormalizedString::split's own test ("The-final--countdown" split on "-", in
// tokenizers/src/tokenizer/normalizer.rs), the inverted forms worked out from
// find_matches with the match flags flipped, and Gemma's split on " ".
func TestSplitString(t *testing.T) {
	cases := []struct {
		s, delim string
		behavior splitBehavior
		invert   bool
		want     []string
	}{
		{"The-final--countdown", "-", behaviorRemoved, false, []string{"The", "final", "countdown"}},
		{"The-final--countdown", "-", behaviorIsolated, false, []string{"The", "-", "final", "-", "-", "countdown"}},
		{"The-final--countdown", "-", behaviorMergedWithPrevious, false, []string{"The-", "final-", "-", "countdown"}},
		{"The-final--countdown", "-", behaviorMergedWithNext, false, []string{"The", "-final", "-", "-countdown"}},
		{"The-final--countdown", "-", behaviorContiguous, false, []string{"The", "-", "final", "--", "countdown"}},
		{"The-final--countdown", "-", behaviorRemoved, true, []string{"-", "-", "-"}},
		{"The-final--countdown", "-", behaviorMergedWithPrevious, true, []string{"The", "-final", "-", "-countdown"}},
		{"-a-", "-", behaviorMergedWithPrevious, false, []string{"-", "a-"}},
		{"-a-", "-", behaviorMergedWithNext, false, []string{"-a", "-"}},
		{"ab", "", behaviorIsolated, false, []string{"ab"}},
		{"aaaa", "aa", behaviorIsolated, false, []string{"aa", "aa"}},
		{"Hello▁world", " ", behaviorMergedWithPrevious, false, []string{"Hello▁world"}},
		{"Hello world  x", " ", behaviorMergedWithPrevious, false, []string{"Hello ", "world ", " ", "x"}},
		{"", " ", behaviorIsolated, false, nil},
	}
	for _, c := range cases {
		got := splitString(c.s, c.delim, c.behavior, c.invert, nil)
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("split %q on %q (%d, invert %v) = %q, want %q", c.s, c.delim, c.behavior, c.invert, got, c.want)
		}
	}
	// An unknown behavior is refused by name.
	_, err := parsePreTokenizer(json.RawMessage(`{"type":"Split","pattern":{"String":" "},"behavior":"Sideways","invert":false}`), nil)
	if err == nil || !strings.Contains(err.Error(), `"Sideways"`) {
		t.Errorf("unknown behavior: %v", err)
	}
}
