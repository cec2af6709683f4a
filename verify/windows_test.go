package verify

import (
	"slices"
	"testing"
)

func TestWindowsProtocol(t *testing.T) {
	toks := make([]int, 37) // 4 windows of 8, a tail of 5 dropped
	for i := range toks {
		toks[i] = 100 + i
	}
	w, err := NewWindows(toks, 8, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if w.Chunks != 4 || len(w.Tokens) != 32 || w.First() != 4 || w.Scored() != 3 {
		t.Fatalf("chunks %d, tokens %d, first %d, scored %d; want 4, 32, 4, 3", w.Chunks, len(w.Tokens), w.First(), w.Scored())
	}
	if got, want := w.Window(2), []int{1, 117, 118, 119, 120, 121, 122, 123}; !slices.Equal(got, want) {
		t.Errorf("window 2 = %v, want %v", got, want)
	}
	if toks[16] != 116 {
		t.Error("Window modified the corpus tokens")
	}
	// Window 2, scored positions 4, 5, 6 predict the tokens at 5, 6, 7.
	for j, want := range []int{121, 122, 123} {
		if got := w.Next(2, j); got != want {
			t.Errorf("Next(2, %d) = %d, want %d", j, got, want)
		}
	}
	w, _ = NewWindows(toks, 8, 2, -1)
	if w.Chunks != 2 || w.Window(1)[0] != 108 {
		t.Errorf("chunks %d, first token %d: want 2 windows and no BOS substitution", w.Chunks, w.Window(1)[0])
	}
	if _, err := NewWindows(toks[:7], 8, 0, 1); err == nil {
		t.Error("fewer tokens than one window: want an error")
	}
}
