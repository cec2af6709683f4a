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

// add_sep_token is what gguf-py's SpecialVocab derives from the post-processor (cases worked
// out by following vocab.py's _try_load_from_tokenizer_json; Gemma's and Llama 2's are also
// in testdata/golden/convert-spm.json, computed by that code).
func TestAddSepFromPostProcessor(t *testing.T) {
	tmpl := func(single, pair string) json.RawMessage {
		item := func(s string) string {
			if s == "A" || s == "B" {
				return `{"Sequence":{"id":"` + s + `","type_id":0}}`
			}
			return `{"SpecialToken":{"id":"` + s + `","type_id":0}}`
		}
		list := func(s string) string {
			var out []string
			for _, f := range strings.Fields(s) {
				out = append(out, item(f))
			}
			return "[" + strings.Join(out, ",") + "]"
		}
		return json.RawMessage(`{"type":"TemplateProcessing","single":` + list(single) + `,"pair":` + list(pair) + `}`)
	}
	cases := []struct {
		name     string
		pp       json.RawMessage
		sep, eos string
		want     string // "true", "false" or "" (nothing said)
	}{
		{"gemma", tmpl("<bos> A", "<bos> A <bos> B"), "", "<eos>", "false"},
		{"eos after each", tmpl("A </s>", "A </s> B </s>"), "", "</s>", "false"},
		{"roberta-like", tmpl("<s> A </s>", "<s> A </s> </s> B </s>"), "", "</s>", "true"},
		{"sep between", tmpl("<s> A", "<s> A [SEP] B"), "[SEP]", "</s>", "true"},
		{"no pair", tmpl("<s> A", ""), "", "</s>", ""},
		{"roberta", json.RawMessage(`{"type":"RobertaProcessing","sep":["</s>",2],"cls":["<s>",0]}`), "", "", "true"},
		{"sequence", json.RawMessage(`{"type":"Sequence","processors":[{"type":"ByteLevel"},` + string(tmpl("<s> A", "<s> A <s> B")) + `]}`), "", "", "false"},
		{"byte-level only", json.RawMessage(`{"type":"ByteLevel"}`), "", "", ""},
		{"null", nil, "", "", ""},
	}
	for _, c := range cases {
		got := addSepFromPostProcessor(c.pp, c.sep, c.eos)
		s := ""
		if got != nil {
			s = map[bool]string{true: "true", false: "false"}[*got]
		}
		if s != c.want {
			t.Errorf("%s: add_sep %q, want %q", c.name, s, c.want)
		}
	}
}
