package tokenizer

import "strings"

// normOp is one step of a normalizer (HF normalizers: NFC, Prepend, Replace).
type normOp struct {
	kind normKind
	a, b string // Prepend: a; Replace: a -> b
}

type normKind int

const (
	normNFC normKind = iota + 1
	normPrepend
	normReplace
)

// normalize applies the normalizer steps to one piece of text (the text
// between added tokens, as HF normalizes each piece on its own). cont says that
// s continues a piece whose start was normalized already (Encoder): Prepend,
// which only adds to the start of a piece, is skipped.
func normalize(ops []normOp, s string, cont bool) string {
	for _, op := range ops {
		switch op.kind {
		case normNFC:
			s = nfc(s)
		case normPrepend:
			// HF Prepend leaves an empty string empty.
			if s != "" && !cont {
				s = op.a + s
			}
		case normReplace:
			s = strings.ReplaceAll(s, op.a, op.b)
		}
	}
	return s
}
