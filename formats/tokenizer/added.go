package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedMatcher finds added tokens in text as HF's AddedVocabulary does: the
// leftmost match, the longest among those starting there, honouring the
// single_word, lstrip and rstrip flags.
type addedMatcher struct {
	byFirst map[byte][]*addedToken // candidates by first byte, longest first
	// lens[b] holds the distinct lengths of the candidates starting with byte
	// b, longest first, and byContent the first candidate of each content: a
	// lookup per length instead of a comparison per candidate (Gemma 3 has
	// 6,322 added tokens starting with "<").
	lens      map[byte][]int
	byContent map[string]*addedToken
}

func newAddedMatcher(toks []*addedToken) *addedMatcher {
	m := &addedMatcher{byFirst: map[byte][]*addedToken{}, lens: map[byte][]int{}, byContent: map[string]*addedToken{}}
	for _, t := range toks {
		if t.Content == "" {
			continue
		}
		m.byFirst[t.Content[0]] = append(m.byFirst[t.Content[0]], t)
		if _, dup := m.byContent[t.Content]; !dup {
			m.byContent[t.Content] = t
		}
	}
	for b, l := range m.byFirst {
		sort.SliceStable(l, func(i, j int) bool { return len(l[i].Content) > len(l[j].Content) })
		for _, t := range l {
			if n := len(m.lens[b]); n == 0 || m.lens[b][n-1] != len(t.Content) {
				m.lens[b] = append(m.lens[b], len(t.Content))
			}
		}
	}
	return m
}

// segment is a piece of the input: either an added token (tok != nil) or
// text, with the byte offset of its start in the text it was cut from.
type segment struct {
	text  string
	tok   *addedToken
	start int
}

// split cuts s into text and added-token segments (offsets relative to base).
func (m *addedMatcher) split(s string, base int, out []segment) []segment {
	if m == nil || len(m.byFirst) == 0 {
		return append(out, segment{text: s, start: base})
	}
	startOffset := 0 // end of the last accepted match (HF start_offset)
	for i := 0; i < len(s); {
		t := m.longestAt(s, i)
		if t == nil {
			i++
			continue
		}
		start, stop := i, i+len(t.Content)
		i = stop // the matcher resumes after the raw match, accepted or not
		if start < startOffset {
			continue
		}
		if t.SingleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if t.LStrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), startOffset)
		}
		if t.RStrip {
			stop += len(s[stop:]) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
		}
		if startOffset < start {
			out = append(out, segment{text: s[startOffset:start], start: base + startOffset})
		}
		out = append(out, segment{text: s[start:stop], tok: t, start: base + start})
		startOffset = stop
		if i < stop {
			i = stop
		}
	}
	if startOffset < len(s) {
		out = append(out, segment{text: s[startOffset:], start: base + startOffset})
	}
	return out
}

// longestAt returns the longest added token that s[i:] starts with (the first
// of the list among tokens of the same content).
func (m *addedMatcher) longestAt(s string, i int) *addedToken {
	for _, n := range m.lens[s[i]] {
		if i+n <= len(s) {
			if t, ok := m.byContent[s[i:i+n]]; ok {
				return t
			}
		}
	}
	return nil
}

// isWordChar is Rust's char::is_alphanumeric.
func isWordChar(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}
