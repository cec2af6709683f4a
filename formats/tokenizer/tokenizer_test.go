package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// goldenFile is the format of testdata/*.json (see testdata/README.md).
type goldenFile struct {
	Tokenizer string `json:"tokenizer"`
	Cases     []struct {
		Text               string `json:"text"`
		IDs                []int  `json:"ids"`
		IDsNoSpecial       []int  `json:"ids_no_special"`
		Decoded            string `json:"decoded"`
		DecodedSkipSpecial string `json:"decoded_skip_special"`
	} `json:"cases"`
}

func readGolden(t *testing.T, name string) *goldenFile { return readGoldenTB(t, name) }

func readGoldenTB(t testing.TB, name string) *goldenFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

const stories260k = "../../testdata/models/stories260k"

func loadT(t testing.TB, dir string) *Tokenizer {
	t.Helper()
	tk, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// checkGolden compares encoding and decoding with HF tokenizers' output.
// withDecode is false for tokenizers rebuilt from GGUF, whose decoding of
// special tokens follows llama.cpp.
func checkGolden(t *testing.T, tk *Tokenizer, g *goldenFile, skip map[string]string) {
	t.Helper()
	checkGoldenSkips(t, tk, g, skip, nil)
}

// checkGoldenSkips is checkGolden that also leaves out the decoding without
// special tokens of the texts in skipDecodeSpecial.
func checkGoldenSkips(t *testing.T, tk *Tokenizer, g *goldenFile, skip, skipDecodeSpecial map[string]string) {
	t.Helper()
	for _, c := range g.Cases {
		if why, ok := skip[c.Text]; ok {
			t.Logf("skipped %q: %s", c.Text, why)
			continue
		}
		if got := tk.Encode(c.Text, true); !equalIDs(got, c.IDs) {
			t.Errorf("%s: Encode(%q, true)\n got %v\nwant %v", g.Tokenizer, c.Text, got, c.IDs)
		}
		if got := tk.Encode(c.Text, false); !equalIDs(got, c.IDsNoSpecial) {
			t.Errorf("%s: Encode(%q, false)\n got %v\nwant %v", g.Tokenizer, c.Text, got, c.IDsNoSpecial)
		}
		if got := tk.Decode(c.IDsNoSpecial); got != c.Decoded {
			t.Errorf("%s: Decode(%v) = %q, want %q", g.Tokenizer, c.IDsNoSpecial, got, c.Decoded)
		}
		if why, ok := skipDecodeSpecial[c.Text]; ok {
			t.Logf("DecodeSkipSpecial of %q skipped: %s", c.Text, why)
			continue
		}
		if got := tk.DecodeSkipSpecial(c.IDs); got != c.DecodedSkipSpecial {
			t.Errorf("%s: DecodeSkipSpecial(%v) = %q, want %q", g.Tokenizer, c.IDs, got, c.DecodedSkipSpecial)
		}
	}
}

func equalIDs(a, b []int) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func TestStories260kGolden(t *testing.T) {
	checkGolden(t, loadT(t, stories260k), readGolden(t, "stories260k.json"), nil)
}

// TestStories260kReference checks the prompt ids of reference.json (made
// with llama2.c's run.c encoder and HF tokenizers, see the model's README).
func TestStories260kReference(t *testing.T) {
	for _, dir := range []string{stories260k, "../../testdata/models/stories3m"} {
		data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref struct {
			Prompts []struct {
				Text string `json:"text"`
				IDs  []int  `json:"ids"`
			} `json:"prompts"`
		}
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatal(err)
		}
		tk := loadT(t, dir)
		if len(ref.Prompts) == 0 {
			t.Fatalf("%s: no prompts", dir)
		}
		for _, p := range ref.Prompts {
			if got := tk.Encode(p.Text, true); !equalIDs(got, p.IDs) {
				t.Errorf("%s: Encode(%q) = %v, want %v", dir, p.Text, got, p.IDs)
			}
		}
	}
}

// TestSyntheticGolden covers byte-level BPE (Qwen2, Llama-3 and GPT-2
// patterns, added-token flags, NFC, templates) and the Metaspace forms of
// SentencePiece tokenizers with small tokenizers built from real ones
// (testdata/README.md).
func TestSyntheticGolden(t *testing.T) {
	for _, name := range []string{"tiny-qwen", "tiny-llama3", "tiny-gpt2", "spm-metaspace-first", "spm-metaspace-old"} {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, loadT(t, filepath.Join("testdata", name)), readGolden(t, name+".json"), nil)
		})
	}
}

func TestConfigs(t *testing.T) {
	const n = 1756 // first added id of the tiny tokenizers
	tq := loadT(t, "testdata/tiny-qwen")
	if tq.Kind() != ByteLevel || tq.Pre() != "qwen2" {
		t.Errorf("tiny-qwen: kind %v pre %q", tq.Kind(), tq.Pre())
	}
	// bos/eos/pad by name (tokenizer_config.json); EOS list: eos first, then
	// generation_config.json's list without repeats.
	if tq.BOS() != n || tq.EOS() != n+2 || tq.PAD() != n || tq.UNK() != -1 {
		t.Errorf("tiny-qwen: bos %d eos %d pad %d unk %d", tq.BOS(), tq.EOS(), tq.PAD(), tq.UNK())
	}
	if got, want := tq.EOSIDs(), []int{n + 2, n, n + 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("tiny-qwen: EOSIDs %v, want %v", got, want)
	}
	if !tq.AddBOS() || tq.AddEOS() {
		t.Errorf("tiny-qwen: AddBOS %v AddEOS %v, want true false (from the template)", tq.AddBOS(), tq.AddEOS())
	}
	if tq.ChatTemplate() != "{{ messages }}" {
		t.Errorf("tiny-qwen: chat template %q, want the one named default", tq.ChatTemplate())
	}
	if !tq.IsSpecial(n+1) || tq.IsSpecial(n+3) {
		t.Errorf("tiny-qwen: IsSpecial(<|im_start|>) %v IsSpecial(<think>) %v", tq.IsSpecial(n+1), tq.IsSpecial(n+3))
	}

	tl := loadT(t, "testdata/tiny-llama3")
	if tl.Pre() != "llama-bpe" || tl.BOS() != n || tl.EOS() != n+2 || !tl.AddBOS() {
		t.Errorf("tiny-llama3: pre %q bos %d eos %d addBOS %v", tl.Pre(), tl.BOS(), tl.EOS(), tl.AddBOS())
	}
	if got, want := tl.EOSIDs(), []int{n + 2, n + 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("tiny-llama3: EOSIDs %v, want %v", got, want)
	}
	tg := loadT(t, "testdata/tiny-gpt2")
	if tg.Pre() != "gpt-2" || tg.AddBOS() {
		t.Errorf("tiny-gpt2: pre %q addBOS %v", tg.Pre(), tg.AddBOS())
	}
	ts := loadT(t, stories260k)
	if ts.Kind() != SentencePiece || ts.Pre() != "default" || ts.BOS() != 1 || ts.EOS() != 2 || ts.UNK() != 0 || !ts.AddBOS() || ts.VocabSize() != 512 {
		t.Errorf("stories260k: kind %v pre %q bos %d eos %d unk %d addBOS %v vocab %d",
			ts.Kind(), ts.Pre(), ts.BOS(), ts.EOS(), ts.UNK(), ts.AddBOS(), ts.VocabSize())
	}
}
