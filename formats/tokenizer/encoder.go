package tokenizer

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// An Encoder tokenizes a text that arrives in parts, such as a file read in
// blocks: the ids of every Write and of Close, in order, are those of
// Encode(whole text, addSpecial). It keeps the text since the last place where
// the text can be cut without changing its tokens, and encodes up to such a
// cut once it holds encoderPiece bytes, so its memory follows the distance
// between cuts (a line, most often), not the length of the text.
//
// A cut is a newline followed by a character that is not white space, where no
// added token is written across it (or, for an lstrip token, right after it).
// There every stage of Encode gives for the whole text what it gives for the two
// parts, the second taken as the continuation of the first (no Prepend, no
// prefix space or Metaspace replacement prepended, not the input's start):
//
//   - added tokens (a matcher looks forward only; rstrip stops at the
//     non-space, lstrip does not reach back over the newline);
//   - normalizers: NFC (a newline never composes or reorders), Replace (no
//     pattern holds a newline, so none matches across it; no replacement starts
//     with white space);
//   - pre-tokenizers: the three regular expressions split after "\n" followed
//     by a non-space (GPT-2's only when the newline is the whole white-space
//     run, which encodePiece checks on the normalized text); with no splitting
//     pre-tokenizer (SentencePiece: Prepend/Replace or Metaspace) the newline
//     must be a barrier for the BPE model: no merge involves its symbol, so the
//     word it sits in merges on each side alone.
//
// When "\n" is itself an added token matched before normalization (Gemma),
// every cut follows a segment boundary of Encode, and only the added-token
// checks apply.
//
// A tokenizer for which this does not hold (newlines in normalized added
// tokens, a merge across a newline with no splitting pre-tokenizer, …) gets no
// cuts: the Encoder then keeps the whole text and encodes it at Close, as
// Encode would. The promise holds for UTF-8 text: on invalid UTF-8, Encode's own
// result depends on where the invalid bytes sit (NFC replaces them only in a
// piece that needs normalizing). An Encoder is not safe for concurrent use.
type Encoder struct {
	t          *Tokenizer
	addSpecial bool
	plan       *cutPlan // nil: no cuts
	buf        []byte   // text not encoded yet
	started    bool     // a piece was encoded: buf continues it
	prev       pieceEnd // how that piece ended
	next       int      // look for a cut once buf holds this many bytes
	// prefix and suffix are the post-processor's ids around the sequence; sent
	// tells whether prefix went out.
	prefix, suffix []int32
	sent           bool
}

// encoderPiece is the text an Encoder gathers before it looks for a cut (a
// variable so that tests cut at every place they can).
var encoderPiece = 64 << 10

// cutPlan is what an Encoder checks at a candidate cut for its tokenizer.
type cutPlan struct {
	gpt2      bool          // the first pre-tokenizer step splits with GPT-2's pattern
	lstrip    []string      // contents of lstrip added tokens matched before normalization
	newline   []*addedToken // such tokens that hold a newline
	lookahead int           // bytes a candidate cut needs after it to be judged
}

// NewEncoder returns an Encoder of t; with addSpecial the post-processor's
// special tokens are added, as Encode does.
func (t *Tokenizer) NewEncoder(addSpecial bool) *Encoder {
	e := &Encoder{t: t, addSpecial: addSpecial, plan: t.cutPlan(), next: encoderPiece}
	if addSpecial && t.template != nil {
		seqs := 0
		for _, it := range t.template {
			switch {
			case it.ids == nil:
				seqs++
			case seqs == 0:
				e.prefix = append(e.prefix, it.ids...)
			default:
				e.suffix = append(e.suffix, it.ids...)
			}
		}
		if seqs != 1 {
			e.plan = nil // Encode places the sequence; keep the whole text
		}
	}
	return e
}

