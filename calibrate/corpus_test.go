package calibrate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/tokenizer"
)

// corpusTokenizers are the bundled models' tokenizers and every tokenizer.json under
// formats/tokenizer/testdata.
func corpusTokenizers(t *testing.T) map[string]*tokenizer.Tokenizer {
	dirs := []string{model260k, model3m}
	more, _ := filepath.Glob("../formats/tokenizer/testdata/*/tokenizer.json")
	if len(more) < 5 {
		t.Fatalf("testdata tokenizers: %v", more)
	}
	for _, f := range more {
		dirs = append(dirs, filepath.Dir(f))
	}
	toks := map[string]*tokenizer.Tokenizer{}
	for _, d := range dirs {
		tk, err := tokenizer.Load(d, tokenizer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		toks[filepath.Base(d)] = tk
	}
	return toks
}

// bosOf is Calibrate's choice of the BOS that replaces each chunk's first token.
func bosOf(tk Tokenizer) int {
	if tk.AddBOS() {
		return tk.BOS()
	}
	return -1
}

// ReadCorpus gives the chunks that Chunks cuts from the whole text's Tokenize, and the file's
// SHA-256, on the bundled corpora with every bundled tokenizer (all the tokens: the streamed
// tokenization is the whole text's), and with stories260k's for the head, seeded samples
// (Tokens set and not) and the errors; ReadTokens gives the head of Encode(text, true).
func TestReadCorpusMatchesWholeText(t *testing.T) {
	files, _ := filepath.Glob("../testdata/corpora/*.txt")
	if len(files) < 2 {
		t.Fatalf("corpora: %v", files)
	}
	selections := []Chunking{
		{Ctx: 256, Tokens: 2048}, {Ctx: 100, Tokens: 1001}, {Ctx: 256, Tokens: 2048, Seed: 1},
		{Ctx: 50, Tokens: 5000, Seed: 7}, {Ctx: 64, Seed: 3}, {Ctx: 512, Tokens: 1 << 24},
		{Ctx: 64, Tokens: 100, Seed: 2}, {Ctx: 0}, {Ctx: 64, Tokens: -1},
	}
	for name, tk := range corpusTokenizers(t) {
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			stream := Tokenize(tk, string(data))
			cases := []Chunking{{Ctx: 64}}
			if name == "stories260k" {
				cases = append(cases, selections...)
			}
			for _, c := range cases {
				want, wantErr := Chunks(stream, c, bosOf(tk), f)
				got, err := ReadCorpus(f, tk, c, bosOf(tk))
				if wantErr != nil || err != nil {
					if wantErr == nil || err == nil || err.Error() != wantErr.Error() {
						t.Errorf("%s %s %+v: error %v, want %v", name, f, c, err, wantErr)
					}
					continue
				}
				if got.SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("%s %s: sha256 %s", name, f, got.SHA256)
				}
				if !slices.EqualFunc(got.Chunks, want, slices.Equal) {
					t.Errorf("%s %s %+v: %d chunks differ from Chunks' %d", name, f, c, len(got.Chunks), len(want))
				}
			}
			whole := tk.Encode(string(data), true)
			for _, limit := range []int{0, 1000} {
				got, err := ReadTokens(f, tk, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) < min(limit, len(whole)) || (limit == 0 && len(got) != len(whole)) || !slices.Equal(got, whole[:len(got)]) {
					t.Errorf("%s %s: ReadTokens(%d): %d tokens, not a head of Encode's %d", name, f, limit, len(got), len(whole))
				}
			}
		}
	}
}

// plainTok is a tokenizer with no Encoder: one id per byte, BOS 1 added.
type plainTok struct{}

func (plainTok) Encode(text string, addSpecial bool) []int {
	var ids []int
	if addSpecial {
		ids = append(ids, 1)
	}
	for _, b := range []byte(text) {
		ids = append(ids, 2+int(b))
	}
	return ids
}
func (plainTok) BOS() int     { return 1 }
func (plainTok) AddBOS() bool { return true }

