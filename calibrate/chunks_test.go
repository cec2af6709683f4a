package calibrate

import (
	"slices"

	"github.com/gquant/gquant/formats/tokenizer"
)

// The whole-text forms of what ReadCorpus streams: the oracle of its tests, as calibration
// tokenized a corpus before it was streamed.

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
	starts, want, err := c.plan(len(stream), corpus)
	if err != nil {
		return nil, err
	}
	return cut(stream, starts, c, want, bos), nil
}

// cut copies the chunks that start at starts out of stream: Ctx tokens each (a sample), or
// up to want (the head); bos ≥ 0 replaces the first token of each.
func cut(stream []int, starts []int, c Chunking, want, bos int) [][]int {
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
	return chunks
}
