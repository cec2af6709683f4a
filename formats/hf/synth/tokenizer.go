package synth

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// defaultTokenizer holds the stories260k tokenizer files (see defaulttok/README.md).
//
//go:embed defaulttok/tokenizer.json defaulttok/tokenizer_config.json defaulttok/generation_config.json
var defaultTokenizer embed.FS

// tokenizerFiles are the files copied from the tokenizer source; only tokenizer.json is
// required.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"}

// tokenizer is what the generator takes from a tokenizer source.
type tokenizer struct {
	files      map[string][]byte // file name -> contents, for the files present
	size       int               // max token id + 1
	bos, eos   any               // token ids for config.json (int or list); nil when unknown
	sourceName string            // the source, for errors
}

// loadTokenizer reads the tokenizer files from dir, or the embedded default when dir is "".
func loadTokenizer(dir string) (*tokenizer, error) {
	var fsys fs.FS = defaultTokenizer
	root := "defaulttok"
	name := "default tokenizer (stories260k)"
	if dir != "" {
		fsys, root, name = os.DirFS(dir), ".", dir
	}
	tok := &tokenizer{files: map[string][]byte{}, sourceName: name}
	for _, f := range tokenizerFiles {
		b, err := fs.ReadFile(fsys, path.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) && f != "tokenizer.json" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(name, f), unwrap(err))
		}
		tok.files[f] = b
	}
	if err := tok.parse(); err != nil {
		return nil, err
	}
	return tok, nil
}

// tokenizerJSON is the part of tokenizer.json the generator reads.
type tokenizerJSON struct {
	Model struct {
		Vocab json.RawMessage `json:"vocab"` // BPE/WordPiece: {token: id}; Unigram: [[token, score], ...]
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
	} `json:"added_tokens"`
}

// parse finds the vocabulary size and the bos/eos ids.
func (t *tokenizer) parse() error {
	path := filepath.Join(t.sourceName, "tokenizer.json")
	var tj tokenizerJSON
	if err := json.Unmarshal(t.files["tokenizer.json"], &tj); err != nil {
		return fmt.Errorf("%s: not a tokenizer.json: %v", path, err)
	}
	ids := map[string]int{}
	var asMap map[string]int
	var asList [][2]any
	switch {
	case json.Unmarshal(tj.Model.Vocab, &asMap) == nil && asMap != nil:
		ids = asMap
	case json.Unmarshal(tj.Model.Vocab, &asList) == nil && asList != nil:
		for i, e := range asList {
			if s, ok := e[0].(string); ok {
				ids[s] = i
			}
		}
	default:
		return fmt.Errorf("%s: model.vocab: neither a map of ids nor a list of pieces", path)
	}
	for _, a := range tj.AddedTokens {
		ids[a.Content] = a.ID
	}
	for _, id := range ids {
		t.size = max(t.size, id+1)
	}
	if t.size == 0 {
		return fmt.Errorf("%s: model.vocab: empty", path)
	}

	// bos/eos: the tokenizer_config's tokens looked up in the vocabulary, else the ids of
	// generation_config.json.
	var tc, gc map[string]any
	if b, ok := t.files["tokenizer_config.json"]; ok {
		if err := json.Unmarshal(b, &tc); err != nil {
			return fmt.Errorf("%s: not valid JSON: %v", filepath.Join(t.sourceName, "tokenizer_config.json"), err)
		}
	}
	if b, ok := t.files["generation_config.json"]; ok {
		if err := json.Unmarshal(b, &gc); err != nil {
			return fmt.Errorf("%s: not valid JSON: %v", filepath.Join(t.sourceName, "generation_config.json"), err)
		}
	}
	t.bos = specialID(tc, gc, ids, "bos")
	t.eos = specialID(tc, gc, ids, "eos")
	return nil
}

// specialID resolves "<kind>_token" of the tokenizer config (a string or an AddedToken
// object) to an id, falling back on "<kind>_token_id" of the generation config.
func specialID(tc, gc map[string]any, ids map[string]int, kind string) any {
	tokenText := ""
	switch v := tc[kind+"_token"].(type) {
	case string:
		tokenText = v
	case map[string]any:
		tokenText, _ = v["content"].(string)
	}
	if id, ok := ids[tokenText]; ok && tokenText != "" {
		return id
	}
	switch v := gc[kind+"_token_id"].(type) {
	case float64:
		return int(v)
	case []any:
		out := make([]int, 0, len(v))
		for _, e := range v {
			if f, ok := e.(float64); ok {
				out = append(out, int(f))
			}
		}
		return out
	}
	return nil
}

// unwrap drops the *PathError wrapper, whose text repeats the path.
func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
