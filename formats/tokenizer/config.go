package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// configs holds the optional JSON files beside tokenizer.json.
type configs struct {
	tok, gen, model map[string]any
	dir             string
	// chatAlt is the chat template of chat_template.jinja (with the files of
	// additional_chat_templates/ as a list of named templates), or else of
	// chat_template.json: a string, a []any of {name, template}, or nil.
	chatAlt any
}

// readConfigs reads the optional files; a file that exists but does not
// parse is an error.
func readConfigs(dir string) (*configs, error) {
	c := &configs{dir: dir}
	read := func(name string) (map[string]any, error) {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		return m, nil
	}
	var err error
	if c.tok, err = read("tokenizer_config.json"); err != nil {
		return nil, err
	}
	if c.gen, err = read("generation_config.json"); err != nil {
		return nil, err
	}
	if c.model, err = read("config.json"); err != nil {
		return nil, err
	}
	if c.chatAlt, err = readChatTemplateFiles(dir); err != nil {
		return nil, err
	}
	return c, nil
}

// readChatTemplateFiles reads the chat template files that gguf-py's
// SpecialVocab reads when tokenizer_config.json has no chat_template:
// chat_template.jinja, with additional_chat_templates/*.jinja making a list of
// named templates ("default" first, then the others by file name), or else
// chat_template.json's "chat_template".
func readChatTemplateFiles(dir string) (any, error) {
	b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if err == nil {
		extra, _ := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
		if len(extra) == 0 {
			return string(b), nil
		}
		list := []any{map[string]any{"name": "default", "template": string(b)}}
		for _, f := range extra { // Glob sorts
			e, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			list = append(list, map[string]any{"name": strings.TrimSuffix(filepath.Base(f), ".jinja"), "template": string(e)})
		}
		return list, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	p := filepath.Join(dir, "chat_template.json")
	b, err = os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	return m["chat_template"], nil
}

// setChatTemplate takes the chat template as gguf-py's SpecialVocab does:
// tokenizer_config.json's chat_template when the key is there (even null),
// otherwise the template files; nothing when tokenizer_config.json is missing
// or an empty object (SpecialVocab stops at a falsy config). A list
// of named templates gives the default one and the others by name, with
// their names' characters other than ASCII letters and digits written "_".
func (t *Tokenizer) setChatTemplate(c *configs) {
	t.chatTemplate, t.chatTemplates = "", nil
	if len(c.tok) == 0 {
		return
	}
	v, ok := c.tok["chat_template"]
	if !ok {
		v = c.chatAlt
	}
	switch v := v.(type) {
	case string:
		t.chatTemplate = v
	case []any:
		for _, e := range v {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			tmpl, ok := m["template"].(string)
			name = strings.Map(func(r rune) rune {
				if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
					return r
				}
				return '_'
			}, name)
			if name == "" || !ok {
				continue
			}
			if name == "default" {
				t.chatTemplate = tmpl
				continue
			}
			if t.chatTemplates == nil {
				t.chatTemplates = map[string]string{}
			}
			t.chatTemplates[name] = tmpl
		}
	}
}

