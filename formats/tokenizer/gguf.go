package tokenizer

import (
	"fmt"
	"strings"
)

// GGUF metadata keys (llama.cpp src/llama-arch.cpp).
const (
	KeyModel        = "tokenizer.ggml.model"
	KeyPre          = "tokenizer.ggml.pre"
	KeyTokens       = "tokenizer.ggml.tokens"
	KeyScores       = "tokenizer.ggml.scores"
	KeyTokenType    = "tokenizer.ggml.token_type"
	KeyMerges       = "tokenizer.ggml.merges"
	KeyBOS          = "tokenizer.ggml.bos_token_id"
	KeyEOS          = "tokenizer.ggml.eos_token_id"
	KeyEOT          = "tokenizer.ggml.eot_token_id"
	KeyEOM          = "tokenizer.ggml.eom_token_id"
	KeyUNK          = "tokenizer.ggml.unknown_token_id"
	KeyPAD          = "tokenizer.ggml.padding_token_id"
	KeyAddBOS       = "tokenizer.ggml.add_bos_token"
	KeyAddEOS       = "tokenizer.ggml.add_eos_token"
	KeyAddSep       = "tokenizer.ggml.add_sep_token"
	KeyAddPrefix    = "tokenizer.ggml.add_space_prefix"
	KeyChatTemplate = "tokenizer.chat_template"
	// KeyChatTemplates lists the named templates, each under
	// KeyChatTemplate + "." + name.
	KeyChatTemplates = "tokenizer.chat_templates"
)

// llamaEOGNames are the token texts that llama.cpp treats as end of
// generation by name (llama-vocab.cpp, load: special_eog_ids).
var llamaEOGNames = map[string]bool{
	"<|eot_id|>": true, "<|im_end|>": true, "<|end|>": true, "<|return|>": true,
	"<|call|>": true, "<|flush|>": true, "<|calls|>": true, "<end_of_turn>": true,
	"<|endoftext|>": true, "</s>": true, "<|eom_id|>": true, "<EOT>": true,
	"_<EOT>": true, "[EOT]": true, "[EOS]": true, "<|end_of_text|>": true,
	"<end_of_utterance>": true, "<eos>": true, "<turn|>": true,
	"<|tool_response>": true, "<｜end▁of▁sentence｜>": true, "[e~[": true,
}

