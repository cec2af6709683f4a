package verify

import "fmt"

// Windows cuts a tokenized corpus into llama-perplexity's evaluation windows: Chunks windows of
// Ctx consecutive tokens (the tail shorter than a window is dropped); the first token of each
// window is replaced by BOS when the tokenizer adds one; positions First … Ctx−2 of each window are
// scored, each predicting the token after it.
type Windows struct {
	Tokens []int // the corpus tokens, Chunks·Ctx of them (as llama-perplexity stores them)
	Ctx    int   // tokens per window
	Chunks int   // number of windows
	BOS    int   // BOS token id, or −1 when the tokenizer adds none
}

// NewWindows takes the first Chunks·ctx tokens of a tokenized corpus; chunks ≤ 0 means as many
// windows as the tokens fill. bos < 0 leaves the first token of each window as it is.
func NewWindows(tokens []int, ctx, chunks, bos int) (*Windows, error) {
	if ctx < 4 {
		return nil, fmt.Errorf("context %d is too short (at least 4 tokens)", ctx)
	}
	max := len(tokens) / ctx
	if max == 0 {
		return nil, fmt.Errorf("the corpus has %d tokens, fewer than one window of %d", len(tokens), ctx)
	}
	if chunks <= 0 || chunks > max {
		chunks = max
	}
	return &Windows{Tokens: tokens[:chunks*ctx], Ctx: ctx, Chunks: chunks, BOS: bos}, nil
}

// First is the first scored position of a window, Ctx/2.
func (w *Windows) First() int { return w.Ctx / 2 }

// Scored is the number of scored positions per window, Ctx − 1 − Ctx/2.
func (w *Windows) Scored() int { return w.Ctx - 1 - w.Ctx/2 }

// Window returns the tokens fed to the model for window c (a copy, BOS first).
func (w *Windows) Window(c int) []int {
	win := append([]int(nil), w.Tokens[c*w.Ctx:(c+1)*w.Ctx]...)
	if w.BOS >= 0 {
		win[0] = w.BOS
	}
	return win
}

// Next returns the token predicted at scored position j (0 ≤ j < Scored) of window c: the corpus
// token at window position First+j+1.
func (w *Windows) Next(c, j int) int { return w.Tokens[c*w.Ctx+w.First()+j+1] }
