package tokenizer

import (
	"sort"
	"sync"

	"github.com/gquant/gquant/formats/gguf"
)

// Kind is the family of a tokenizer, which decides its GGUF form.
type Kind int

const (
	// SentencePiece is SentencePiece-style BPE (▁ for spaces, byte
	// fallback); GGUF tokenizer.ggml.model "llama".
	SentencePiece Kind = iota + 1
	// ByteLevel is byte-level BPE (GPT-2, Llama-3, Qwen); GGUF model "gpt2".
	ByteLevel
)

// GGUF token types (llama.cpp's llama_token_type).
const (
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Options tune Load.
type Options struct {
	// Pre is the GGUF pre-tokenizer name (tokenizer.ggml.pre). Empty:
	// recognise it from tokenizer.json's pre-tokenizer. When given, it is
	// written as is; if tokenizer.json's pre-tokenizer is not one gquant
	// implements, Encode uses the splitter of this name (llama-bpe, qwen2,
	// gpt-2 and their llama.cpp aliases), as llama.cpp will.
	Pre string
	// VocabSize pads the GGUF vocabulary to this many tokens (the model's
	// embedding rows). 0: config.json's vocab_size when present, otherwise the
	// tokenizer's own size.
	VocabSize int
}

// KV is one GGUF metadata entry (formats/gguf's); Value is a plain Go value
// (string, uint32, bool, []string, []float32, []int32).
type KV = gguf.KV

// Tokenizer encodes text to token ids and back. It is safe for concurrent use.
type Tokenizer struct {
	kind Kind
	pre  string // GGUF pre-tokenizer name

	model bpeModel
	// tokens[id] is the text of a token: the vocabulary entry or the added
	// token's content; "" for ids that have neither.
	tokens []string
	// tokType[id] is the GGUF token type.
	tokType []int32
	// mergeList holds the merges in rank order as "left right" (GGUF form;
	// byte-level only), nMerges their number.
	mergeList []string
	nMerges   int

	added     []*addedToken // all added tokens, by id order
	special   map[int]bool  // ids of special added tokens
	rawMatch  *addedMatcher // added tokens matched before normalization
	normMatch *addedMatcher // added tokens matched after normalization
	normOps   []normOp
	preSteps  []preStep
	decodeOps []decodeOp
	template  []templateItem // post-processor (single sequence)
	addPrefix *bool          // tokenizer_config add_prefix_space, when given
	addSep    *bool          // add_sep_token as gguf-py's SpecialVocab finds it, when it does
	postProc  []byte         // tokenizer.json's post_processor, for applyConfigs

	bos, eos, unk, pad int
	eosIDs             []int
	addBOS, addEOS     bool
	chatTemplate       string
	chatTemplates      map[string]string // named templates besides the default, by name
	ggufVocabSize      int

	mu    sync.Mutex
	cache map[string][]int32
}

// templateItem is one item of a TemplateProcessing "single" template: the
// ids of a special token, or the sequence itself (ids == nil).
type templateItem struct {
	ids []int32
}

const maxCache = 1 << 16

// Kind returns the tokenizer's family.
func (t *Tokenizer) Kind() Kind { return t.kind }

// Pre returns the GGUF pre-tokenizer name (tokenizer.ggml.pre).
func (t *Tokenizer) Pre() string { return t.pre }

// VocabSize returns the number of token ids (the largest id plus one).
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS returns the beginning-of-sequence id, or -1.
func (t *Tokenizer) BOS() int { return t.bos }

// EOS returns the main end-of-sequence id, or -1.
func (t *Tokenizer) EOS() int { return t.eos }

// UNK returns the unknown-token id, or -1.
func (t *Tokenizer) UNK() int { return t.unk }

// PAD returns the padding id, or -1.
func (t *Tokenizer) PAD() int { return t.pad }

// EOSIDs returns every id that ends generation: EOS first, then the others
// (generation_config.json's eos_token_id list; from GGUF, llama.cpp's
// end-of-generation set).
func (t *Tokenizer) EOSIDs() []int { return append([]int(nil), t.eosIDs...) }

// IsEOS reports whether id ends generation.
func (t *Tokenizer) IsEOS(id int) bool {
	for _, e := range t.eosIDs {
		if e == id {
			return true
		}
	}
	return false
}

// AddBOS reports whether Encode with addSpecial puts BOS first.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial puts EOS last.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// ChatTemplate returns the Jinja chat template, or "".
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// ChatTemplateNames returns the names of the other chat templates
// (tokenizer_config.json's list of named templates, or
// additional_chat_templates/), sorted.
func (t *Tokenizer) ChatTemplateNames() []string {
	names := make([]string, 0, len(t.chatTemplates))
	for n := range t.chatTemplates {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NamedChatTemplate returns the chat template of that name, or "".
func (t *Tokenizer) NamedChatTemplate(name string) string { return t.chatTemplates[name] }

// Token returns the text of token id as stored in the vocabulary ("" when
// out of range).
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// IsSpecial reports whether id is a special (control) token.
func (t *Tokenizer) IsSpecial(id int) bool { return t.special[id] }

// Encode returns the token ids of text. Added and special tokens written
// literally in text are recognised (as HF does). With addSpecial, the
// post-processor's special tokens (BOS, EOS) are added.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	ids, _, _ := t.encodePiece(text, true, pieceEnd{}, false, nil)
	out := make([]int, 0, len(ids)+2)
	if !addSpecial || t.template == nil {
		for _, id := range ids {
			out = append(out, int(id))
		}
		return out
	}
	for _, it := range t.template {
		if it.ids == nil {
			for _, id := range ids {
				out = append(out, int(id))
			}
			continue
		}
		for _, id := range it.ids {
			out = append(out, int(id))
		}
	}
	return out
}

// pieceEnd says how a piece of text ended, for the piece that continues it
// (Encoder): inside a text segment between added tokens (seg), and then inside a
// normalized text piece (sub) rather than after an added token matched after
// normalization.
type pieceEnd struct{ seg, sub bool }

// encodePiece appends the ids of text, without the post-processor's tokens, to
// ids. Encode passes the whole text (atStart, prev zero). An Encoder passes the
// text in pieces cut where the tokens of the parts are those of the whole
// (see encoder.go): atStart for the first, and prev, the end of the piece
// before, for the others. It returns how text ends and, when tail is set,
// whether the last normalized piece ends as a cut needs under GPT-2's pattern.
func (t *Tokenizer) encodePiece(text string, atStart bool, prev pieceEnd, tail bool, ids []int32) ([]int32, pieceEnd, bool) {
	var end pieceEnd
	ok := true
	segs := t.rawMatch.split(text, 0, nil)
	for i, seg := range segs {
		lastSeg := i == len(segs)-1
		if seg.tok != nil {
			ids = append(ids, int32(seg.tok.ID))
			if lastSeg {
				end = pieceEnd{}
			}
			continue
		}
		contSeg := prev.seg && seg.start == 0 // continues the piece before's last segment
		norm := normalize(t.normOps, seg.text, contSeg)
		subs := t.normMatch.split(norm, seg.start, nil)
		for j, s2 := range subs {
			last := lastSeg && j == len(subs)-1
			if s2.tok != nil {
				ids = append(ids, int32(s2.tok.ID))
				if last {
					end = pieceEnd{seg: true}
				}
				continue
			}
			head := s2.start == seg.start
			glued := contSeg && head && prev.sub
			if last {
				end = pieceEnd{seg: true, sub: true}
				if tail {
					ok = t.gpt2Tail(s2.text, glued)
				}
			}
			ids = t.encodeText(s2.text, atStart && seg.start == 0 && head, glued, ids)
		}
		if len(subs) == 0 && lastSeg {
			end = pieceEnd{seg: true, sub: prev.sub && contSeg}
		}
	}
	return ids, end, ok
}

// encodeText pre-tokenizes one normalized piece and runs the model on its
// words, using the word cache (glued: see preTokenize).
func (t *Tokenizer) encodeText(s string, first, glued bool, out []int32) []int32 {
	if s == "" {
		return out
	}
	for _, w := range preTokenize(t.preSteps, s, first, glued, nil) {
		t.mu.Lock()
		cached, ok := t.cache[w]
		t.mu.Unlock()
		if ok {
			out = append(out, cached...)
			continue
		}
		start := len(out)
		out = t.model.encodeWord(w, out)
		if len(w) < 256 {
			t.mu.Lock()
			if len(t.cache) >= maxCache {
				t.cache = map[string][]int32{}
			}
			t.cache[w] = append([]int32(nil), out[start:]...)
			t.mu.Unlock()
		}
	}
	return out
}