// GGUFMetadata returns the tokenizer.ggml.* metadata as convert_hf_to_gguf.py
// writes it (_set_vocab_gpt2 for byte-level BPE; for SentencePiece-style BPE
// _set_vocab_sentencepiece, which Llama, Gemma 2 and Gemma 3 use when the
// model ships tokenizer.model, or _set_vocab_llama_hf; then gguf-py's
// SpecialVocab): added tokens are control (special, or looking special) or
// user-defined with ▁ written as a space, score -1000; byte tokens are byte;
// ids with no token are "[PADn]", unused, score -10000; add_sep_token as
// SpecialVocab reads it from the post-processor. The deliberate differences:
//   - SentencePiece scores: gquant reads tokenizer.json, not tokenizer.model,
//     and has no SentencePiece scores (convert_hf_to_gguf writes -1000 for
//     every token of a tokenizer.json-only model, which makes llama.cpp merge
//     in the wrong order). gquant writes score = -rank of the first merge
//     that makes the token, so that llama.cpp's score-ordered merging follows
//     the merge order exactly; tokens no merge makes get 0 (single
//     characters, bytes) or -(number of merges) (unreachable longer pieces).
//     For Llama 2 and Gemma the order is tokenizer.model's (its BPE pieces
//     score by their merge order), so llama.cpp tokenizes alike.
//   - The unknown token is type unknown (2) when it is no added token.
//   - add_bos_token and add_eos_token are always written, so that llama.cpp
//     adds what HF adds.
//   - generation_config.json may list several EOS ids; llama.cpp has one EOS
//     key and recognises end-of-generation tokens by name. Extra ids whose
//     text llama.cpp does not recognise are written as eot_token_id, then
//     eom_token_id (both end generation in llama.cpp), and typed control.
//
// The vocabulary is padded with "[PADn]" unused tokens to the model's
// vocab_size (config.json or Options.VocabSize).
func (t *Tokenizer) GGUFMetadata() ([]KV, error) {
	n := max(t.ggufVocabSize, len(t.tokens))
	tokens := make([]string, n)
	types := make([]int32, n)
	for id := 0; id < n; id++ {
		if id >= len(t.tokens) || t.tokType[id] == TypeUnused {
			tokens[id] = fmt.Sprintf("[PAD%d]", id)
			types[id] = TypeUnused
			continue
		}
		tokens[id] = t.tokens[id]
		types[id] = t.tokType[id]
		if types[id] == TypeUserDefined {
			// llama.cpp expects user-defined tokens pre-normalized.
			tokens[id] = strings.ReplaceAll(tokens[id], "▁", " ")
		}
	}
	if dup := duplicateToken(tokens); dup != "" {
		return nil, fmt.Errorf("%s: token %q appears twice; llama.cpp needs unique token texts", KeyTokens, dup)
	}

	var kvs []KV
	switch t.kind {
	case SentencePiece:
		kvs = append(kvs, kv(KeyModel, "llama"), kv(KeyPre, t.pre), kv(KeyTokens, tokens),
			kv(KeyScores, t.spmScores(n)), kv(KeyTokenType, types))
	case ByteLevel:
		kvs = append(kvs, kv(KeyModel, "gpt2"), kv(KeyPre, t.pre), kv(KeyTokens, tokens),
			kv(KeyTokenType, types), kv(KeyMerges, append([]string(nil), t.mergeList...)))
	default:
		return nil, fmt.Errorf("%s: unknown tokenizer kind", KeyModel)
	}

	// Special ids.
	for _, s := range []struct {
		key string
		id  int
	}{{KeyBOS, t.bos}, {KeyEOS, t.eos}, {KeyUNK, t.unk}, {KeyPAD, t.pad}} {
		if s.id >= 0 && s.id < n {
			kvs = append(kvs, kv(s.key, uint32(s.id)))
		}
	}
	extra := []string{KeyEOT, KeyEOM}
	for _, id := range t.eosIDs {
		if id == t.eos || llamaEOGNames[tokens[id]] {
			continue
		}
		if len(extra) == 0 {
			return nil, fmt.Errorf("%s: more end-of-generation ids %v than llama.cpp can store (eos, eot, eom)", KeyEOS, t.eosIDs)
		}
		kvs = append(kvs, kv(extra[0], uint32(id)))
		extra = extra[1:]
		if types[id] == TypeNormal || types[id] == TypeUserDefined {
			types[id] = TypeControl
		}
	}
	kvs = append(kvs, kv(KeyAddBOS, t.addBOS), kv(KeyAddEOS, t.addEOS))
	if t.addSep != nil {
		kvs = append(kvs, kv(KeyAddSep, *t.addSep))
	}
	if t.addPrefix != nil {
		kvs = append(kvs, kv(KeyAddPrefix, *t.addPrefix))
	}
	// gguf-py writes the named templates first, then the default one.
	if names := t.ChatTemplateNames(); len(names) > 0 {
		for _, n := range names {
			kvs = append(kvs, kv(KeyChatTemplate+"."+n, t.chatTemplates[n]))
		}
		kvs = append(kvs, kv(KeyChatTemplates, names))
	}
	if t.chatTemplate != "" {
		kvs = append(kvs, kv(KeyChatTemplate, t.chatTemplate))
	}
	return kvs, nil
}

// kv makes a metadata entry.
func kv(key string, value any) KV { return KV{Key: key, Value: value} }

// duplicateToken returns a token text that occurs twice, or "".
func duplicateToken(tokens []string) string {
	seen := make(map[string]bool, len(tokens))
	for _, s := range tokens {
		if seen[s] {
			return s
		}
		seen[s] = true
	}
	return ""
}

// Scores that convert_hf_to_gguf's _create_vocab_sentencepiece gives to the
// tokens that are not the SentencePiece model's own.
const (
	scoreAdded  = -1000  // added tokens (tokenizer_config.json's added_tokens_decoder)
	scoreUnused = -10000 // ids with no token ([PADn])
)

// spmScores derives SentencePiece scores from the merge ranks (see
// GGUFMetadata); added tokens score scoreAdded and ids with no token
// scoreUnused, as convert_hf_to_gguf writes them.
func (t *Tokenizer) spmScores(n int) []float32 {
	if t.model.useScores { // built from GGUF: keep the scores
		out := make([]float32, n)
		copy(out, t.model.scores)
		return out
	}
	scores := make([]float32, n)
	made := make([]bool, n)
	for _, mg := range t.model.merges {
		if !made[mg.id] || -float32(mg.rank) > scores[mg.id] {
			scores[mg.id] = -float32(mg.rank)
		}
		made[mg.id] = true
	}
	for id, s := range t.tokens {
		if made[id] || t.tokType[id] != TypeNormal || len([]rune(s)) <= 1 {
			continue
		}
		scores[id] = -float32(t.nMerges)
	}
	for _, a := range t.added {
		scores[a.ID] = scoreAdded
	}
	for id := range scores {
		if id >= len(t.tokType) || t.tokType[id] == TypeUnused {
			scores[id] = scoreUnused
		}
	}
	return scores
}

