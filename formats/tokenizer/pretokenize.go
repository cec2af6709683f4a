package tokenizer

import "strings"

// preStep is one step of a pre-tokenizer (HF pre_tokenizers: Split with a
// known pattern, ByteLevel, Metaspace).
type preStep struct {
	kind preKind
	// Split: the pattern.
	split splitKind
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
)

// prependScheme is Metaspace's prepend_scheme.
type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// preTokenize cuts one normalized piece into the words that the model
// encodes. first is true when the piece starts at offset 0 of the input
// (Metaspace's prepend_scheme "first").
func preTokenize(steps []preStep, s string, first bool, out []string) []string {
	if len(steps) == 0 {
		return append(out, s)
	}
	pieces := []string{s}
	for _, st := range steps {
		var next []string
		for k, p := range pieces {
			switch st.kind {
			case preSplit:
				next = splitPieces(st.split, p, next)
			case preByteLevel:
				if st.addPrefixSpace && !strings.HasPrefix(p, " ") {
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
				if !strings.HasPrefix(p, st.replacement) &&
					(st.prepend == prependAlways || (st.prepend == prependFirst && first && k == 0)) {
					p = st.replacement + p
				}
				if st.splitMeta {
					next = splitMergedWithNext(p, st.replacement, next)
				} else if p != "" {
					next = append(next, p)
				}
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
