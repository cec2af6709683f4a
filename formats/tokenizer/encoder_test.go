package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// encoderCase is a tokenizer the Encoder is checked with; cuts says whether it
// must find cuts (every bundled one does).
type encoderCase struct {
	name string
	tk   *Tokenizer
	cuts bool
}

// encoderCases are the bundled tokenizers (the stories models', every
// tokenizer.json under testdata, stories260k and tiny-qwen rebuilt from GGUF
// metadata) and the real ones when installed.
func encoderCases(t *testing.T) []encoderCase {
	var cs []encoderCase
	for _, dir := range []string{stories260k, "../../testdata/models/stories3m"} {
		cs = append(cs, encoderCase{filepath.Base(dir), loadT(t, dir), true})
	}
	dirs, _ := filepath.Glob("testdata/*/tokenizer.json")
	if len(dirs) < 5 {
		t.Fatalf("testdata tokenizers: %v", dirs)
	}
	for _, f := range dirs {
		dir := filepath.Dir(f)
		cs = append(cs, encoderCase{filepath.Base(dir), loadT(t, dir), true})
	}
	for _, name := range []string{stories260k, "testdata/tiny-qwen"} {
		back, _ := viaGGUF(t, loadT(t, name))
		cs = append(cs, encoderCase{filepath.Base(name) + "-gguf", back, true})
	}
	// Variants for the Encoder's less common paths: ByteLevel's prefix space before GPT-2's
	// split and after Llama-3's, NFC before SentencePiece's Prepend/Replace, and rstrip tokens
	// (raw "[R]", normalized "cat") that end a piece, so that the next starts a segment.
	rstrip := func(tk *Tokenizer) *Tokenizer {
		tk.rawMatch = newAddedMatcher(append(tk.rawMatch.tokens(), &addedToken{ID: 7, Content: "[R]", RStrip: true}))
		tk.normMatch = newAddedMatcher(append(tk.normMatch.tokens(), &addedToken{ID: 8, Content: "cat", RStrip: true, Normalized: true}))
		return tk
	}
	gpt2 := rstrip(loadT(t, "testdata/tiny-gpt2"))
	gpt2.preSteps[0].addPrefixSpace = true
	llama3 := loadT(t, "testdata/tiny-llama3")
	llama3.preSteps[1].addPrefixSpace = true
	spm := rstrip(loadT(t, stories260k))
	spm.normOps = append([]normOp{{kind: normNFC}}, spm.normOps...)
	meta := rstrip(loadT(t, "testdata/spm-metaspace-old"))
	cs = append(cs, encoderCase{"gpt2-prefix-space", gpt2, true}, encoderCase{"llama3-prefix-space", llama3, true},
		encoderCase{"stories-nfc-rstrip", spm, true}, encoderCase{"metaspace-rstrip", meta, true})
	for _, name := range []string{"qwen3", "llama3", "llama2", "gemma3", "gemma2"} {
		if _, err := os.Stat(filepath.Join(peerDir(name), "tokenizer.json")); err == nil {
			cs = append(cs, encoderCase{name, loadPeer(t, name), true})
		}
	}
	return cs
}

// streamEncode tokenizes text through an Encoder in writes of random sizes up
// to maxWrite bytes, and returns the ids and the number of pieces encoded
// before Close.
func streamEncode(tk *Tokenizer, text string, addSpecial bool, r *rand.Rand, maxWrite int) ([]int, int) {
	e := tk.NewEncoder(addSpecial)
	var ids []int32
	pieces := 0
	for b := []byte(text); len(b) > 0; {
		n := min(len(b), 1+r.IntN(maxWrite))
		before := len(ids)
		ids = e.Write(ids, b[:n])
		if len(ids) > before {
			pieces++
		}
		b = b[n:]
	}
	ids = e.Close(ids)
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out, pieces
}

// firstDiff describes where two id lists part.
func firstDiff(got, want []int) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d ids, want %d; first difference at %d: got %v, want %v", len(got), len(want), i,
		got[i:min(i+8, len(got))], want[i:min(i+8, len(want))])
}

// setPiece makes Encoders look for a cut at every write for the test.
func setPiece(t *testing.T, n int) {
	old := encoderPiece
	encoderPiece = n
	t.Cleanup(func() { encoderPiece = old })
}