// Write appends p to the text and ids of the text encoded so far (none until a
// cut is found) to dst. p may end inside a UTF-8 sequence.
func (e *Encoder) Write(dst []int32, p []byte) []int32 {
	e.buf = append(e.buf, p...)
	if e.plan == nil || len(e.buf) < e.next {
		return dst
	}
	tries := 0
	for c := e.lastCut(len(e.buf) - e.plan.lookahead); c > 0 && tries < 8; c = e.lastCut(c - 1) {
		tries++
		n := len(dst)
		if !e.sent {
			dst = append(dst, e.prefix...)
		}
		out, end, ok := e.t.encodePiece(string(e.buf[:c]), !e.started, e.prev, e.plan.gpt2, dst)
		if !ok {
			dst = dst[:n]
			continue
		}
		dst, e.sent, e.started, e.prev = out, true, true, end
		e.buf = append(e.buf[:0], e.buf[c:]...)
		e.next = encoderPiece
		return dst
	}
	// No cut in a line this long (or none passed): look again when the text has
	// doubled, so that the work stays linear in it.
	e.next = 2 * len(e.buf)
	return dst
}

// Close encodes the rest of the text and appends its ids, then the
// post-processor's last ones, to dst. The Encoder must not be used after.
func (e *Encoder) Close(dst []int32) []int32 {
	text := string(e.buf)
	e.buf = nil
	if e.plan == nil {
		for _, id := range e.t.Encode(text, e.addSpecial) {
			dst = append(dst, int32(id))
		}
		return dst
	}
	if !e.sent {
		dst = append(dst, e.prefix...)
	}
	dst, _, _ = e.t.encodePiece(text, !e.started, e.prev, false, dst)
	return append(dst, e.suffix...)
}

// lastCut returns the last candidate cut c ≤ limit (0 when none): buf[c-1] is
// a newline, buf[c] starts a character that is not white space, and no raw
// added token (with a newline, or lstrip) rules it out.
func (e *Encoder) lastCut(limit int) int {
	b := e.buf
	for limit > 0 {
		i := bytes.LastIndexByte(b[:limit], '\n')
		if i < 0 {
			return 0
		}
		c := i + 1
		limit = i
		r, size := utf8.DecodeRune(b[c:])
		if size == 0 || (r == utf8.RuneError && size == 1) || isS(r) {
			continue
		}
		// Under GPT-2's pattern the newline must be the whole white-space run:
		// a space or tab before it in the text leaves it in the next piece (the
		// normalized text is checked again in encodePiece).
		if e.plan.gpt2 && i > 0 {
			if r, _ := utf8.DecodeLastRune(b[:i]); isS(r) {
				continue
			}
		}
		if e.plan.blocks(b, c) {
			continue
		}
		return c
	}
	return 0
}

// blocks reports whether a raw added token rules out a cut at c: an lstrip
// token right after it, which would take the newline, or a token written
// across it. A token that ends at the cut does not, unless it is single_word,
// whose match depends on the character after it. A token that would start
// before b started the piece before's cut, which was checked.
func (p *cutPlan) blocks(b []byte, c int) bool {
	for _, s := range p.lstrip {
		if bytes.HasPrefix(b[c:], []byte(s)) {
			return true
		}
	}
	for _, a := range p.newline {
		s := a.Content
		for j := 0; j < len(s); j++ {
			if s[j] != '\n' {
				continue
			}
			i := c - 1 - j
			if i >= 0 && bytes.HasPrefix(b[i:], []byte(s)) && (i+len(s) > c || a.SingleWord) {
				return true
			}
		}
	}
	return false
}

// gpt2Tail reports whether s, the last normalized piece before a cut, ends as
// the cut needs when the first pre-tokenizer step splits with GPT-2's pattern:
// with a newline that is the whole white-space run at its end (after the
// prefix space ByteLevel may add). The pattern's \s+(?!\S) would otherwise
// give the whole text's run another split than s's.
func (t *Tokenizer) gpt2Tail(s string, glued bool) bool {
	st := t.preSteps[0]
	if st.kind == preByteLevel && st.addPrefixSpace && !glued && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	if !strings.HasSuffix(s, "\n") {
		return false
	}
	r, size := utf8.DecodeLastRuneInString(s[:len(s)-1])
	return size == 0 || !isS(r)
}

