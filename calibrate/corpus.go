package calibrate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/gquant/gquant/formats/tokenizer"
)

// Chunking says how a tokenized corpus is cut into evaluation chunks (see the package
// comment).
type Chunking struct {
	// Ctx is the chunk length in tokens (> 0).
	Ctx int
	// Tokens limits the total number of tokens evaluated (0: every full chunk of the corpus).
	// A corpus with fewer tokens is an error.
	Tokens int
	// Seed ≠ 0 samples Tokens/Ctx full chunks at random instead of taking the head of the
	// corpus.
	Seed uint64
}

// plan returns where the chunks of a stream of n tokens start and where the head that
// Tokens takes ends (want; without a seed the last chunk ends there).
func (c Chunking) plan(n int, corpus string) (starts []int, want int, err error) {
	if c.Ctx <= 0 {
		return nil, 0, fmt.Errorf("%s: ctx: %d is not a chunk length", corpus, c.Ctx)
	}
	if c.Tokens < 0 {
		return nil, 0, fmt.Errorf("%s: tokens: %d is negative", corpus, c.Tokens)
	}
	want = c.Tokens
	if want == 0 {
		want = n / c.Ctx * c.Ctx
	}
	if want == 0 || n < want {
		if c.Tokens == 0 {
			return nil, 0, fmt.Errorf("%s: the corpus has %d tokens, fewer than one chunk of %d", corpus, n, c.Ctx)
		}
		return nil, 0, fmt.Errorf("%s: the corpus has %d tokens, fewer than the %d asked for", corpus, n, want)
	}
	if c.Seed != 0 {
		full := n / c.Ctx
		k := want / c.Ctx
		if want%c.Ctx != 0 {
			return nil, 0, fmt.Errorf("%s: tokens: %d is not a multiple of ctx %d, which sampling needs", corpus, want, c.Ctx)
		}
		r := rand.New(rand.NewPCG(c.Seed, 0x9e3779b97f4a7c15))
		perm := r.Perm(full)[:k]
		slices.Sort(perm)
		for _, p := range perm {
			starts = append(starts, p*c.Ctx)
		}
		return starts, want, nil
	}
	for s := 0; s < want; s += c.Ctx {
		starts = append(starts, s)
	}
	return starts, want, nil
}

// chunker cuts a token stream into chunks of ctx tokens as it arrives, so that the tokens
// are held once, in the chunks that Calibrate evaluates.
type chunker struct {
	ctx    int
	n      int // tokens taken
	chunks [][]int
}

func (k *chunker) add(ids []int32) {
	for _, id := range ids {
		if k.n%k.ctx == 0 {
			k.chunks = append(k.chunks, make([]int, 0, k.ctx))
		}
		last := &k.chunks[len(k.chunks)-1]
		*last = append(*last, int(id))
		k.n++
	}
}

// take returns the first m > 0 chunks, the last cut to end tokens of the stream, with bos ≥ 0
// over the first token of each.
func (k *chunker) take(m, end, bos int) [][]int {
	clear(k.chunks[m:]) // tokens read past the head
	chunks := k.chunks[:m]
	chunks[m-1] = chunks[m-1][:end-(m-1)*k.ctx]
	for _, ch := range chunks {
		if bos >= 0 {
			ch[0] = bos
		}
	}
	return chunks
}

// Tokenizer is what a corpus is tokenized with: *tokenizer.Tokenizer, whose Encoder lets
// ReadCorpus and ReadTokens tokenize the file as they read it; with any other the whole text
// is kept and encoded at once.
type Tokenizer interface {
	Encode(text string, addSpecial bool) []int
	BOS() int
	AddBOS() bool
}

// Corpus is a calibration corpus as ReadCorpus leaves it.
type Corpus struct {
	// SHA256 is the hex SHA-256 of the whole file.
	SHA256 string
	// Chunks are the chunks of the corpus's token stream (see scanCorpus) that c asks for.
	Chunks [][]int
}