// A tokenizer without an Encoder (verify's test doubles) gets the whole text at once.
func TestReadCorpusPlainTokenizer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.txt")
	text := strings.Repeat("Once upon a time.\n", 1000)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Chunking{Ctx: 32, Tokens: 320, Seed: 5}
	want, _ := Chunks(tokenizeAny(plainTok{}, text), c, 1, path)
	got, err := ReadCorpus(path, plainTok{}, c, 1)
	if err != nil || !slices.EqualFunc(got.Chunks, want, slices.Equal) {
		t.Errorf("chunks differ (%v)", err)
	}
	toks, err := ReadTokens(path, plainTok{}, 0)
	if err != nil || !slices.Equal(toks, plainTok{}.Encode(text, true)) {
		t.Errorf("ReadTokens: %d tokens (%v)", len(toks), err)
	}
}

// tokenizeAny is Tokenize for any Tokenizer.
func tokenizeAny(tok Tokenizer, text string) []int {
	ids := tok.Encode(text, false)
	if tok.AddBOS() && tok.BOS() >= 0 {
		ids = append([]int{tok.BOS()}, ids...)
	}
	return ids
}

// A corpus that is not text is refused with the offset of its first bad byte, wherever the
// reads cut it; a character cut by a read is fine; an empty corpus has its usual error.
func TestReadCorpusNotText(t *testing.T) {
	tk, err := tokenizer.Load(model260k, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(b []byte) string {
		p := filepath.Join(dir, "corpus.txt")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	text := func(n int) []byte { return bytes.Repeat([]byte("a"), n) }
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	c := Chunking{Ctx: 16, Tokens: 16}
	for _, at := range []int{0, 1234, corpusBlock - 2, corpusBlock - 1, corpusBlock, corpusBlock + 1, 3*corpusBlock + 5} {
		for _, bad := range []struct{ what, b string }{
			{"not UTF-8 text", "\xff"},
			{"not UTF-8 text", "\xe4\xb8"},     // a cut character
			{"not UTF-8 text", "\xed\xa0\x80"}, // a surrogate
			{"not text (a NUL byte, binary data)", "\x00"},
		} {
			p := write(join(text(at), []byte(bad.b), text(100)))
			want := p + ": " + bad.what + " at byte " + strconv.Itoa(at)
			if _, err := ReadCorpus(p, tk, c, bosOf(tk)); err == nil || err.Error() != want {
				t.Errorf("%q at %d: %v, want %s", bad.b, at, err, want)
			}
			if _, err := ReadTokens(p, tk, 16); err == nil || err.Error() != want {
				t.Errorf("ReadTokens: %q at %d: %v", bad.b, at, err)
			}
		}
		// Valid characters across the read boundary.
		for _, ch := range []string{"é", "我", "🦙"} {
			b := join(text(at), []byte(ch), []byte(" upon a time, once upon a time.\n"))
			if _, err := ReadCorpus(write(b), tk, Chunking{Ctx: 4}, bosOf(tk)); err != nil {
				t.Errorf("%q at %d: %v", ch, at, err)
			}
		}
	}
	p := write(join(text(10), []byte("\xf0\x9f\xa6")))
	if _, err := ReadCorpus(p, tk, c, bosOf(tk)); err == nil || err.Error() != p+": not UTF-8 text at byte 10" {
		t.Errorf("cut at the end: %v", err)
	}
	p = write(nil)
	_, err = ReadCorpus(p, tk, Chunking{Ctx: 16}, bosOf(tk))
	if err == nil || err.Error() != p+": the corpus has 1 tokens, fewer than one chunk of 16" {
		t.Errorf("empty: %v", err)
	}
	if _, err := ReadCorpus(filepath.Join(dir, "absent.txt"), tk, c, bosOf(tk)); !os.IsNotExist(err) {
		t.Errorf("absent: %v", err)
	}
}

// Without a seed, reading stops tokenizing once the tokens are there: the allocations for
// 2,048 tokens of a 16 MB corpus stay far below what tokenizing it would take.
func TestReadCorpusStopsEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 16 MB corpus")
	}
	tk, err := tokenizer.Load(model260k, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../testdata/corpora/tinystories-eval.txt")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(p, bytes.Repeat(data, 16<<20/len(data)), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	got, err := ReadCorpus(p, tk, Chunking{Ctx: 256, Tokens: 2048}, bosOf(tk))
	goruntime.ReadMemStats(&after)
	if err != nil || len(got.Chunks) != 8 {
		t.Fatalf("%v", err)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 16<<20 {
		t.Errorf("%d MB allocated for 2048 tokens", a>>20)
	}
}