// FromGGUF builds a tokenizer from GGUF metadata as formats/gguf returns it
// (string, uint32, bool, []string, []float32, []int32; other integer types
// are accepted too). It follows llama.cpp: SentencePiece ("llama") merges by
// score, byte-level ("gpt2") by merge rank with the pre-tokenizer named by
// tokenizer.ggml.pre.
func FromGGUF(get func(key string) (any, bool)) (*Tokenizer, error) {
	str := func(key string) (string, error) {
		v, ok := get(key)
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s: has type %T, want string", key, v)
		}
		return s, nil
	}
	model, err := str(KeyModel)
	if err != nil {
		return nil, err
	}
	pre, err := str(KeyPre)
	if err != nil {
		return nil, err
	}
	v, ok := get(KeyTokens)
	if !ok {
		return nil, fmt.Errorf("%s: missing", KeyTokens)
	}
	tokens, ok := v.([]string)
	if !ok {
		return nil, fmt.Errorf("%s: has type %T, want []string", KeyTokens, v)
	}
	n := len(tokens)
	t := &Tokenizer{bos: -1, eos: -1, unk: -1, pad: -1, cache: map[string][]int32{},
		tokens: append([]string(nil), tokens...), ggufVocabSize: n, special: map[int]bool{}}
	t.tokType = make([]int32, n)
	for i := range t.tokType {
		t.tokType[i] = TypeNormal
	}
	if v, ok := get(KeyTokenType); ok {
		tt, ok := v.([]int32)
		if !ok || len(tt) < n {
			return nil, fmt.Errorf("%s: want []int32 of %d entries, have %T", KeyTokenType, n, v)
		}
		copy(t.tokType, tt)
	}
	t.model.vocab = make(map[string]int32, n)
	for id, s := range tokens {
		t.model.vocab[s] = int32(id)
	}
	t.model.unk = -1
	t.model.setByteIDs()

	ids := []struct {
		key string
		dst *int
	}{{KeyBOS, &t.bos}, {KeyEOS, &t.eos}, {KeyUNK, &t.unk}, {KeyPAD, &t.pad}}
	var eot, eom int = -1, -1
	ids = append(ids, struct {
		key string
		dst *int
	}{KeyEOT, &eot}, struct {
		key string
		dst *int
	}{KeyEOM, &eom})
	for _, s := range ids {
		v, ok := get(s.key)
		if !ok {
			continue
		}
		id, ok := toInt(v)
		if !ok {
			return nil, fmt.Errorf("%s: has type %T, want uint32", s.key, v)
		}
		if id < 0 || id >= n {
			return nil, fmt.Errorf("%s: %d is out of range (%d tokens)", s.key, id, n)
		}
		*s.dst = id
	}
	boolKey := func(key string, def bool) (bool, error) {
		v, ok := get(key)
		if !ok {
			return def, nil
		}
		b, ok := v.(bool)
		if !ok {
			return false, fmt.Errorf("%s: has type %T, want bool", key, v)
		}
		return b, nil
	}

	switch model {
	case "llama":
		t.kind = SentencePiece
		if pre == "" {
			pre = "default"
		}
		t.pre = pre
		t.model.useScores = true
		t.model.scores = make([]float32, n)
		if v, ok := get(KeyScores); ok {
			sc, ok := v.([]float32)
			if !ok || len(sc) < n {
				return nil, fmt.Errorf("%s: want []float32 of %d entries, have %T", KeyScores, n, v)
			}
			copy(t.model.scores, sc)
		}
		if t.unk < 0 {
			for id, ty := range t.tokType {
				if ty == TypeUnknown {
					t.unk = id
					break
				}
			}
		}
		if t.unk >= 0 {
			t.model.unk = int32(t.unk)
		}
		addPrefix, err := boolKey(KeyAddPrefix, true)
		if err != nil {
			return nil, err
		}
		t.addPrefix = &addPrefix
		t.normOps = []normOp{{kind: normReplace, a: " ", b: "▁"}}
		t.decodeOps = []decodeOp{{kind: decReplace, from: "▁", to: " "}, {kind: decByteFallback}, {kind: decFuse}}
		if addPrefix {
			t.normOps = append(t.normOps, normOp{kind: normPrepend, a: "▁"})
			t.decodeOps = append(t.decodeOps, decodeOp{kind: decStrip, content: ' ', start: 1})
		}
		if t.addBOS, err = boolKey(KeyAddBOS, true); err != nil {
			return nil, err
		}
	case "gpt2":
		t.kind = ByteLevel
		t.pre = pre
		steps, ok := preStepsFor(pre)
		if !ok {
			return nil, fmt.Errorf("%s: pre-tokenizer %q is not supported (supported: llama-bpe, llama3, qwen2, gpt-2 and their llama.cpp aliases)", KeyPre, pre)
		}
		t.preSteps = steps
		t.model.ignoreMerges = llama3Pre[pre]
		t.decodeOps = []decodeOp{{kind: decByteLevel}}
		v, ok := get(KeyMerges)
		if !ok {
			return nil, fmt.Errorf("%s: missing", KeyMerges)
		}
		ms, ok := v.([]string)
		if !ok {
			return nil, fmt.Errorf("%s: has type %T, want []string", KeyMerges, v)
		}
		pairs := make([][2]string, 0, len(ms))
		for i, s := range ms {
			k := -1
			if len(s) > 1 {
				k = strings.IndexByte(s[1:], ' ')
			}
			if k < 0 {
				return nil, fmt.Errorf("%s: entry %d %q is not \"left right\"", KeyMerges, i, s)
			}
			pairs = append(pairs, [2]string{s[:k+1], s[k+2:]})
		}
		if err := t.setMerges(pairs); err != nil {
			return nil, fmt.Errorf("%s: %v", KeyMerges, err)
		}
		if t.addBOS, err = boolKey(KeyAddBOS, llama3Pre[pre]); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: %q is not supported (only llama and gpt2)", KeyModel, model)
	}
	if t.addEOS, err = boolKey(KeyAddEOS, false); err != nil {
		return nil, err
	}
	if _, ok := get(KeyAddSep); ok {
		addSep, err := boolKey(KeyAddSep, false)
		if err != nil {
			return nil, err
		}
		t.addSep = &addSep
	}
	if t.addBOS && t.bos < 0 {
		return nil, fmt.Errorf("%s: true but %s is missing", KeyAddBOS, KeyBOS)
	}
	if t.addEOS && t.eos < 0 {
		return nil, fmt.Errorf("%s: true but %s is missing", KeyAddEOS, KeyEOS)
	}
	t.template = t.simpleTemplate()
	if t.chatTemplate, err = str(KeyChatTemplate); err != nil {
		return nil, err
	}
	if v, ok := get(KeyChatTemplates); ok {
		names, ok := v.([]string)
		if !ok {
			return nil, fmt.Errorf("%s: has type %T, want []string", KeyChatTemplates, v)
		}
		for _, n := range names {
			tmpl, err := str(KeyChatTemplate + "." + n)
			if err != nil {
				return nil, err
			}
			if t.chatTemplates == nil {
				t.chatTemplates = map[string]string{}
			}
			t.chatTemplates[n] = tmpl
		}
	}

	// Added tokens: llama.cpp matches control, user-defined and unknown
	// tokens in the text before tokenizing.
	var matchable []*addedToken
	for id, ty := range t.tokType {
		if ty == TypeControl || ty == TypeUserDefined || ty == TypeUnknown {
			a := &addedToken{ID: id, Content: tokens[id], Special: ty == TypeControl}
			matchable = append(matchable, a)
			t.added = append(t.added, a)
			if ty == TypeControl {
				t.special[id] = true
			}
		}
	}
	t.rawMatch = newAddedMatcher(matchable)

	// End of generation as llama.cpp decides it: eos, eot, eom and the
	// tokens it recognises by name.
	seen := map[int]bool{}
	for _, id := range []int{t.eos, eot, eom} {
		if id >= 0 && !seen[id] {
			seen[id] = true
			t.eosIDs = append(t.eosIDs, id)
		}
	}
	for id, s := range tokens {
		if llamaEOGNames[s] && !seen[id] {
			seen[id] = true
			t.eosIDs = append(t.eosIDs, id)
		}
	}
	return t, nil
}

