package verify

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeTok maps bytes to ids (mod vocab, avoiding 0–2); BOS 1, EOS 2.
type fakeTok struct{ v int }

func (f fakeTok) Encode(text string, addSpecial bool) []int {
	var ids []int
	if addSpecial {
		ids = append(ids, 1)
	}
	for _, b := range []byte(text) {
		ids = append(ids, 3+int(b)%(f.v-3))
	}
	return ids
}
func (fakeTok) BOS() int          { return 1 }
func (fakeTok) AddBOS() bool      { return true }
func (fakeTok) IsEOS(id int) bool { return id == 2 }

// fakeModel is a causal toy: the logits and hidden states at a position depend on its token and
// its position only; noise perturbs them deterministically.
type fakeModel struct {
	path         string
	vocab, nl, h int
	noise        float64
	max, pos     int
	seqs         []int // BeginSeqs's sequences: their positions
	seqMax       int
	evaluated    int // tokens evaluated in total
	steps        int // Eval, EvalSeq and EvalSeqs calls
	hidden       [][]float32
}

func (m *fakeModel) Path() string               { return m.path }
func (m *fakeModel) Vocab() int                 { return m.vocab }
func (m *fakeModel) Layers() int                { return m.nl }
func (m *fakeModel) Context() int               { return 1 << 20 }
func (m *fakeModel) Tokenizer() Tokenizer       { return fakeTok{m.vocab} }
func (m *fakeModel) BPW() (all, linear float64) { return 16 - 10*m.noise, 16 - 11*m.noise }
func (m *fakeModel) Close() error               { return nil }
func (m *fakeModel) Begin(max int)              { m.max, m.pos = max, 0 }

func (m *fakeModel) logit(tok, pos, v int) float32 {
	x := 4*math.Sin(0.37*float64(v*(tok+1))+0.11*float64(pos%7)) + 3*math.Cos(0.05*float64(v))
	return float32(x + m.noise*math.Cos(1.3*float64(v)+float64(tok)+0.7*float64(pos)))
}

func (m *fakeModel) BeginSeqs(n, max int) { m.seqs, m.seqMax = make([]int, n), max }

func (m *fakeModel) EvalSeq(i int, tokens []int) ([]float32, error) {
	return m.EvalSeqs(slices.Repeat([]int{i}, len(tokens)), tokens)
}

// EvalSeqs evaluates tokens[k] at the next position of sequence seqs[k], in order; a sequence
// may repeat (EvalSeq's tokens), the logits then being those of its last token only.
func (m *fakeModel) EvalSeqs(seqs, tokens []int) ([]float32, error) {
	m.steps++
	var out []float32
	for k, i := range seqs {
		if m.seqs[i] >= m.seqMax {
			return nil, fmt.Errorf("%s: sequence %d over capacity", m.path, i)
		}
		m.evaluated++
		if k == len(seqs)-1 || seqs[k+1] != i {
			for v := 0; v < m.vocab; v++ {
				out = append(out, m.logit(tokens[k], m.seqs[i], v))
			}
		}
		m.seqs[i]++
	}
	return out, nil
}

func (m *fakeModel) Eval(tokens []int, all, capture bool) ([]float32, [][]float32, error) {
	m.steps++
	if m.pos+len(tokens) > m.max {
		return nil, nil, fmt.Errorf("%s: over capacity", m.path)
	}
	m.evaluated += len(tokens)
	var out []float32
	m.hidden = make([][]float32, m.nl)
	for i, tok := range tokens {
		p := m.pos + i
		if all || i == len(tokens)-1 {
			for v := 0; v < m.vocab; v++ {
				out = append(out, m.logit(tok, p, v))
			}
		}
		for l := range m.hidden {
			for d := 0; d < m.h; d++ {
				x := math.Sin(float64(l+d+tok)) * (1 + m.noise*float64(l+1)*math.Cos(float64(d*p)))
				m.hidden[l] = append(m.hidden[l], float32(x))
			}
		}
	}
	m.pos += len(tokens)
	if !capture {
		return out, nil, nil
	}
	return out, m.hidden, nil
}

// fakeSetup writes placeholder model files and a corpus and returns options that open fakes:
// "ref" is exact, "test" perturbed by noise.
func fakeSetup(t *testing.T, noise float64) (Options, map[string]*fakeModel) {
	dir := t.TempDir()
	corpus := ""
	for i := 0; i < 40; i++ {
		corpus += fmt.Sprintf("story %d: the cat sat on the mat and looked at the %d birds.\n", i, i*7)
	}
	paths := map[string]string{"ref": "ref.bin", "test": "test.gguf", "corpus": "c.txt"}
	for k, name := range paths {
		paths[k] = filepath.Join(dir, name)
		os.WriteFile(paths[k], []byte(k+corpus), 0o644)
	}
	models := map[string]*fakeModel{}
	open := func(path string, threads int) (Model, error) {
		m := &fakeModel{path: path, vocab: 64, nl: 3, h: 8}
		if path == paths["test"] {
			m.noise = noise
		}
		models[path] = m
		return m, nil
	}
	return Options{Artifact: paths["test"], Ref: paths["ref"], Corpus: paths["corpus"], Ctx: 32, Gen: 8,
		Open: open}, models
}
