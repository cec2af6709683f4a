package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTok writes a tokenizer directory with the given files.
func writeTok(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tinyJSON is a small byte-level tokenizer.json with the given pre-tokenizer.
func tinyJSON(pre string) string {
	vocab := []string{}
	for b := 0; b < 256; b++ {
		r := byteToRune[b]
		q := strings.ReplaceAll(strings.ReplaceAll(string(r), `\`, `\\`), `"`, `\"`)
		vocab = append(vocab, `"`+q+`":`+itoa(b))
	}
	vocab = append(vocab, `"ab":256`)
	return `{"added_tokens":[],"normalizer":null,"pre_tokenizer":` + pre +
		`,"post_processor":null,"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{` +
		strings.Join(vocab, ",") + `},"merges":[["a","b"]]}}`
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestUnknownPreTokenizer(t *testing.T) {
	pre := `{"type":"Split","pattern":{"Regex":"\\p{N}{1,5}|[a-z]+"},"behavior":"Isolated","invert":false}`
	dir := writeTok(t, map[string]string{"tokenizer.json": tinyJSON(`{"type":"Sequence","pretokenizers":[` + pre + `,{"type":"ByteLevel","use_regex":false}]}`)})
	_, err := Load(dir, Options{})
	if err == nil {
		t.Fatal("Load accepted an unknown pre-tokenizer")
	}
	msg := err.Error()
	for _, want := range []string{"tokenizer.json", `\\p{N}{1,5}`, "--pre NAME"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error has several lines: %q", msg)
	}
	// An explicit name skips recognition and encodes with that splitter.
	tk, err := Load(dir, Options{Pre: "qwen2"})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Pre() != "qwen2" {
		t.Errorf("Pre() = %q, want qwen2", tk.Pre())
	}
	if got := tk.Encode("ab12", false); !equalIDs(got, []int{256, '1', '2'}) {
		t.Errorf("Encode = %v, want [256 49 50]", got)
	}
	// Recognised, but overridden: the name changes, encoding does not.
	dir2 := writeTok(t, map[string]string{"tokenizer.json": tinyJSON(`{"type":"ByteLevel","use_regex":true}`)})
	tk2, err := Load(dir2, Options{Pre: "my-pre"})
	if err != nil {
		t.Fatal(err)
	}
	if tk2.Pre() != "my-pre" {
		t.Errorf("Pre() = %q, want my-pre", tk2.Pre())
	}
}

// TestMalformed is the catalogue of bad inputs and the error each gives.
func TestMalformed(t *testing.T) {
	good := tinyJSON(`{"type":"ByteLevel"}`)
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"missing", map[string]string{}, "tokenizer.json"},
		{"not json", map[string]string{"tokenizer.json": "{"}, "tokenizer.json: unexpected end"},
		{"wordpiece", map[string]string{"tokenizer.json": `{"model":{"type":"WordPiece","vocab":{}}}`}, `model.type: "WordPiece" is not supported`},
		{"bad merge", map[string]string{"tokenizer.json": strings.Replace(good, `[["a","b"]]`, `["ab"]`, 1)}, `model.merges: merge 0 "ab"`},
		{"merge not in vocab", map[string]string{"tokenizer.json": strings.Replace(good, `[["a","b"]]`, `[["a","c"]]`, 1)}, "tokens missing from the vocabulary"},
		{"merges of three", map[string]string{"tokenizer.json": strings.Replace(good, `[["a","b"]]`, `[["a","b","c"]]`, 1)}, "merge 0 has 3 parts"},
		{"negative id", map[string]string{"tokenizer.json": strings.Replace(good, `"ab":256`, `"ab":-1`, 1)}, "id -1 is out of range"},
		{"duplicate id", map[string]string{"tokenizer.json": strings.Replace(good, `"ab":256`, `"ab":5`, 1)}, "id 5 is used by"},
		{"bad normalizer", map[string]string{"tokenizer.json": strings.Replace(good, `"normalizer":null`, `"normalizer":{"type":"NFKC"}`, 1)}, "normalizer: unsupported normalizer"},
		{"bad decoder", map[string]string{"tokenizer.json": strings.Replace(good, `"decoder":{"type":"ByteLevel"}`, `"decoder":{"type":"WordPiece"}`, 1)}, "decoder: unsupported decoder"},
		{"unknown bos", map[string]string{"tokenizer.json": good, "tokenizer_config.json": `{"bos_token":"<nope>"}`}, `tokenizer_config.json: bos_token: "<nope>" is not a token`},
		{"bad config", map[string]string{"tokenizer.json": good, "generation_config.json": `[`}, "generation_config.json"},
		{"small vocab_size", map[string]string{"tokenizer.json": good, "config.json": `{"vocab_size":10}`}, "vocab_size: 10 is smaller"},
	}
	for _, c := range cases {
		dir := writeTok(t, c.files)
		_, err := Load(dir, Options{})
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestFromGGUFErrors(t *testing.T) {
	base := map[string]any{KeyModel: "gpt2", KeyPre: "qwen2", KeyTokens: []string{"a", "b", "ab"}, KeyMerges: []string{"a b"}}
	cases := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"no tokens", func(m map[string]any) { delete(m, KeyTokens) }, KeyTokens + ": missing"},
		{"tokens type", func(m map[string]any) { m[KeyTokens] = "x" }, "want []string"},
		{"model", func(m map[string]any) { m[KeyModel] = "bert" }, `"bert" is not supported`},
		{"pre", func(m map[string]any) { m[KeyPre] = "deepseek-v3" }, `pre-tokenizer "deepseek-v3" is not supported`},
		{"no merges", func(m map[string]any) { delete(m, KeyMerges) }, KeyMerges + ": missing"},
		{"bad merge", func(m map[string]any) { m[KeyMerges] = []string{"ab"} }, `entry 0 "ab"`},
		{"eos range", func(m map[string]any) { m[KeyEOS] = uint32(7) }, "7 is out of range"},
		{"eos type", func(m map[string]any) { m[KeyEOS] = "x" }, "want uint32"},
		{"types short", func(m map[string]any) { m[KeyTokenType] = []int32{1} }, KeyTokenType},
		{"add bos without bos", func(m map[string]any) { m[KeyAddBOS] = true }, "bos_token_id is missing"},
		{"scores", func(m map[string]any) { m[KeyModel] = "llama"; m[KeyScores] = []float32{0} }, KeyScores},
	}
	for _, c := range cases {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		c.edit(m)
		_, err := FromGGUF(func(k string) (any, bool) { v, ok := m[k]; return v, ok })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}