// llama3Pre lists llama.cpp's pre-tokenizer names that use Llama-3's pattern
// with ignore_merges and add BOS by default.
var llama3Pre = map[string]bool{
	"llama3": true, "llama-v3": true, "llama-bpe": true, "falcon3": true, "falcon-h1": true,
	"pixtral": true, "midm-2.0": true, "lfm2": true, "jina-v5-nano": true,
}

// preStepsFor returns the pre-tokenizer of a llama.cpp pre-tokenizer name.
func preStepsFor(pre string) ([]preStep, bool) {
	var k splitKind
	switch {
	case llama3Pre[pre], pre == "dbrx", pre == "smaug-bpe":
		k = splitLlama3
	case pre == "qwen2", pre == "deepseek-r1-qwen", pre == "stablelm2", pre == "megrez", pre == "hunyuan":
		k = splitQwen2
	case pre == "gpt-2", pre == "phi-2", pre == "mpt", pre == "olmo", pre == "jais", pre == "exaone4":
		k = splitGPT2
	default:
		return nil, false
	}
	return []preStep{{kind: preSplit, split: k}, {kind: preByteLevel}}, true
}

// toInt accepts the integer types a GGUF reader may return.
func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case uint32:
		return int(x), true
	case int32:
		return int(x), true
	case uint64:
		return int(x), true
	case int64:
		return int(x), true
	case int:
		return x, true
	case uint16:
		return int(x), true
	case uint8:
		return int(x), true
	}
	return 0, false
}
