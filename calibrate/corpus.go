package calibrate

import (
	"fmt"
	"math/rand/v2"
	"slices"

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

// Tokenize turns a corpus into the token stream llama-imatrix evaluates: the text without
// special tokens, after a BOS when the tokenizer adds one.
func Tokenize(tok *tokenizer.Tokenizer, text string) []int {
	ids := tok.Encode(text, false)
	if tok.AddBOS() && tok.BOS() >= 0 {
		ids = append([]int{tok.BOS()}, ids...)
	}
	return ids
}

// Chunks cuts the token stream into chunks as c says; bos ≥ 0 replaces the first token of
// every chunk (pass -1 for tokenizers that add no BOS). corpus names the corpus in errors.
func Chunks(stream []int, c Chunking, bos int, corpus string) ([][]int, error) {
	if c.Ctx <= 0 {
		return nil, fmt.Errorf("%s: ctx: %d is not a chunk length", corpus, c.Ctx)
	}
	if c.Tokens < 0 {
		return nil, fmt.Errorf("%s: tokens: %d is negative", corpus, c.Tokens)
	}
	n := len(stream)
	want := c.Tokens
	if want == 0 {
		want = n / c.Ctx * c.Ctx
	}
	if want == 0 || n < want {
		if c.Tokens == 0 {
			return nil, fmt.Errorf("%s: the corpus has %d tokens, fewer than one chunk of %d", corpus, n, c.Ctx)
		}
		return nil, fmt.Errorf("%s: the corpus has %d tokens, fewer than the %d asked for", corpus, n, want)
	}
	var starts []int
	if c.Seed != 0 {
		full := n / c.Ctx
		k := want / c.Ctx
		if want%c.Ctx != 0 {
			return nil, fmt.Errorf("%s: tokens: %d is not a multiple of ctx %d, which sampling needs", corpus, want, c.Ctx)
		}
		r := rand.New(rand.NewPCG(c.Seed, 0x9e3779b97f4a7c15))
		perm := r.Perm(full)[:k]
		slices.Sort(perm)
		for _, p := range perm {
			starts = append(starts, p*c.Ctx)
		}
	} else {
		for s := 0; s < want; s += c.Ctx {
			starts = append(starts, s)
		}
	}
	chunks := make([][]int, 0, len(starts))
	for _, s := range starts {
		e := min(s+c.Ctx, want)
		if c.Seed != 0 {
			e = s + c.Ctx
		}
		ch := slices.Clone(stream[s:e])
		if bos >= 0 {
			ch[0] = bos
		}
		chunks = append(chunks, ch)
	}
	return chunks, nil
}