// The Encoder's ids are Encode's on the bundled corpora, for every bundled tokenizer, with and
// without the special tokens, whether it cuts as often as it can or at its default size.
func TestEncoderCorpora(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/corpora/*.txt")
	if len(files) < 2 {
		t.Fatalf("corpora: %v", files)
	}
	var texts []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	for _, c := range encoderCases(t) {
		t.Run(c.name, func(t *testing.T) {
			if c.cuts && c.tk.cutPlan() == nil {
				t.Fatal("no cut plan: the Encoder would keep the whole text")
			}
			r := rand.New(rand.NewPCG(1, 2))
			for fi, text := range texts {
				for _, special := range []bool{false, true} {
					want := c.tk.Encode(text, special)
					for _, piece := range []int{1, 64 << 10} {
						setPiece(t, piece)
						got, pieces := streamEncode(c.tk, text, special, r, 4096)
						if !slices.Equal(got, want) {
							t.Fatalf("%s special=%v piece=%d: %s", files[fi], special, piece, firstDiff(got, want))
						}
						if c.cuts && piece == 1 && pieces < 10 {
							t.Errorf("%s: only %d pieces", files[fi], pieces)
						}
					}
				}
			}
		})
	}
}

// Random texts made of the pieces where tokenizers differ (white-space runs, CRLF, combining
// marks, contractions, digits, added tokens with every flag, ▁, CJK, emoji) encode alike
// through an Encoder cutting wherever it can.
func TestEncoderRandom(t *testing.T) {
	setPiece(t, 1)
	atoms := []string{
		"\n", "\n", "\n", "\n\n", "\r\n", "\r", " ", " ", "  ", "\t", "\u00a0", "\u3000", " \n",
		"a", "Once", " upon", "time", "I", "'s", "'LL", "'re", "ſ", "é", "e\u0301", "\u0301", "\u0323\u0301",
		"\u1100", "\u1161", "\u11a8", "가", "123", "4", "٣", "!", "...", "\"", ".\n", "(x)", "▁", "▁▁",
		"我想", "🦙", "\xe2\x96", "<|endoftext|>", "<s>", "</s>", "<unk>", "<|im_start|>", "<think>",
		"<mask>", " <mask>", "[R]", "[R] ", "cat", " cat ", "concat", "<|begin_of_text|>", "<0x0A>",
		"<start_of_turn>", "<end_of_turn>", "\t\t", "<b>", "\n\n\n",
	}
	for _, c := range encoderCases(t) {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			for it := 0; it < 300; it++ {
				var sb strings.Builder
				for n := 5 + r.IntN(300); n > 0; n-- {
					sb.WriteString(atoms[r.IntN(len(atoms))])
				}
				text := sb.String()
				special := it%2 == 1
				want := c.tk.Encode(text, special)
				got, _ := streamEncode(c.tk, text, special, r, 1+r.IntN(64))
				if !slices.Equal(got, want) {
					t.Fatalf("%q special=%v: %s", text, special, firstDiff(got, want))
				}
			}
		})
	}
}

// A tokenizer the Encoder cannot cut (a normalized added token holding a newline) still
// encodes the whole text alike, at Close; so does an empty text.
func TestEncoderNoCuts(t *testing.T) {
	setPiece(t, 1)
	tk := loadT(t, "testdata/tiny-qwen")
	r := rand.New(rand.NewPCG(5, 6))
	text := "Hi there.\nBye now.\nAgain.\n"
	for _, special := range []bool{false, true} {
		if got, _ := streamEncode(tk, "", special, r, 8); !slices.Equal(got, tk.Encode("", special)) {
			t.Errorf("empty text special=%v: %v", special, got)
		}
	}
	nl := loadT(t, "testdata/tiny-qwen")
	nl.normMatch = newAddedMatcher([]*addedToken{{ID: 5, Content: "w.\nA", Normalized: true}})
	if nl.cutPlan() != nil {
		t.Fatal("a cut plan despite a normalized token with a newline")
	}
	got, pieces := streamEncode(nl, text, true, r, 3)
	if want := nl.Encode(text, true); !slices.Equal(got, want) || pieces != 0 {
		t.Errorf("%s, %d pieces before Close", firstDiff(got, want), pieces)
	}
}

// The newline is a barrier for stories260k's model (no merge takes <0x0A>), not for the
// byte-level vocabularies (Ċ merges): with no splitting pre-tokenizer those are not cut.
func TestBarrier(t *testing.T) {
	if !loadT(t, stories260k).model.barrier("\n") {
		t.Error("stories260k: the newline is no barrier")
	}
	tk := loadT(t, "testdata/tiny-gpt2")
	if tk.model.barrier("Ċ") {
		t.Error("tiny-gpt2: Ċ is a barrier")
	}
	tk.preSteps[0].useRegex = false
	if tk.cutPlan() != nil {
		t.Error("tiny-gpt2 without its split: a cut plan")
	}
}

// The B-side of a cut (encoder.go): a character that is not white space stays so under NFC,
// since its decomposition starts with one that is not and no composite is white space.
func TestNFCKeepsNonSpace(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if isS(r) || (r >= 0xD800 && r < 0xE000) {
			continue
		}
		if d := decompose(nil, r); isS(d[0]) {
			t.Fatalf("U+%04X decomposes to white space U+%04X", r, d[0])
		}
	}
	for _, c := range primaryComposites {
		if isS(c) {
			t.Fatalf("composite U+%04X is white space", c)
		}
	}
}

// FuzzEncoder checks that an Encoder cutting wherever it can gives Encode's ids on UTF-8 text.
func FuzzEncoder(f *testing.F) {
	for _, s := range []string{"a\nb", "x \n\ny\r\nz", "<mask>\n<mask>", "[R]\ncat\nA", "e\u0301\n\u0301b", "'s\n'S\n1\n", "▁\n▁x"} {
		f.Add(s, uint64(1))
	}
	toks := []*Tokenizer{loadT(f, stories260k), loadT(f, "testdata/tiny-qwen"), loadT(f, "testdata/tiny-gpt2"),
		loadT(f, "testdata/tiny-llama3"), loadT(f, "testdata/spm-metaspace-old"), loadT(f, "testdata/spm-metaspace-first")}
	old := encoderPiece
	encoderPiece = 1
	f.Cleanup(func() { encoderPiece = old })
	f.Fuzz(func(t *testing.T, s string, seed uint64) {
		if !utf8.ValidString(s) {
			return // the Encoder's promise is for text (see Encoder)
		}
		for k, tk := range toks {
			special := seed%2 == 1
			want := tk.Encode(s, special)
			got, _ := streamEncode(tk, s, special, rand.New(rand.NewPCG(seed, 0)), 1+int(seed%13))
			if !slices.Equal(got, want) {
				t.Fatalf("tokenizer %d, %q: %s", k, s, firstDiff(got, want))
			}
		}
	})
}
