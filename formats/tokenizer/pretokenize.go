package tokenizer

import (
	"slices"
	"strings"
)

// preStep is one step of a pre-tokenizer (HF pre_tokenizers: Split with a
// known pattern, Split on a literal string, ByteLevel, Metaspace).
type preStep struct {
	kind preKind
	// Split: the pattern.
	split splitKind
	// Split on a string (preSplitString): the string, what becomes of each
	// occurrence, and whether the pieces between occurrences are what is
	// matched instead (invert).
	delim    string
	behavior splitBehavior
	invert   bool
	// ByteLevel: split with GPT-2's pattern first; prepend a space.
	useRegex, addPrefixSpace bool
	// Metaspace: the replacement ("▁"), when to prepend it, whether to split.
	replacement string
	prepend     prependScheme
	splitMeta   bool
}

type preKind int

const (
	preSplit preKind = iota + 1
	preByteLevel
	preMetaspace
	preSplitString
)

// splitBehavior is HF's SplitDelimiterBehavior: what a Split does with the
// text it matches.
type splitBehavior int

const (
	behaviorRemoved            splitBehavior = iota + 1 // drop it
	behaviorIsolated                                    // a piece of its own
	behaviorMergedWithPrevious                          // joined to the piece before
	behaviorMergedWithNext                              // joined to the piece after
	behaviorContiguous                                  // consecutive matches form one piece
)

// splitBehaviors maps tokenizer.json's behavior names.
var splitBehaviors = map[string]splitBehavior{
	"Removed": behaviorRemoved, "Isolated": behaviorIsolated, "MergedWithPrevious": behaviorMergedWithPrevious,
	"MergedWithNext": behaviorMergedWithNext, "Contiguous": behaviorContiguous,
}

// prependScheme is Metaspace's prepend_scheme.
type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// preTokenize cuts one normalized piece into the words that the model
// encodes. first is true when the piece starts at offset 0 of the input
// (Metaspace's prepend_scheme "first"). glued says that s continues a piece
// whose head was pre-tokenized already (Encoder): until a step splits s from
// that head, its first piece is no piece of its own, so nothing is prepended to
// it (ByteLevel's prefix space, Metaspace's replacement).
func preTokenize(steps []preStep, s string, first, glued bool, out []string) []string {
	if len(steps) == 0 {
		return append(out, s)
	}
	pieces := []string{s}
	for _, st := range steps {
		var next []string
		n0 := 0 // pieces made from pieces[0]
		for k, p := range pieces {
			head := glued && k == 0
			switch st.kind {
			case preSplit:
				next = splitPieces(st.split, p, next)
			case preSplitString:
				next = splitString(p, st.delim, st.behavior, st.invert, next)
			case preByteLevel:
				if st.addPrefixSpace && !head && !strings.HasPrefix(p, " ") {
					p = " " + p
				}
				if st.useRegex {
					start := len(next)
					next = splitPieces(splitGPT2, p, next)
					for i := start; i < len(next); i++ {
						next[i] = byteLevelEncode(next[i])
					}
				} else if p != "" {
					next = append(next, byteLevelEncode(p))
				}
			case preMetaspace:
				p = strings.ReplaceAll(p, " ", st.replacement)
				if !head && !strings.HasPrefix(p, st.replacement) &&
					(st.prepend == prependAlways || (st.prepend == prependFirst && first && k == 0)) {
					p = st.replacement + p
				}
				if st.splitMeta {
					next = splitMergedWithNext(p, st.replacement, next)
				} else if p != "" {
					next = append(next, p)
				}
			}
			if k == 0 {
				n0 = len(next)
			}
		}
		// Does this step cut the first piece from the head it continues? The
		// regular expressions do at the Encoder's cuts (a newline followed by a
		// non-space); Metaspace's split does before a replacement.
		if glued {
			switch {
			case n0 == 0, st.kind == preSplit, st.kind == preByteLevel && st.useRegex,
				st.kind == preMetaspace && st.splitMeta && strings.HasPrefix(next[0], st.replacement):
				glued = false
			}
		}
		pieces = next
	}
	return append(out, pieces...)
}

// splitMergedWithNext splits s before every occurrence of delim (HF's
// SplitDelimiterBehavior::MergedWithNext).
func splitMergedWithNext(s, delim string, out []string) []string {
	start := 0
	for i := 0; i < len(s); {
		if i > start && strings.HasPrefix(s[i:], delim) {
			out = append(out, s[start:i])
			start = i
		}
		if strings.HasPrefix(s[i:], delim) {
			i += len(delim)
		} else {
			i++
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// splitString cuts s at the occurrences of delim (leftmost, not overlapping)
// as HF's Split pre-tokenizer with a String pattern does
// (NormalizedString::split): the occurrences and the text between them are
// pieces, merged or dropped as behavior says; with invert the text between
// occurrences counts as the match. Empty pieces are dropped, as
// PreTokenizedString::split does.
func splitString(s, delim string, behavior splitBehavior, invert bool, out []string) []string {
	if s == "" {
		return out
	}
	type part struct {
		start, end int
		match      bool
	}
	// The matches and the gaps between them, in order (HF's find_matches).
	var parts []part
	if delim == "" {
		parts = append(parts, part{0, len(s), false})
	} else {
		prev := 0
		for i := 0; i <= len(s)-len(delim); {
			k := strings.Index(s[i:], delim)
			if k < 0 {
				break
			}
			at := i + k
			if at > prev {
				parts = append(parts, part{prev, at, false})
			}
			parts = append(parts, part{at, at + len(delim), true})
			prev = at + len(delim)
			i = prev
		}
		if prev < len(s) {
			parts = append(parts, part{prev, len(s), false})
		}
	}
	if invert {
		for i := range parts {
			parts[i].match = !parts[i].match
		}
	}
	// Fold the parts into pieces; remove marks a piece that is dropped.
	type piece struct {
		start, end int
		remove     bool
	}
	var pieces []piece
	prevMatch := false
	switch behavior {
	case behaviorRemoved, behaviorIsolated:
		for _, p := range parts {
			pieces = append(pieces, piece{p.start, p.end, p.match && behavior == behaviorRemoved})
		}
	case behaviorContiguous:
		for _, p := range parts {
			if n := len(pieces); p.match == prevMatch && n > 0 {
				pieces[n-1].end = p.end
			} else {
				pieces = append(pieces, piece{p.start, p.end, false})
			}
			prevMatch = p.match
		}
	case behaviorMergedWithPrevious:
		for _, p := range parts {
			if n := len(pieces); p.match && !prevMatch && n > 0 {
				pieces[n-1].end = p.end
			} else {
				pieces = append(pieces, piece{p.start, p.end, false})
			}
			prevMatch = p.match
		}
	case behaviorMergedWithNext:
		for i := len(parts) - 1; i >= 0; i-- {
			p := parts[i]
			if n := len(pieces); p.match && !prevMatch && n > 0 {
				pieces[n-1].start = p.start
			} else {
				pieces = append(pieces, piece{p.start, p.end, false})
			}
			prevMatch = p.match
		}
		slices.Reverse(pieces)
	}
	for _, p := range pieces {
		if !p.remove && p.end > p.start {
			out = append(out, s[p.start:p.end])
		}
	}
	return out
}
