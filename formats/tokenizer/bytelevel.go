package tokenizer

// GPT-2's reversible byte-to-unicode table (bytes_to_unicode in GPT-2's
// encoder.py and in HF tokenizers): printable Latin-1 bytes map to themselves,
// the other 68 bytes to U+0100 and up, in byte order.
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelEncode maps every byte of s to its byte-level character.
func byteLevelEncode(s string) string {
	buf := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		buf[i] = byteToRune[s[i]]
	}
	return string(buf)
}

// byteLevelDecode maps the characters of a byte-level token back to bytes. As
// in HF's ByteLevel decoder, a token with a character outside the table is
// passed through as its own UTF-8 bytes.
func byteLevelDecode(dst []byte, tok string) []byte {
	start := len(dst)
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return append(dst[:start], tok...)
		}
		dst = append(dst, b)
	}
	return dst
}
