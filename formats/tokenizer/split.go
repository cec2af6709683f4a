package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// splitKind names one of the pre-tokenizer regular expressions that are
// implemented by hand (Go's regexp has no look-ahead).
type splitKind int

const (
	// splitGPT2 is GPT-2's pattern, also ByteLevel's built-in one (use_regex):
	//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	splitGPT2 splitKind = iota + 1
	// splitLlama3 is Llama-3's pattern:
	//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	splitLlama3
	// splitQwen2 is Llama-3's pattern with single digits (\p{N} instead of
	// \p{N}{1,3}); Qwen2 and Qwen3 use it.
	splitQwen2
)

// The patterns exactly as tokenizer.json files spell them.
const (
	patternGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitKindOf recognises a Split pattern; 0 when it is not one of the known ones.
func splitKindOf(pattern string) splitKind {
	switch pattern {
	case patternGPT2:
		return splitGPT2
	case patternLlama3:
		return splitLlama3
	case patternQwen2:
		return splitQwen2
	}
	return 0
}

// Character classes of the patterns: \p{L} (general category L), \p{N}
// (Nd, Nl, No) and \s (the White_Space property, as Oniguruma's \s).
func isL(r rune) bool { return unicode.IsLetter(r) }
func isN(r rune) bool { return unicode.IsNumber(r) }
func isS(r rune) bool { return unicode.IsSpace(r) }

// isOther reports whether r is in [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }

// foldContraction lower-cases r for the (?i:...) contraction group: ASCII
// letters and U+017F LONG S, which case-folds to 's'.
func foldContraction(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + ('a' - 'A')
	}
	if r == 'ſ' {
		return 's'
	}
	return r
}

// contraction returns the length in runes (2 or 3) of a contraction starting
// at rs[i] ('s 't 're 've 'm 'll 'd), or 0.
func contraction(rs []rune, i int, fold bool) int {
	if rs[i] != '\'' || i+1 >= len(rs) {
		return 0
	}
	f := func(r rune) rune {
		if fold {
			return foldContraction(r)
		}
		return r
	}
	switch f(rs[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if i+2 < len(rs) {
		a, b := f(rs[i+1]), f(rs[i+2])
		if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
			return 3
		}
	}
	return 0
}

// whitespaceEnd returns the end of a whitespace match starting at rs[i] (a
// whitespace rune) for the alternatives \s+(?!\S)|\s+: the whole run at the
// end of the text, otherwise all but its last rune when that leaves one.
func whitespaceEnd(rs []rune, i int) int {
	k := i
	for k < len(rs) && isS(rs[k]) {
		k++
	}
	if k < len(rs) && k-i >= 2 {
		return k - 1
	}
	return k
}

// splitPieces cuts s into the matches of the pattern kind, appending them to out.
// Every rune of s ends up in exactly one piece (the patterns match any rune).
func splitPieces(kind splitKind, s string, out []string) []string {
	if s == "" {
		return out
	}
	rs := []rune(s)
	// offs[i] is the byte offset of rs[i] in s.
	offs := make([]int, len(rs)+1)
	o := 0
	for i, r := range rs {
		offs[i] = o
		if r == utf8.RuneError {
			// keep invalid bytes (not expected: input is valid UTF-8) aligned
			_, size := utf8.DecodeRuneInString(s[o:])
			o += size
		} else {
			o += utf8.RuneLen(r)
		}
	}
	offs[len(rs)] = len(s)
	for i := 0; i < len(rs); {
		var j int
		if kind == splitGPT2 {
			j = gpt2Match(rs, i)
		} else {
			j = llama3Match(rs, i, kind == splitQwen2)
		}
		out = append(out, s[offs[i]:offs[j]])
		i = j
	}
	return out
}

// gpt2Match returns the end of the GPT-2 pattern's match at rs[i].
func gpt2Match(rs []rune, i int) int {
	n := len(rs)
	if k := contraction(rs, i, false); k > 0 {
		return i + k
	}
	c := rs[i]
	for _, class := range [...]func(rune) bool{isL, isN, isOther} {
		// ` ?CLASS+`
		j := i
		if c == ' ' && i+1 < n && class(rs[i+1]) {
			j = i + 1
		}
		if class(rs[j]) {
			j++
			for j < n && class(rs[j]) {
				j++
			}
			return j
		}
	}
	return whitespaceEnd(rs, i)
}

// llama3Match returns the end of the Llama-3 pattern's match at rs[i]; with
// singleDigits, of the Qwen2 pattern's.
func llama3Match(rs []rune, i int, singleDigits bool) int {
	n := len(rs)
	if k := contraction(rs, i, true); k > 0 {
		return i + k
	}
	c := rs[i]
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isL(c) || (c != '\r' && c != '\n' && !isN(c) && i+1 < n && isL(rs[i+1])) {
		j := i + 1
		for j < n && isL(rs[j]) {
			j++
		}
		return j
	}
	// \p{N}{1,3} or \p{N}
	if isN(c) {
		maxDigits := 3
		if singleDigits {
			maxDigits = 1
		}
		j := i + 1
		for j < n && j-i < maxDigits && isN(rs[j]) {
			j++
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j := i
	if c == ' ' && i+1 < n && isOther(rs[i+1]) {
		j = i + 1
	}
	if isOther(rs[j]) {
		j++
		for j < n && isOther(rs[j]) {
			j++
		}
		for j < n && (rs[j] == '\r' || rs[j] == '\n') {
			j++
		}
		return j
	}
	// c is whitespace. \s*[\r\n]+ : up to the last \r or \n of the run.
	last := -1
	for k := i; k < n && isS(rs[k]); k++ {
		if rs[k] == '\r' || rs[k] == '\n' {
			last = k
		}
	}
	if last >= 0 {
		return last + 1
	}
	return whitespaceEnd(rs, i)
}
