package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLossyUTF8(t *testing.T) {
	// Expected values follow Unicode's "maximal subpart" rule, which Rust's
	// String::from_utf8_lossy (used by HF's ByteLevel decoder) implements.
	cases := []struct{ in, want string }{
		{"abc", "abc"},
		{"\xE4\xB8a", "\uFFFDa"},
		{"\xFF\xFE", "\uFFFD\uFFFD"},
		{"\xF0\x9F\x98", "\uFFFD"},
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xC0\x80", "\uFFFD\uFFFD"},
		{"a\xE4\xB8\xADb", "a中b"},
		{"\xE0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
	}
	for _, c := range cases {
		if got := lossyUTF8([]byte(c.in)); got != c.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSplitters(t *testing.T) {
	// Expected pieces worked out by hand from the regular expressions.
	cases := []struct {
		kind splitKind
		in   string
		want []string
	}{
		{splitGPT2, "Hello world's  12345 !!x", []string{"Hello", " world", "'s", " ", " 12345", " !!", "x"}},
		{splitGPT2, "a \n b  ", []string{"a", " \n", " b", "  "}},
		{splitLlama3, "Hello WORLD'S 12345", []string{"Hello", " WORLD", "'S", " ", "123", "45"}},
		{splitLlama3, "x  \n\n  y\t(z)", []string{"x", "  \n\n", " ", " y", "\t", "(z", ")"}},
		{splitLlama3, "!!\n\nab", []string{"!!\n\n", "ab"}},
		{splitQwen2, "a 123", []string{"a", " ", "1", "2", "3"}},
		{splitLlama3, "'ſ", []string{"'ſ"}},
	}
	for _, c := range cases {
		got := splitPieces(c.kind, c.in, nil)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("split %d %q = %q, want %q", c.kind, c.in, got, c.want)
		}
	}
}

func TestStream(t *testing.T) {
	for _, dir := range []string{stories260k, "testdata/tiny-qwen"} {
		tk := loadT(t, dir)
		text := "Once upon a time, 我想 🦙 café."
		ids := tk.Encode(text, false)
		s := tk.NewStream()
		var out strings.Builder
		for _, id := range ids {
			piece := s.Add(id)
			if !utf8.ValidString(piece) {
				t.Errorf("%s: Add(%d) returned invalid UTF-8 %q", dir, id, piece)
			}
			out.WriteString(piece)
		}
		out.WriteString(s.Flush())
		if out.String() != text {
			t.Errorf("%s: stream gave %q, want %q", dir, out.String(), text)
		}
		if got := tk.Decode(ids); got != text {
			t.Errorf("%s: Decode gave %q, want %q", dir, got, text)
		}
	}
}

// FuzzEncode checks that encoding never panics, gives ids in range, and that
// byte-level BPE without a normalizer decodes back to the input.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "hello world", "a\u00a0b\u2009c", "<|endoftext|>x", "\xff\xfe", "e\u0301", "<s> </s>"} {
		f.Add(s)
	}
	toks := []*Tokenizer{loadT(f, stories260k), loadT(f, "testdata/tiny-qwen"), loadT(f, "testdata/tiny-gpt2")}
	f.Fuzz(func(t *testing.T, s string) {
		for k, tk := range toks {
			ids := tk.Encode(s, true)
			for _, id := range ids {
				if id < 0 || id >= tk.VocabSize() {
					t.Fatalf("tokenizer %d: id %d out of range", k, id)
				}
			}
			_ = tk.Decode(ids)
		}
		if utf8.ValidString(s) {
			if got := toks[2].Decode(toks[2].Encode(s, false)); got != s {
				t.Errorf("byte-level round trip of %q gave %q", s, got)
			}
		}
	})
}

// FuzzParse checks that no tokenizer.json makes the parser panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(tinyJSON(`{"type":"ByteLevel"}`)))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`))
	f.Add([]byte(`{"model":{"vocab":{"a":0,"b":1,"ab":2},"merges":["a b"],"byte_fallback":true},"normalizer":{"type":"Prepend","prepend":"▁"}}`))
	f.Add([]byte(`{"model":{"vocab":{"a":0,"b":1,"ab":2,"<0x41>":3},"merges":[["a","b"]],"byte_fallback":true},"added_tokens":[{"id":4,"content":"
","special":false}],` +
		`"normalizer":{"type":"Replace","pattern":{"String":" "},"content":"▁"},"pre_tokenizer":{"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := parse(data, Options{})
		if err == nil {
			tk.Encode("hello wörld 123 <s>", true)
			_, _ = tk.GGUFMetadata()
		}
	})
}