// ReadCorpus reads the corpus at path (UTF-8 text) and returns the chunks that c cuts from its
// token stream (a BOS when the tokenizer adds one, then tok.Encode(text, false)), bos ≥ 0
// over the first token of each, keeping only the tokens they need: it tokenizes
// the file as it reads it and, without a seed, stops tokenizing once it has Tokens tokens
// (it keeps every token when Tokens is 0). With a seed it reads the file twice: the first
// pass counts the tokens, so that the sample is drawn from the whole stream (plan), the second
// keeps the sampled chunks. The whole file is always read, checked and hashed.
func ReadCorpus(path string, tok Tokenizer, c Chunking, bos int) (*Corpus, error) {
	if c.Ctx <= 0 || c.Tokens < 0 {
		_, _, err := c.plan(0, path) // no chunking: plan says why
		return nil, err
	}
	if c.Seed == 0 || c.Tokens == 0 {
		limit := 0 // every token
		if c.Seed == 0 && c.Tokens > 0 {
			limit = c.Tokens
		}
		k := &chunker{ctx: c.Ctx}
		sum, err := scanCorpus(path, tok, false, func(ids []int32) bool {
			k.add(ids)
			return limit == 0 || k.n < limit
		})
		if err != nil {
			return nil, err
		}
		// A head of at least Tokens tokens gives the chunks of the whole stream: the first
		// ones, the last ending at want.
		starts, want, err := c.plan(k.n, path)
		if err != nil {
			return nil, err
		}
		return &Corpus{SHA256: sum, Chunks: k.take(len(starts), want, bos)}, nil
	}

	sum, n, err := countCorpus(path, tok)
	if err != nil {
		return nil, err
	}
	starts, _, err := c.plan(n, path)
	if err != nil {
		return nil, err
	}
	k := &chunker{ctx: c.Ctx} // the sampled chunks only
	pos, next := 0, 0         // stream position; the sampled chunk at or after it
	again, err := scanCorpus(path, tok, false, func(ids []int32) bool {
		for i := range ids {
			for next < len(starts) && pos >= starts[next]+c.Ctx {
				next++
			}
			if next == len(starts) {
				return false
			}
			if pos >= starts[next] {
				k.add(ids[i : i+1])
			}
			pos++
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if again != sum || k.n != len(starts)*c.Ctx {
		return nil, fmt.Errorf("%s: the file changed while it was read", path)
	}
	return &Corpus{SHA256: sum, Chunks: k.take(len(starts), k.n, bos)}, nil
}

// countCorpus reads the corpus at path and returns its SHA-256 and the length of its token
// stream (ReadCorpus's), keeping no token.
func countCorpus(path string, tok Tokenizer) (string, int, error) {
	n := 0
	sum, err := scanCorpus(path, tok, false, func(ids []int32) bool { n += len(ids); return true })
	return sum, n, err
}

// ReadTokens reads the corpus at path (UTF-8 text) and returns the head of its token stream
// as llama-perplexity tokenizes it, tok.Encode(text, true): at least limit tokens when the
// corpus has them (0: all of them). It tokenizes the file as it reads it and stops once it
// has limit tokens; the whole file is still read and checked.
func ReadTokens(path string, tok Tokenizer, limit int) ([]int, error) {
	var stream []int
	if _, err := scanCorpus(path, tok, true, func(ids []int32) bool {
		for _, id := range ids {
			stream = append(stream, int(id))
		}
		return limit <= 0 || len(stream) < limit
	}); err != nil {
		return nil, err
	}
	return stream, nil
}

// corpusBlock is the size of the reads of a corpus.
const corpusBlock = 64 << 10

// textEncoder is a tokenizer.Encoder, or wholeText for other tokenizers.
type textEncoder interface {
	Write(dst []int32, p []byte) []int32
	Close(dst []int32) []int32
}

// wholeText keeps the text and encodes it at Close.
type wholeText struct {
	tok     Tokenizer
	special bool
	text    []byte
}

func (w *wholeText) Write(dst []int32, p []byte) []int32 {
	w.text = append(w.text, p...)
	return dst
}

func (w *wholeText) Close(dst []int32) []int32 {
	for _, id := range w.tok.Encode(string(w.text), w.special) {
		dst = append(dst, int32(id))
	}
	w.text = nil
	return dst
}

// scanCorpus reads the corpus at path in blocks, checks that it is text (UTF-8 without NUL
// bytes) and hashes it, and passes its token stream to keep, a slice at a time (valid during
// the call), until keep returns false; the rest of the file is still read, checked and
// hashed, not tokenized. The stream is tok.Encode(text, true) when special is set, else
// Tokenize's: a BOS when the tokenizer adds one, then tok.Encode(text, false). It returns the
// hex SHA-256 of the file.
func scanCorpus(path string, tok Tokenizer, special bool, keep func([]int32) bool) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var enc textEncoder = &wholeText{tok: tok, special: special}
	if s, ok := tok.(interface {
		NewEncoder(addSpecial bool) *tokenizer.Encoder
	}); ok {
		enc = s.NewEncoder(special)
	}
	var ids []int32
	if !special && tok.AddBOS() && tok.BOS() >= 0 {
		ids = append(ids, int32(tok.BOS()))
	}
	more := true // keep wants more tokens
	h := sha256.New()
	var chk textCheck
	buf := make([]byte, corpusBlock)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if off, what := chk.check(buf[:n]); what != "" {
				return "", fmt.Errorf("%s: %s at byte %d", path, what, off)
			}
			h.Write(buf[:n])
			if more {
				if ids = enc.Write(ids, buf[:n]); len(ids) > 0 {
					more = keep(ids)
					ids = ids[:0]
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", rerr
		}
	}
	if off, what := chk.end(); what != "" {
		return "", fmt.Errorf("%s: %s at byte %d", path, what, off)
	}
	if more {
		if ids = enc.Close(ids); len(ids) > 0 {
			keep(ids)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CheckText applies the corpus reader's text check to a file held whole (path names it):
// "<path>: not UTF-8 text at byte N" or "... not text (a NUL byte, binary data) at byte N".
func CheckText(path string, b []byte) error {
	var c textCheck
	off, what := c.check(b)
	if what == "" {
		off, what = c.end()
	}
	if what != "" {
		return fmt.Errorf("%s: %s at byte %d", path, what, off)
	}
	return nil
}

// textCheck checks that a file read in blocks is text: UTF-8 without NUL bytes.
type textCheck struct {
	off  int64  // bytes checked, pend excluded
	pend []byte // the start of a character cut by the end of the last block
}

const (
	notUTF8 = "not UTF-8 text"
	hasNUL  = "not text (a NUL byte, binary data)"
)

// check checks the next block; it returns the offset of the first byte that is not text and
// why, or "".
func (c *textCheck) check(b []byte) (int64, string) {
	if len(c.pend) > 0 {
		k := min(len(b), utf8.UTFMax-len(c.pend))
		r := append(c.pend, b[:k]...)
		if !utf8.FullRune(r) {
			c.pend = r
			return 0, ""
		}
		x, size := utf8.DecodeRune(r)
		if x == utf8.RuneError && size == 1 {
			return c.off, notUTF8
		}
		b = b[size-len(c.pend):]
		c.off += int64(size)
		c.pend = c.pend[:0]
	}
	// Hold back a character the block cuts.
	body := b
	for k := 1; k <= min(utf8.UTFMax-1, len(b)); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				body = b[:len(b)-k]
			}
			break
		}
	}
	if utf8.Valid(body) && bytes.IndexByte(body, 0) < 0 {
		c.off += int64(len(body))
		c.pend = append(c.pend[:0], b[len(body):]...)
		return 0, ""
	}
	for i := 0; i < len(body); {
		if body[i] == 0 {
			return c.off + int64(i), hasNUL
		}
		r, size := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && size == 1 {
			return c.off + int64(i), notUTF8
		}
		i += size
	}
	panic("calibrate: textCheck found no fault in a faulty block")
}

// end reports a character left cut at the end of the file.
func (c *textCheck) end() (int64, string) {
	if len(c.pend) > 0 {
		return c.off, notUTF8
	}
	return 0, ""
}