// cutPlan returns what an Encoder of t checks at a cut, or nil when t may not be
// cut at newlines (see Encoder).
func (t *Tokenizer) cutPlan() *cutPlan {
	p := &cutPlan{lookahead: utf8.UTFMax}
	for _, a := range t.normMatch.tokens() {
		if a.LStrip || strings.Contains(a.Content, "\n") {
			return nil
		}
	}
	for _, a := range t.rawMatch.tokens() {
		if a.LStrip {
			p.lstrip = append(p.lstrip, a.Content)
		}
		if strings.Contains(a.Content, "\n") {
			p.newline = append(p.newline, a)
		}
		if a.LStrip || strings.Contains(a.Content, "\n") {
			p.lookahead = max(p.lookahead, len(a.Content))
		}
	}
	if t.newlineIsAdded() {
		// Every newline is an added token of its own: a cut after it is where
		// Encode starts a new segment anyway, whatever the later stages do.
		return p
	}
	for _, op := range t.normOps {
		if op.kind != normReplace {
			continue
		}
		if r, _ := utf8.DecodeRuneInString(op.b); op.a == "" || strings.Contains(op.a, "\n") || op.b == "" || isS(r) {
			return nil
		}
	}
	if len(t.preSteps) > 0 {
		switch st := t.preSteps[0]; {
		case st.kind == preSplit:
			p.gpt2 = st.split == splitGPT2
			return p
		case st.kind == preByteLevel && st.useRegex:
			p.gpt2 = true
			return p
		}
	}
	// No splitting pre-tokenizer: the newline, as the steps map it, must be a
	// barrier for the model.
	nl := "\n"
	for _, st := range t.preSteps {
		switch {
		case st.kind == preMetaspace && !strings.Contains(st.replacement, "\n"):
		case st.kind == preByteLevel && !st.useRegex:
			nl = byteLevelEncode(nl)
		default:
			return nil
		}
	}
	if !t.model.barrier(nl) {
		return nil
	}
	return p
}

// newlineIsAdded reports whether "\n" is an added token matched before
// normalization that is always taken where it stands: not single_word (whose
// match depends on the text after it) and not lstrip (which would take white
// space before it). Encode then gives every newline that no longer token
// covers its own segment; the Encoder's cuts (after a newline, before a
// character that is not white space) rule out the longer tokens that hold a
// newline and would cross the cut (cutPlan.blocks).
func (t *Tokenizer) newlineIsAdded() bool {
	for _, a := range t.rawMatch.tokens() {
		if a.Content == "\n" {
			return !a.SingleWord && !a.LStrip
		}
	}
	return false
}

// barrier reports whether the character r never merges with a neighbour, so
// that a word containing it encodes as its two sides and r do: no merge takes
// r's first symbols (rank mode) and no token but r holds r (score mode). With
// ignore_merges a side could be a whole token that the joined word is not.
func (m *bpeModel) barrier(r string) bool {
	if m.ignoreMerges {
		return false
	}
	if m.useScores {
		for k := range m.vocab {
			if k != r && strings.Contains(k, r) {
				return false
			}
		}
		return true
	}
	syms := m.initialSymbols(r)
	if len(syms) == 0 {
		return false // dropped: its neighbours would meet
	}
	ids := map[int32]bool{}
	for _, s := range syms {
		if s.id == m.unk && m.fuseUnk {
			return false
		}
		ids[s.id] = true
	}
	for k := range m.merges {
		if ids[int32(uint32(k>>32))] || ids[int32(uint32(k))] {
			return false
		}
	}
	return true
}

// tokens returns the matcher's added tokens.
func (m *addedMatcher) tokens() []*addedToken {
	if m == nil {
		return nil
	}
	var out []*addedToken
	for _, l := range m.byFirst {
		out = append(out, l...)
	}
	return out
}
