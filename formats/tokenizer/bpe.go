package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// merge is the result of merging a pair of tokens: the merge's rank (lower
// merges first) and the id of the merged token.
type merge struct {
	rank int32
	id   int32
}

// pairKey packs a pair of token ids into a map key.
func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpeModel is the BPE model of a tokenizer. It runs in one of two modes:
//
//   - rank mode (HF tokenizers' BPE): merges are looked up by the pair of
//     token ids, the lowest rank merges first, ties to the leftmost pair;
//     characters missing from the vocabulary become byte tokens (byte_fallback)
//     or the unknown token (fused when fuse_unk).
//   - score mode (llama.cpp's SentencePiece tokenizer, for a "llama" GGUF):
//     any two adjacent symbols whose concatenated text is a token merge, the
//     highest score first, ties to the leftmost; symbols that are not tokens
//     at the end become byte tokens.
type bpeModel struct {
	vocab  map[string]int32 // token text -> id (model vocabulary)
	merges map[uint64]merge // rank mode
	scores []float32        // score mode (by id)

	useScores    bool
	byteFallback bool
	fuseUnk      bool
	ignoreMerges bool
	unk          int32      // -1 when none
	byteIDs      [256]int32 // ids of <0xXX>, -1 when absent
}

// symbol is one node of the doubly linked list of a word being merged. It
// covers word[start:end] and is token id (-1: not a token, score mode only).
type symbol struct {
	start, end int32
	prev, next int32
	id         int32
}

// candidate is a pending merge of symbol pos with its right neighbour.
type candidate struct {
	prio float64 // rank, or minus the score: lower merges first
	pos  int32
	id   int32 // the merged token
	size int32 // bytes of the merged text (score mode stale check)
}

// candHeap is a binary min-heap of candidates ordered by (prio, pos).
type candHeap []candidate

func (h candHeap) less(i, j int) bool {
	if h[i].prio != h[j].prio {
		return h[i].prio < h[j].prio
	}
	return h[i].pos < h[j].pos
}

func (h *candHeap) push(c candidate) {
	*h = append(*h, c)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *candHeap) pop() candidate {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// encodeWord appends the token ids of one pre-tokenized word to out.
func (m *bpeModel) encodeWord(w string, out []int32) []int32 {
	if w == "" {
		return out
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return append(out, id)
		}
	}
	syms := m.initialSymbols(w)
	var h candHeap
	for i := 0; i+1 < len(syms); i++ {
		if c, ok := m.pair(w, syms, int32(i), int32(i+1)); ok {
			h.push(c)
		}
	}
	for len(h) > 0 {
		c := h.pop()
		left := &syms[c.pos]
		if left.start == left.end || left.next < 0 {
			continue
		}
		right := &syms[left.next]
		if m.useScores {
			if right.start == right.end || (left.end-left.start)+(right.end-right.start) != c.size {
				continue
			}
		} else if mg, ok := m.merges[pairKey(left.id, right.id)]; !ok || mg.id != c.id {
			continue
		}
		// merge right into left
		left.end = right.end
		left.id = c.id
		left.next = right.next
		right.start, right.end = 0, 0
		if left.next >= 0 {
			syms[left.next].prev = c.pos
		}
		if left.prev >= 0 {
			if nc, ok := m.pair(w, syms, left.prev, c.pos); ok {
				h.push(nc)
			}
		}
		if left.next >= 0 {
			if nc, ok := m.pair(w, syms, c.pos, left.next); ok {
				h.push(nc)
			}
		}
	}
	for i := int32(0); i >= 0 && int(i) < len(syms); i = syms[i].next {
		s := syms[i]
		if s.start == s.end {
			continue // only when the first symbol was merged away (never)
		}
		if s.id >= 0 {
			out = append(out, s.id)
			continue
		}
		// score mode: a symbol that is no token becomes byte tokens
		for k := s.start; k < s.end; k++ {
			if id := m.byteIDs[w[k]]; id >= 0 {
				out = append(out, id)
			} else if m.unk >= 0 {
				out = append(out, m.unk)
			}
		}
	}
	return out
}

// pair returns the merge candidate of symbols a and b (adjacent), if any.
func (m *bpeModel) pair(w string, syms []symbol, a, b int32) (candidate, bool) {
	sa, sb := &syms[a], &syms[b]
	if m.useScores {
		id, ok := m.vocab[w[sa.start:sb.end]]
		if !ok {
			return candidate{}, false
		}
		score := float32(0)
		if int(id) < len(m.scores) {
			score = m.scores[id]
		}
		return candidate{prio: -float64(score), pos: a, id: id, size: sb.end - sa.start}, true
	}
	if sa.id < 0 || sb.id < 0 {
		return candidate{}, false
	}
	mg, ok := m.merges[pairKey(sa.id, sb.id)]
	if !ok {
		return candidate{}, false
	}
	return candidate{prio: float64(mg.rank), pos: a, id: mg.id}, true
}

// initialSymbols splits a word into its first symbols: one per character,
// or per byte token for characters that are not in the vocabulary (rank
// mode with byte_fallback).
func (m *bpeModel) initialSymbols(w string) []symbol {
	syms := make([]symbol, 0, len(w))
	add := func(start, end, id int32) {
		n := int32(len(syms))
		syms = append(syms, symbol{start: start, end: end, prev: n - 1, next: n + 1, id: id})
	}
	for i := 0; i < len(w); {
		_, size := utf8.DecodeRuneInString(w[i:])
		ch := w[i : i+size]
		start, end := int32(i), int32(i+size)
		i += size
		id, ok := m.vocab[ch]
		switch {
		case ok:
			add(start, end, id)
		case m.useScores:
			add(start, end, -1)
		case m.byteFallback && m.allBytes(ch):
			for k := start; k < end; k++ {
				add(k, k+1, m.byteIDs[w[k]])
			}
		case m.unk >= 0:
			if n := len(syms); m.fuseUnk && n > 0 && syms[n-1].id == m.unk {
				syms[n-1].end = end
			} else {
				add(start, end, m.unk)
			}
		default:
			// HF drops a character it cannot represent when there is no unknown token.
		}
	}
	if n := len(syms); n > 0 {
		syms[n-1].next = -1
	}
	return syms
}

// allBytes reports whether every byte of s has a byte token.
func (m *bpeModel) allBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if m.byteIDs[s[i]] < 0 {
			return false
		}
	}
	return true
}

// setByteIDs finds the byte tokens <0x00>..<0xFF> in the vocabulary.
func (m *bpeModel) setByteIDs() {
	for b := 0; b < 256; b++ {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = id
		}
	}
}
