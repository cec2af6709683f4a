package verify

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// identity gives a model's architecture and dimensions as statistics record them
// (arch.StatsModel's tensor digest) and in words; "" for a model that cannot say.
func identity(m Model) (digest, desc string) {
	rt, ok := m.(*rtModel)
	if !ok {
		return "", ""
	}
	sm, err := arch.StatsModel("", rt.m.Spec())
	if err != nil {
		return "", ""
	}
	id := sm.ID
	return id.TensorsSHA256, fmt.Sprintf("%s, %d layers, hidden %d, vocab %d", id.Family, id.Layers, id.Hidden, id.Vocab)
}

// Tokenizer is what verify needs from a model's tokenizer (*tokenizer.Tokenizer has it).
type Tokenizer interface {
	// Encode tokenizes text; with addSpecial the BOS (and whatever the template adds) is added.
	Encode(text string, addSpecial bool) []int
	BOS() int
	// AddBOS reports whether the tokenizer adds BOS to a sequence (llama.cpp's add_bos).
	AddBOS() bool
	IsEOS(id int) bool
}

// Model is what verify drives: one sequence at a time, with optional capture of the hidden state
// after every block, or several decoding together (greedy continuations). OpenRuntime gives one backed by gquant's runtime.
type Model interface {
	Path() string
	Vocab() int
	Layers() int
	// Context is the longest sequence the model takes (its context length).
	Context() int
	Tokenizer() Tokenizer
	// BPW returns bits per weight over all tensors and over the linear layers only.
	BPW() (all, linear float64)
	// Begin starts a new sequence of at most maxTokens tokens.
	Begin(maxTokens int)
	// BeginSeqs starts n sequences of at most maxTokens tokens each (Begin's is another),
	// replacing those of an earlier call. EvalSeq appends tokens to sequence i and returns the
	// logits of its last position; EvalSeqs appends tokens[k] to sequence seqs[k] for every k
	// (distinct sequences), all evaluated together, and returns the logits of each new position
	// (len(seqs)×Vocab, row k for seqs[k]).
	BeginSeqs(n, maxTokens int)
	EvalSeq(i int, tokens []int) ([]float32, error)
	EvalSeqs(seqs, tokens []int) ([]float32, error)
	// Eval appends tokens to the sequence. It returns the logits of every new position
	// (len(tokens)×Vocab) when all is set, else those of the last. With capture, hidden[l] holds
	// the hidden state after block l for the new positions (len(tokens)×dim, row-major), valid
	// until the next call.
	Eval(tokens []int, all, capture bool) (logits []float32, hidden [][]float32, err error)
	Close() error
}

// rtModel adapts *runtime.Model to Model.
type rtModel struct {
	m       *runtime.Model
	st      *runtime.State
	seqs    []*runtime.State // BeginSeqs's
	batch   []*runtime.State // EvalSeqs's, reused
	capture bool
	hidden  [][]float32
}

// OpenRuntime loads a model (HuggingFace folder or GGUF file) in gquant's runtime with threads
// workers (0: one per CPU).
func OpenRuntime(path string, threads int) (Model, error) {
	return OpenRuntimeMode(path, threads, kernels.ActDefault)
}

// OpenRuntimeMode is OpenRuntime with mode, how activations meet every weight matrix
// (runtime.Options.Mode; gquant verify --acts).
func OpenRuntimeMode(path string, threads int, mode kernels.ActMode) (Model, error) {
	a := &rtModel{}
	hooks := &runtime.Hooks{Activation: a.observe, Points: isBlockOut}
	m, err := runtime.Load(path, runtime.Options{Threads: threads, Hooks: hooks, Mode: mode})
	if err != nil {
		return nil, err
	}
	a.m = m
	a.hidden = make([][]float32, m.Spec().Layers)
	return a, nil
}

// isBlockOut reports whether a point is the residual stream after a block ("blk.N.out"), the
// only points verify observes.
func isBlockOut(name string) bool {
	return len(name) > len("blk..out") && strings.HasPrefix(name, "blk.") && strings.HasSuffix(name, ".out")
}

// observe keeps a copy of "blk.N.out" (the residual stream after block N) while capturing.
func (a *rtModel) observe(name string, x []float32, nTok, dim int) {
	if !a.capture || !isBlockOut(name) {
		return
	}
	l, err := strconv.Atoi(name[len("blk.") : len(name)-len(".out")])
	if err != nil || l < 0 || l >= len(a.hidden) {
		return
	}
	a.hidden[l] = append(a.hidden[l][:0], x[:nTok*dim]...)
}

func (a *rtModel) Path() string               { return a.m.Path() }
func (a *rtModel) Vocab() int                 { return a.m.Vocab() }
func (a *rtModel) Layers() int                { return a.m.Spec().Layers }
func (a *rtModel) Context() int               { return a.m.Context() }
func (a *rtModel) Tokenizer() Tokenizer       { return a.m.Tokenizer() }
func (a *rtModel) BPW() (all, linear float64) { return a.m.BPW() }

// Encodings counts a gqf file's activation encodings applied and present (runtime.Model).
func (a *rtModel) Encodings() (simulated, inFile int) { return a.m.Encodings() }
func (a *rtModel) Close() error                       { return a.m.Close() }

func (a *rtModel) Begin(maxTokens int) {
	if a.st == nil || a.st.Cap() < maxTokens {
		a.st = a.m.NewState(maxTokens)
	}
	a.st.Reset()
}

func (a *rtModel) BeginSeqs(n, maxTokens int) {
	for i := range n {
		if i == len(a.seqs) {
			a.seqs = append(a.seqs, nil)
		}
		if a.seqs[i] == nil || a.seqs[i].Cap() < maxTokens {
			a.seqs[i] = a.m.NewState(maxTokens)
		}
		a.seqs[i].Reset()
	}
	a.seqs = a.seqs[:n]
}

// seq returns BeginSeqs's sequence i.
func (a *rtModel) seq(i int) (*runtime.State, error) {
	if i < 0 || i >= len(a.seqs) {
		return nil, fmt.Errorf("%s: sequence %d of %d", a.m.Path(), i, len(a.seqs))
	}
	return a.seqs[i], nil
}

func (a *rtModel) EvalSeq(i int, tokens []int) ([]float32, error) {
	st, err := a.seq(i)
	if err != nil {
		return nil, err
	}
	return a.m.Eval(st, tokens, false)
}

func (a *rtModel) EvalSeqs(seqs, tokens []int) ([]float32, error) {
	a.batch = a.batch[:0]
	for _, i := range seqs {
		st, err := a.seq(i)
		if err != nil {
			return nil, err
		}
		a.batch = append(a.batch, st)
	}
	return a.m.EvalBatch(a.batch, tokens)
}

func (a *rtModel) Eval(tokens []int, all, capture bool) ([]float32, [][]float32, error) {
	if a.st == nil {
		return nil, nil, fmt.Errorf("%s: Eval before Begin", a.m.Path())
	}
	a.capture = capture
	for l := range a.hidden {
		a.hidden[l] = a.hidden[l][:0]
	}
	logits, err := a.m.Eval(a.st, tokens, all)
	a.capture = false
	if err != nil || !capture {
		return logits, nil, err
	}
	for l, h := range a.hidden {
		if len(h) == 0 {
			return nil, nil, fmt.Errorf("%s: blk.%d.out: the runtime reported no hidden state", a.m.Path(), l)
		}
	}
	return logits, a.hidden, nil
}
