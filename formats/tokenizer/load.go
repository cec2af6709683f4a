package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Load reads tokenizer.json from dir, with tokenizer_config.json,
// generation_config.json, config.json and the chat template files
// (chat_template.jinja, additional_chat_templates/*.jinja, chat_template.json)
// when present.
func Load(dir string, opts Options) (*Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := parse(data, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	cfgs, err := readConfigs(dir)
	if err != nil {
		return nil, err
	}
	if err := t.applyConfigs(cfgs, opts); err != nil {
		return nil, err
	}
	return t, nil
}

// parse reads tokenizer.json's bytes.
func parse(data []byte, opts Options) (*Tokenizer, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	return fromHF(&f, opts)
}

// maxID bounds token ids, so that a corrupt file cannot ask for a huge table.
const maxID = 1 << 24

// fromHF builds the pipeline and vocabulary from tokenizer.json.
func fromHF(f *hfFile, opts Options) (*Tokenizer, error) {
	m := &f.Model
	if m.Type == "" && len(m.Merges) > 0 {
		m.Type = "BPE"
	}
	if m.Type != "BPE" {
		return nil, fmt.Errorf("model.type: %q is not supported (only BPE)", m.Type)
	}
	if (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") ||
		(m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, fmt.Errorf("model: continuing_subword_prefix/end_of_word_suffix are not supported")
	}
	if m.Dropout != nil && *m.Dropout > 0 {
		return nil, fmt.Errorf("model.dropout: %v is not supported", *m.Dropout)
	}
	t := &Tokenizer{bos: -1, eos: -1, unk: -1, pad: -1, cache: map[string][]int32{}}
	var err error
	if t.normOps, err = parseNormalizer(f.Normalizer, nil); err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	var unknownPre *errUnknownPre
	t.preSteps, err = parsePreTokenizer(f.PreTokenizer, nil)
	if errors.As(err, &unknownPre) && opts.Pre != "" {
		// The caller names the pre-tokenizer: use its splitter if known.
		steps, ok := preStepsFor(opts.Pre)
		if !ok {
			return nil, fmt.Errorf("pre_tokenizer: %v; and --pre %q has no implementation here to encode with", err, opts.Pre)
		}
		t.preSteps, err = steps, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %v", err)
	}
	if t.decodeOps, err = parseDecoder(f.Decoder, nil); err != nil {
		return nil, fmt.Errorf("decoder: %v", err)
	}

	// Kind and GGUF pre-tokenizer name.
	hasByteLevel, prepends := false, false
	var split splitKind
	for _, st := range t.preSteps {
		switch st.kind {
		case preByteLevel:
			hasByteLevel = true
			if st.useRegex && split == 0 {
				split = splitGPT2
			}
		case preSplit:
			split = st.split
		case preMetaspace:
			prepends = st.prepend != prependNever
		}
	}
	for _, op := range t.normOps {
		if op.kind == normPrepend && op.a == "▁" {
			prepends = true
		}
	}
	switch {
	case hasByteLevel:
		t.kind = ByteLevel
		t.pre = map[splitKind]string{splitGPT2: "gpt-2", splitLlama3: "llama-bpe", splitQwen2: "qwen2"}[split]
	case m.ByteFallback || prepends:
		t.kind = SentencePiece
		t.pre = "default"
	default:
		return nil, fmt.Errorf("pre_tokenizer: neither byte-level nor SentencePiece-style: %s; pass --pre NAME", shorten(f.PreTokenizer, 200))
	}
	if opts.Pre != "" {
		t.pre = opts.Pre
	}
	if t.pre == "" {
		return nil, &errUnknownPre{shorten(f.PreTokenizer, 200)}
	}
	t.addPrefix = &prepends

	// Vocabulary.
	n := 0
	for _, id := range m.Vocab {
		if id < 0 || id >= maxID {
			return nil, fmt.Errorf("model.vocab: id %d is out of range", id)
		}
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 || a.ID >= maxID {
			return nil, fmt.Errorf("added_tokens: id %d is out of range", a.ID)
		}
		n = max(n, a.ID+1)
	}
	t.tokens = make([]string, n)
	t.model.vocab = make(map[string]int32, len(m.Vocab))
	for s, id := range m.Vocab {
		if t.tokens[id] != "" {
			return nil, fmt.Errorf("model.vocab: id %d is used by %q and %q", id, t.tokens[id], s)
		}
		t.tokens[id] = s
		t.model.vocab[s] = int32(id)
	}
	t.special = map[int]bool{}
	for i := range f.AddedTokens {
		a := &f.AddedTokens[i]
		t.tokens[a.ID] = a.Content
		t.added = append(t.added, a)
		if a.Special {
			t.special[a.ID] = true
		}
	}
	sort.SliceStable(t.added, func(i, j int) bool { return t.added[i].ID < t.added[j].ID })
	var raw, norm []*addedToken
	for _, a := range t.added {
		if a.Normalized {
			norm = append(norm, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.rawMatch, t.normMatch = newAddedMatcher(raw), newAddedMatcher(norm)

	// Model.
	t.model.byteFallback = m.ByteFallback
	t.model.fuseUnk = m.FuseUnk
	t.model.ignoreMerges = m.IgnoreMerges
	t.model.unk = -1
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token: %q is not in the vocabulary", *m.UnkToken)
		}
		t.model.unk = int32(id)
	}
	t.model.setByteIDs()
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, fmt.Errorf("model.merges: %v", err)
	}
	if err := t.setMerges(merges); err != nil {
		return nil, fmt.Errorf("model.merges: %v", err)
	}

	t.postProc = f.PostProcessor
	t.template, err = parsePostProcessor(f.PostProcessor, t.tokenID)
	if err != nil {
		return nil, err
	}
	for _, it := range t.template {
		for _, id := range it.ids {
			if id < 0 || int(id) >= len(t.tokens) {
				return nil, fmt.Errorf("post_processor: special token id %d is out of range", id)
			}
		}
	}
	t.setTypes()
	return t, nil
}

// setMerges installs the merges (rank = position) and, unless t is
// SentencePiece-style (whose GGUF form has no merges), their GGUF strings.
func (t *Tokenizer) setMerges(merges [][2]string) error {
	t.model.merges = make(map[uint64]merge, len(merges))
	t.nMerges = len(merges)
	t.mergeList = nil
	if t.kind != SentencePiece {
		t.mergeList = make([]string, 0, len(merges))
	}
	var bad []string
	for rank, p := range merges {
		a, okA := t.model.vocab[p[0]]
		b, okB := t.model.vocab[p[1]]
		c, okC := t.model.vocab[p[0]+p[1]]
		if !okA || !okB || !okC {
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("%d %q+%q", rank, p[0], p[1]))
			}
			continue
		}
		k := pairKey(a, b)
		if _, dup := t.model.merges[k]; !dup {
			t.model.merges[k] = merge{rank: int32(rank), id: c}
		}
		if t.kind != SentencePiece {
			// GGUF merges: a space inside a part is written as U+0120 (gguf-py).
			enc := func(s string) string { return strings.ReplaceAll(s, " ", "\u0120") }
			t.mergeList = append(t.mergeList, enc(p[0])+" "+enc(p[1]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("merges with tokens missing from the vocabulary: %s", strings.Join(bad, ", "))
	}
	return nil
}

// tokenID looks a token up by text: added tokens first, then the vocabulary.
func (t *Tokenizer) tokenID(s string) (int, bool) {
	for _, a := range t.added {
		if a.Content == s {
			return a.ID, true
		}
	}
	if id, ok := t.model.vocab[s]; ok {
		return int(id), true
	}
	return 0, false
}

var byteTokenRE = regexp.MustCompile(`^<0x[0-9A-Fa-f]{2}>$`)

// looksSpecial is convert_hf_to_gguf's does_token_look_special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
		(strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>")) ||
		(strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">"))
}

// setTypes assigns GGUF token types as convert_hf_to_gguf does: added tokens
// are control (special, or looking special) or user-defined; SentencePiece
// byte tokens are byte, its unknown token unknown unless it is an added token
// (then control or user-defined, as _create_vocab_sentencepiece's pass over
// tokenizer_config.json's added_tokens_decoder makes it); ids without a token
// unused.
func (t *Tokenizer) setTypes() {
	t.tokType = make([]int32, len(t.tokens))
	for id := range t.tokens {
		t.tokType[id] = TypeUnused
	}
	for s, id := range t.model.vocab {
		t.tokType[id] = TypeNormal
		if t.kind == SentencePiece && byteTokenRE.MatchString(s) {
			t.tokType[id] = TypeByte
		}
	}
	for _, a := range t.added {
		if a.Special || looksSpecial(a.Content) {
			t.tokType[a.ID] = TypeControl
		} else {
			t.tokType[a.ID] = TypeUserDefined
		}
	}
	if t.kind == SentencePiece && t.model.unk >= 0 && t.tokType[t.model.unk] == TypeNormal {
		t.tokType[t.model.unk] = TypeUnknown
	}
}
