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
