package tokenizer

import "sort"

//go:generate sh -c "python3 gen_nfc.py > nfc_tables.go"

// cccRange is a run of runes with the same canonical combining class.
type cccRange struct {
	lo, hi rune
	ccc    uint8
}

// Hangul syllable constants (Unicode §3.12).
const (
	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulLCount = 19
	hangulVCount = 21
	hangulTCount = 28
	hangulNCount = hangulVCount * hangulTCount
	hangulSCount = hangulLCount * hangulNCount
)

var (
	decompMap  map[rune][]rune
	composeMap map[uint64]rune
)

func init() {
	decompMap = make(map[rune][]rune, 2100)
	for i := 0; i < len(decompositions); {
		r, n := decompositions[i], int(decompositions[i+1])
		decompMap[r] = decompositions[i+2 : i+2+n]
		i += 2 + n
	}
	composeMap = make(map[uint64]rune, len(primaryComposites))
	for _, c := range primaryComposites {
		d := decompMap[c]
		composeMap[uint64(d[0])<<32|uint64(d[1])] = c
	}
}

// combiningClass returns the canonical combining class of r.
func combiningClass(r rune) uint8 {
	if r < 0x300 {
		return 0
	}
	i := sort.Search(len(cccRanges), func(i int) bool { return cccRanges[i].hi >= r })
	if i < len(cccRanges) && cccRanges[i].lo <= r {
		return cccRanges[i].ccc
	}
	return 0
}

// nfc returns s in Unicode Normalization Form C (HF's NFC normalizer):
// canonical decomposition, canonical ordering, canonical composition. Text
// below U+0300 is already NFC and returned as is.
func nfc(s string) string {
	quick := true
	for i := 0; i < len(s); i++ {
		// U+0300 is 0xCC 0x80: any lead byte >= 0xCC starts a rune >= U+0300.
		if s[i] >= 0xCC {
			quick = false
			break
		}
	}
	if quick {
		return s
	}
	buf := make([]rune, 0, len(s))
	for _, r := range s {
		buf = decompose(buf, r)
	}
	// canonical ordering: stable sort of each run of non-starters by class
	for i := 1; i < len(buf); i++ {
		c := combiningClass(buf[i])
		if c == 0 {
			continue
		}
		for j := i; j > 0; j-- {
			p := combiningClass(buf[j-1])
			if p <= c {
				break
			}
			buf[j], buf[j-1] = buf[j-1], buf[j]
		}
	}
	return string(compose(buf))
}

// decompose appends the full canonical decomposition of r.
func decompose(dst []rune, r rune) []rune {
	if r >= hangulSBase && r < hangulSBase+hangulSCount {
		si := r - hangulSBase
		dst = append(dst, hangulLBase+si/hangulNCount, hangulVBase+(si%hangulNCount)/hangulTCount)
		if t := si % hangulTCount; t != 0 {
			dst = append(dst, hangulTBase+t)
		}
		return dst
	}
	d, ok := decompMap[r]
	if !ok {
		return append(dst, r)
	}
	for _, x := range d {
		dst = decompose(dst, x)
	}
	return dst
}

// composePair returns the primary composite of a and b, if any.
func composePair(a, b rune) (rune, bool) {
	if a >= hangulLBase && a < hangulLBase+hangulLCount && b >= hangulVBase && b < hangulVBase+hangulVCount {
		return hangulSBase + ((a-hangulLBase)*hangulVCount+(b-hangulVBase))*hangulTCount, true
	}
	if a >= hangulSBase && a < hangulSBase+hangulSCount && (a-hangulSBase)%hangulTCount == 0 &&
		b > hangulTBase && b < hangulTBase+hangulTCount {
		return a + (b - hangulTBase), true
	}
	c, ok := composeMap[uint64(a)<<32|uint64(b)]
	return c, ok
}

// compose applies canonical composition in place (UAX #15's algorithm).
func compose(buf []rune) []rune {
	if len(buf) == 0 {
		return buf
	}
	starterPos := 0
	lastClass := int(combiningClass(buf[0]))
	if lastClass != 0 {
		lastClass = 256 // the text starts with a non-starter: block it
	}
	out := 1
	for i := 1; i < len(buf); i++ {
		ch := buf[i]
		cls := int(combiningClass(ch))
		if c, ok := composePair(buf[starterPos], ch); ok && (lastClass < cls || lastClass == 0) {
			buf[starterPos] = c
			continue
		}
		if cls == 0 {
			starterPos = out
		}
		lastClass = cls
		buf[out] = ch
		out++
	}
	return buf[:out]
}
