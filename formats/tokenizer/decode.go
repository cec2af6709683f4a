package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// decodeOp is one step of a decoder (HF decoders: Replace, ByteFallback,
// Fuse, Strip, ByteLevel, Metaspace). Each step maps the list of token
// strings to a new list; the result is their concatenation.
type decodeOp struct {
	kind        decodeKind
	from, to    string // Replace
	content     rune   // Strip
	start, stop int    // Strip
	replacement rune   // Metaspace
	prepend     prependScheme
}

type decodeKind int

const (
	decReplace decodeKind = iota + 1
	decByteFallback
	decFuse
	decStrip
	decByteLevel
	decMetaspace
)

// Decode returns the text of ids, keeping special tokens (HF decode with
// skip_special_tokens=false). Unknown ids are skipped.
func (t *Tokenizer) Decode(ids []int) string { return t.decode(ids, false) }

// DecodeSkipSpecial returns the text of ids without the special tokens (HF
// decode with skip_special_tokens=true).
func (t *Tokenizer) DecodeSkipSpecial(ids []int) string { return t.decode(ids, true) }

func (t *Tokenizer) decode(ids []int, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if id < 0 || id >= len(t.tokens) || (skipSpecial && t.special[id]) {
			continue
		}
		toks = append(toks, t.tokens[id])
	}
	return strings.Join(runDecoders(t.decodeOps, toks), "")
}

// runDecoders applies the decoder steps in order.
func runDecoders(ops []decodeOp, toks []string) []string {
	for _, op := range ops {
		switch op.kind {
		case decReplace:
			for i, s := range toks {
				toks[i] = strings.ReplaceAll(s, op.from, op.to)
			}
		case decByteFallback:
			toks = byteFallback(toks)
		case decFuse:
			toks = []string{strings.Join(toks, "")}
		case decStrip:
			for i, s := range toks {
				toks[i] = stripRunes(s, op.content, op.start, op.stop)
			}
		case decByteLevel:
			var b []byte
			for _, s := range toks {
				b = byteLevelDecode(b, s)
			}
			toks = []string{lossyUTF8(b)}
		case decMetaspace:
			for i, s := range toks {
				var sb strings.Builder
				for _, r := range s {
					if r == op.replacement {
						if i == 0 && op.prepend != prependNever {
							continue
						}
						r = ' '
					}
					sb.WriteRune(r)
				}
				toks[i] = sb.String()
			}
		}
	}
	return toks
}

// byteToken parses "<0xXX>" (uppercase or lowercase hex).
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	hex := func(c byte) (byte, bool) {
		switch {
		case c >= '0' && c <= '9':
			return c - '0', true
		case c >= 'A' && c <= 'F':
			return c - 'A' + 10, true
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10, true
		}
		return 0, false
	}
	hi, ok1 := hex(s[3])
	lo, ok2 := hex(s[4])
	return hi<<4 | lo, ok1 && ok2
}

// byteFallback turns runs of byte tokens into text: valid UTF-8 as is,
// otherwise one U+FFFD per byte (HF's ByteFallback decoder).
func byteFallback(toks []string) []string {
	out := make([]string, 0, len(toks))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, s := range toks {
		if b, ok := byteToken(s); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, s)
	}
	flush()
	return out
}

// stripRunes removes up to start leading and stop trailing runes equal to c.
func stripRunes(s string, c rune, start, stop int) string {
	rs := []rune(s)
	lo := 0
	for lo < start && lo < len(rs) && rs[lo] == c {
		lo++
	}
	hi := len(rs)
	for k := 0; k < stop && hi > lo && rs[hi-1] == c; k++ {
		hi--
	}
	return string(rs[lo:hi])
}

// lossyUTF8 converts b to a string, replacing each maximal invalid
// subsequence with U+FFFD (Rust's String::from_utf8_lossy).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			sb.Write(b[:size])
			b = b[size:]
			continue
		}
		// invalid: skip the longest prefix of a valid sequence (at least 1 byte)
		sb.WriteRune(utf8.RuneError)
		b = b[invalidPrefixLen(b):]
	}
	return sb.String()
}

// invalidPrefixLen returns how many bytes of b (which starts an invalid
// sequence) form one maximal subpart of an ill-formed sequence (Unicode
// §3.9, U+FFFD substitution of maximal subparts).
func invalidPrefixLen(b []byte) int {
	c := b[0]
	var n int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 3
	case c == 0xED:
		n, hi = 3, 0x9F
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 1
	}
	k := 1
	for k < n && k < len(b) {
		l, h := byte(0x80), byte(0xBF)
		if k == 1 {
			l, h = lo, hi
		}
		if b[k] < l || b[k] > h {
			break
		}
		k++
	}
	return k
}

// TokenBytes returns the bytes that token id stands for, for streaming
// output: byte-level tokens map back to their bytes, SentencePiece ▁ becomes
// a space and <0xXX> its byte. Special tokens give their text. The leading
// space that a SentencePiece decoder strips is kept; see Stream.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.tokens) {
		return nil
	}
	s := t.tokens[id]
	if t.special[id] {
		return []byte(s)
	}
	if t.kind == ByteLevel {
		return byteLevelDecode(nil, s)
	}
	if b, ok := byteToken(s); ok && t.tokType[id] == TypeByte {
		return []byte{b}
	}
	return []byte(strings.ReplaceAll(s, "▁", " "))
}

// DecodeToken returns the text of one token for streaming (TokenBytes as a
// string; it may hold an incomplete UTF-8 sequence).
func (t *Tokenizer) DecodeToken(id int) string { return string(t.TokenBytes(id)) }

// Stream turns generated ids into text piece by piece: it holds back
// incomplete UTF-8 sequences and drops the leading space that the
// SentencePiece decoder strips at the start of the text.
type Stream struct {
	t       *Tokenizer
	pending []byte
	started bool
}

// NewStream returns a Stream for t.
func (t *Tokenizer) NewStream() *Stream { return &Stream{t: t} }

// Add appends a token and returns the text that is now complete.
func (s *Stream) Add(id int) string {
	b := s.t.TokenBytes(id)
	if !s.started && len(b) > 0 {
		s.started = true
		if s.t.stripsLeadingSpace() && b[0] == ' ' {
			b = b[1:]
		}
	}
	s.pending = append(s.pending, b...)
	// emit everything up to the last rune boundary that might still grow
	end := len(s.pending)
	for k := 1; k <= 3 && k <= len(s.pending); k++ {
		c := s.pending[len(s.pending)-k]
		if c&0xC0 == 0x80 {
			continue // continuation byte
		}
		if c >= 0xC0 && !utf8.FullRune(s.pending[len(s.pending)-k:]) {
			end = len(s.pending) - k
		}
		break
	}
	out := lossyUTF8(s.pending[:end])
	s.pending = append(s.pending[:0], s.pending[end:]...)
	return out
}

// Flush returns what is left (incomplete sequences become U+FFFD).
func (s *Stream) Flush() string {
	out := lossyUTF8(s.pending)
	s.pending = s.pending[:0]
	return out
}

// stripsLeadingSpace reports whether the decoder drops the first leading space.
func (t *Tokenizer) stripsLeadingSpace() bool {
	for _, op := range t.decodeOps {
		if (op.kind == decStrip && op.content == ' ' && op.start > 0) ||
			(op.kind == decMetaspace && op.prepend != prependNever) {
			return true
		}
	}
	return false
}