// intValue returns a JSON number as an int.
func intValue(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

// intList returns a JSON number or list of numbers.
func intList(v any) []int {
	if i, ok := intValue(v); ok {
		return []int{i}
	}
	var out []int
	if l, ok := v.([]any); ok {
		for _, e := range l {
			if i, ok := intValue(e); ok {
				out = append(out, i)
			}
		}
	}
	return out
}

// applyConfigs sets special ids, add_bos/add_eos, the chat template and the
// GGUF vocabulary size from the config files, as gguf-py's SpecialVocab
// does: tokenizer_config.json's token names first, then config.json's ids,
// then (gquant's addition) generation_config.json's.
func (t *Tokenizer) applyConfigs(c *configs, opts Options) error {
	tokPath := filepath.Join(c.dir, "tokenizer_config.json")
	ids := map[string]*int{"bos": &t.bos, "eos": &t.eos, "unk": &t.unk, "pad": &t.pad}
	for _, typ := range []string{"bos", "eos", "unk", "pad"} {
		v, ok := c.tok[typ+"_token"]
		if !ok || v == nil {
			continue
		}
		name, _ := v.(string)
		if m, ok := v.(map[string]any); ok {
			name, _ = m["content"].(string)
		}
		if name == "" {
			continue
		}
		id, ok := t.tokenID(name)
		if !ok {
			return fmt.Errorf("%s: %s_token: %q is not a token", tokPath, typ, name)
		}
		*ids[typ] = id
	}
	for _, typ := range []string{"bos", "eos", "pad"} {
		if *ids[typ] >= 0 {
			continue
		}
		// config.json: a single id only (gguf-py ignores lists); then
		// generation_config.json: the first id of a list.
		if id, ok := intValue(c.model[typ+"_token_id"]); ok && id >= 0 && id < len(t.tokens) {
			*ids[typ] = id
		} else if l := intList(c.gen[typ+"_token_id"]); len(l) > 0 && l[0] >= 0 && l[0] < len(t.tokens) {
			*ids[typ] = l[0]
		}
	}
	if t.unk < 0 && t.model.unk >= 0 {
		t.unk = int(t.model.unk)
	}
	// BOS/EOS from the post-processor template when still unknown.
	if n := len(t.template); n > 1 {
		if t.bos < 0 && t.template[0].ids != nil {
			t.bos = int(t.template[0].ids[0])
		}
		if t.eos < 0 && t.template[n-1].ids != nil {
			t.eos = int(t.template[n-1].ids[0])
		}
	}
	// End-of-generation ids: EOS, then generation_config's and config.json's lists.
	t.eosIDs = nil
	seen := map[int]bool{}
	addEOS := func(id int) {
		if id >= 0 && id < len(t.tokens) && !seen[id] {
			seen[id] = true
			t.eosIDs = append(t.eosIDs, id)
		}
	}
	addEOS(t.eos)
	for _, id := range intList(c.gen["eos_token_id"]) {
		addEOS(id)
	}
	for _, id := range intList(c.model["eos_token_id"]) {
		addEOS(id)
	}

	// add_bos/add_eos: from the template, overridden by tokenizer_config.json
	// (as transformers' Llama tokenizers rebuild their post-processor).
	n := len(t.template)
	t.addBOS = n > 1 && t.template[0].ids != nil && t.bos >= 0 && int(t.template[0].ids[0]) == t.bos
	t.addEOS = n > 1 && t.template[n-1].ids != nil && t.eos >= 0 && int(t.template[n-1].ids[0]) == t.eos
	cfgBOS, okB := c.tok["add_bos_token"].(bool)
	cfgEOS, okE := c.tok["add_eos_token"].(bool)
	if okB || okE {
		if okB {
			t.addBOS = cfgBOS && t.bos >= 0
		}
		if okE {
			t.addEOS = cfgEOS && t.eos >= 0
		}
		t.template = t.simpleTemplate()
	}
	// add_sep_token: gguf-py writes it only when tokenizer_config.json exists.
	t.addSep = nil
	if c.tok != nil {
		sep, _ := c.tok["sep_token"].(string)
		eos, _ := c.tok["eos_token"].(string)
		t.addSep = addSepFromPostProcessor(t.postProc, sep, eos)
		if v, ok := c.tok["add_sep_token"].(bool); ok {
			t.addSep = &v
		}
	}
	if v, ok := c.tok["add_prefix_space"].(bool); ok && t.kind == ByteLevel {
		t.addPrefix = &v
	} else if t.kind == ByteLevel {
		t.addPrefix = nil
	}

	t.setChatTemplate(c)

	// GGUF vocabulary size.
	t.ggufVocabSize = len(t.tokens)
	if vs, ok := intValue(c.model["vocab_size"]); ok && vs > 0 {
		t.ggufVocabSize = vs
	}
	if opts.VocabSize > 0 {
		t.ggufVocabSize = opts.VocabSize
	}
	if t.ggufVocabSize < len(t.tokens) {
		return fmt.Errorf("%s: vocab_size: %d is smaller than the tokenizer's %d tokens", c.dir, t.ggufVocabSize, len(t.tokens))
	}
	return nil
}

// simpleTemplate is [BOS] A [EOS] as addBOS and addEOS say.
func (t *Tokenizer) simpleTemplate() []templateItem {
	var tmpl []templateItem
	if t.addBOS {
		tmpl = append(tmpl, templateItem{ids: []int32{int32(t.bos)}})
	}
	tmpl = append(tmpl, templateItem{})
	if t.addEOS {
		tmpl = append(tmpl, templateItem{ids: []int32{int32(t.eos)}})
	}
	return tmpl
}
