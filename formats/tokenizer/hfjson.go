package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// hfFile is the part of tokenizer.json that is used.
type hfFile struct {
	AddedTokens   []addedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Model         hfModel         `json:"model"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
}

type hfModel struct {
	Type                    string          `json:"type"`
	Vocab                   map[string]int  `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
	UnkToken                *string         `json:"unk_token"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	Dropout                 *float64        `json:"dropout"`
}

// component is the generic shape of normalizers, pre-tokenizers, decoders
// and post-processors in tokenizer.json.
type component struct {
	Type string `json:"type"`
	// Sequence members
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`
	// Prepend, Replace, Split
	Prepend  string     `json:"prepend"`
	Pattern  *hfPattern `json:"pattern"`
	Content  *string    `json:"content"`
	Behavior string     `json:"behavior"`
	Invert   bool       `json:"invert"`
	// ByteLevel
	AddPrefixSpace *bool `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Metaspace
	Replacement   string  `json:"replacement"`
	PrependScheme *string `json:"prepend_scheme"`
	Split         *bool   `json:"split"`
	// Strip
	Start int `json:"start"`
	Stop  int `json:"stop"`
	// TemplateProcessing
	Single        []templateJSON             `json:"single"`
	Pair          []templateJSON             `json:"pair"`
	SpecialTokens map[string]templateSpecial `json:"special_tokens"`
	// RobertaProcessing, BertProcessing: [token, id]
	Sep []any `json:"sep"`
	Cls []any `json:"cls"`
}

type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type templateJSON struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type templateSpecial struct {
	ID  string `json:"id"`
	IDs []int  `json:"ids"`
}

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// shorten returns raw JSON cut to n bytes, for error messages.
func shorten(raw json.RawMessage, n int) string {
	s := string(raw)
	var v any
	if json.Unmarshal(raw, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			s = string(b)
		}
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// parseMerges accepts both merge forms: "left right" strings (split at the
// first space after the first byte, as llama.cpp does) and [left, right] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	// The form is that of the first entry: decoding the list as strings first
	// and as pairs after a failure would read a large list twice.
	pairsForm := false
	if s := strings.TrimLeft(string(raw), " \t\r\n"); strings.HasPrefix(s, "[") {
		pairsForm = strings.HasPrefix(strings.TrimLeft(s[1:], " \t\r\n"), "[")
	}
	var strs []string
	if pairsForm {
		// fall through to the pairs below
	} else if err := json.Unmarshal(raw, &strs); err == nil {
		out := make([][2]string, 0, len(strs))
		for i, s := range strs {
			k := -1
			if len(s) > 1 {
				k = strings.IndexByte(s[1:], ' ')
			}
			if k < 0 {
				return nil, fmt.Errorf("merge %d %q is not \"left right\"", i, s)
			}
			out = append(out, [2]string{s[:k+1], s[k+2:]})
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("merges are neither strings nor pairs of strings")
	}
	out := make([][2]string, 0, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("merge %d has %d parts, want 2", i, len(p))
		}
		out = append(out, [2]string{p[0], p[1]})
	}
	return out, nil
}

// parseNormalizer flattens a normalizer into steps.
func parseNormalizer(raw json.RawMessage, out []normOp) ([]normOp, error) {
	if isNull(raw) {
		return out, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		for _, n := range c.Normalizers {
			var err error
			if out, err = parseNormalizer(n, out); err != nil {
				return nil, err
			}
		}
	case "NFC":
		out = append(out, normOp{kind: normNFC})
	case "Prepend":
		out = append(out, normOp{kind: normPrepend, a: c.Prepend})
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || c.Content == nil {
			return nil, fmt.Errorf("unsupported Replace normalizer %s (only String patterns)", shorten(raw, 120))
		}
		out = append(out, normOp{kind: normReplace, a: *c.Pattern.String, b: *c.Content})
	default:
		return nil, fmt.Errorf("unsupported normalizer %s", shorten(raw, 120))
	}
	return out, nil
}

// errUnknownPre is returned for a pre-tokenizer that is not recognised.
type errUnknownPre struct{ json string }

func (e *errUnknownPre) Error() string {
	return "unknown pre-tokenizer " + e.json + "; pass --pre NAME with llama.cpp's tokenizer.ggml.pre name (for example llama-bpe, qwen2, gpt-2)"
}

// parsePreTokenizer flattens a pre-tokenizer into steps.
func parsePreTokenizer(raw json.RawMessage, out []preStep) ([]preStep, error) {
	if isNull(raw) {
		return out, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		for _, p := range c.Pretokenizers {
			var err error
			if out, err = parsePreTokenizer(p, out); err != nil {
				return nil, err
			}
		}
	case "Split":
		if c.Pattern != nil && c.Pattern.String != nil {
			b, ok := splitBehaviors[c.Behavior]
			if !ok {
				return nil, fmt.Errorf("Split: unknown behavior %q in %s", c.Behavior, shorten(raw, 200))
			}
			out = append(out, preStep{kind: preSplitString, delim: *c.Pattern.String, behavior: b, invert: c.Invert})
			break
		}
		if c.Pattern == nil || c.Pattern.Regex == nil || c.Behavior != "Isolated" || c.Invert {
			return nil, &errUnknownPre{shorten(raw, 200)}
		}
		k := splitKindOf(*c.Pattern.Regex)
		if k == 0 {
			return nil, &errUnknownPre{shorten(raw, 200)}
		}
		out = append(out, preStep{kind: preSplit, split: k})
	case "ByteLevel":
		st := preStep{kind: preByteLevel, useRegex: true}
		if c.UseRegex != nil {
			st.useRegex = *c.UseRegex
		}
		if c.AddPrefixSpace != nil {
			st.addPrefixSpace = *c.AddPrefixSpace
		}
		out = append(out, st)
	case "Metaspace":
		st := preStep{kind: preMetaspace, replacement: c.Replacement, splitMeta: true}
		if st.replacement == "" {
			st.replacement = "▁"
		}
		st.prepend = metaspaceScheme(c)
		if c.Split != nil {
			st.splitMeta = *c.Split
		}
		out = append(out, st)
	default:
		return nil, &errUnknownPre{shorten(raw, 200)}
	}
	return out, nil
}

// metaspaceScheme reads prepend_scheme, or the older add_prefix_space.
func metaspaceScheme(c component) prependScheme {
	if c.PrependScheme != nil {
		switch *c.PrependScheme {
		case "first":
			return prependFirst
		case "never":
			return prependNever
		}
		return prependAlways
	}
	if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
		return prependNever
	}
	return prependAlways
}

// parseDecoder flattens a decoder into steps.
func parseDecoder(raw json.RawMessage, out []decodeOp) ([]decodeOp, error) {
	if isNull(raw) {
		return out, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		for _, d := range c.Decoders {
			var err error
			if out, err = parseDecoder(d, out); err != nil {
				return nil, err
			}
		}
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || c.Content == nil {
			return nil, fmt.Errorf("unsupported Replace decoder %s", shorten(raw, 120))
		}
		out = append(out, decodeOp{kind: decReplace, from: *c.Pattern.String, to: *c.Content})
	case "ByteFallback":
		out = append(out, decodeOp{kind: decByteFallback})
	case "Fuse":
		out = append(out, decodeOp{kind: decFuse})
	case "Strip":
		r := ' '
		if c.Content != nil {
			rs := []rune(*c.Content)
			if len(rs) != 1 {
				return nil, fmt.Errorf("Strip decoder content %q is not one character", *c.Content)
			}
			r = rs[0]
		}
		out = append(out, decodeOp{kind: decStrip, content: r, start: c.Start, stop: c.Stop})
	case "ByteLevel":
		out = append(out, decodeOp{kind: decByteLevel})
	case "Metaspace":
		rep := []rune(c.Replacement)
		r := '▁'
		if len(rep) == 1 {
			r = rep[0]
		}
		out = append(out, decodeOp{kind: decMetaspace, replacement: r, prepend: metaspaceScheme(c)})
	default:
		return nil, fmt.Errorf("unsupported decoder %s", shorten(raw, 120))
	}
	return out, nil
}

// parsePostProcessor returns the single-sequence template of the
// post-processor (nil: nothing is added). tokID looks a token up by content.
func parsePostProcessor(raw json.RawMessage, tokID func(string) (int, bool)) ([]templateItem, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return nil, nil
	case "Sequence":
		var tmpl []templateItem
		for _, p := range c.Processors {
			t, err := parsePostProcessor(p, tokID)
			if err != nil {
				return nil, err
			}
			if t != nil {
				if tmpl != nil {
					return nil, fmt.Errorf("post_processor: more than one template in %s", shorten(raw, 120))
				}
				tmpl = t
			}
		}
		return tmpl, nil
	case "TemplateProcessing":
		var tmpl []templateItem
		for _, it := range c.Single {
			switch {
			case it.SpecialToken != nil:
				name := it.SpecialToken.ID
				var ids []int32
				if sp, ok := c.SpecialTokens[name]; ok && len(sp.IDs) > 0 {
					for _, id := range sp.IDs {
						ids = append(ids, int32(id))
					}
				} else if id, ok := tokID(name); ok {
					ids = []int32{int32(id)}
				} else {
					return nil, fmt.Errorf("post_processor: unknown special token %q", name)
				}
				tmpl = append(tmpl, templateItem{ids: ids})
			case it.Sequence != nil:
				tmpl = append(tmpl, templateItem{})
			}
		}
		return tmpl, nil
	case "RobertaProcessing", "BertProcessing":
		get := func(p []any) (templateItem, error) {
			if len(p) == 2 {
				if f, ok := p[1].(float64); ok {
					return templateItem{ids: []int32{int32(f)}}, nil
				}
			}
			return templateItem{}, fmt.Errorf("post_processor: bad cls/sep in %s", shorten(raw, 120))
		}
		cls, err := get(c.Cls)
		if err != nil {
			return nil, err
		}
		sep, err := get(c.Sep)
		if err != nil {
			return nil, err
		}
		return []templateItem{cls, {}, sep}, nil
	}
	return nil, fmt.Errorf("unsupported post_processor %s", shorten(raw, 120))
}

// specialID is the id of a SpecialToken template item, "" for a sequence.
func (it templateJSON) specialID() string {
	if it.SpecialToken == nil {
		return ""
	}
	return it.SpecialToken.ID
}

// sequenceID is the id of a Sequence template item, "" for a special token.
func (it templateJSON) sequenceID() string {
	if it.Sequence == nil {
		return ""
	}
	return it.Sequence.ID
}

// addSepFromPostProcessor is gguf-py's SpecialVocab reading of the
// post-processor for add_sep_token: true for RobertaProcessing; for a
// TemplateProcessing, whether its pair template puts the separator or EOS
// token between the sequences A and B (its "crude parsing", followed step by
// step). sep and eos are tokenizer_config.json's sep_token and eos_token when
// they are strings ("" otherwise). nil: nothing to say.
func addSepFromPostProcessor(raw json.RawMessage, sep, eos string) *bool {
	if isNull(raw) {
		return nil
	}
	var c component
	if json.Unmarshal(raw, &c) != nil {
		return nil
	}
	procs := []component{c}
	if c.Type == "Sequence" {
		procs = procs[:0]
		for _, p := range c.Processors {
			var pc component
			if json.Unmarshal(p, &pc) == nil {
				procs = append(procs, pc)
			}
		}
	}
	var out *bool
	set := func(v bool) { out = &v }
	for _, p := range procs {
		switch p.Type {
		case "RobertaProcessing":
			set(true)
		case "TemplateProcessing":
			var first, last string
			if len(p.Single) > 1 {
				first, last = p.Single[0].specialID(), p.Single[len(p.Single)-1].specialID()
			}
			if last != "" {
				eos = last // SpecialVocab takes the template's last token as EOS
			}
			pair := p.Pair
			if len(pair) == 0 {
				continue
			}
			lo, hi := 0, len(pair)
			if first != "" && pair[0].specialID() == first {
				lo = 1
			}
			if last != "" && pair[len(pair)-1].specialID() == last {
				hi--
			}
			if lo >= hi {
				continue
			}
			pair = pair[lo:hi]
			if pair[0].sequenceID() != "A" || pair[len(pair)-1].sequenceID() != "B" || len(pair) < 3 {
				continue
			}
			mid := pair[1 : len(pair)-1]
			add := false
			isSep := func(id string) bool { return id != "" && (id == sep || id == eos) }
			if isSep(mid[0].specialID()) && last == "" {
				add = true
			}
			if len(mid) == 2 && isSep(mid[1].specialID()) {
				add = true
			}
			set(add)
		}
	}
	return out
}
