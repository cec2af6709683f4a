package verify

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/internal/filehash"
	"github.com/gquant/gquant/runtime"
)

// ProbeOptions configure NewProbe.
type ProbeOptions struct {
	Corpus  string // the probe's text (calibration text, never the evaluation's)
	Ctx     int    // tokens per window (0: DefaultCtx, or the model's shorter context)
	Chunks  int    // windows (0: as many as the corpus fills)
	Threads int    // runtime workers (0: one per CPU)
}

// Probe measures how far a model's output moves when one of its linear weights is replaced:
// the mean KL(model ‖ model with the weight replaced) over the scored positions of windows of
// a corpus, in Run's protocol (windows of Ctx tokens, BOS first, the second half scored) and
// with Run's KL. convert's --target-bpw allocation measures each weight's sensitivity with it.
//
// The model (a HuggingFace folder) runs block by block (runtime.Options.Blocks): the residual
// streams entering one block are kept, so that replacing a weight of block l runs blocks l …
// and the tail only, and weights asked for in model order move the kept block forward one
// block at a time. The token embedding (of a model whose output has its own weight) is
// replaced where the graph looks it up: a hook adds the difference of the new rows to the
// embedding's output. Memory: the windows' residual streams (tokens × hidden float32) and the
// reference logits of their scored positions (scored × vocab float32).
type Probe struct {
	m      *runtime.Model
	st     *runtime.State
	win    *Windows
	ref    [][]float32 // per window: the reference logits of the scored positions
	x      [][]float32 // per window: the residual stream entering block at (nil for block 0)
	at     int
	sha    string
	corpus string
	// delta, while the token embedding is replaced, is new − old per row (vocab × hidden);
	// toks and pos are the window being evaluated and the next position the hook sees.
	delta []float32
	toks  []int
	pos   int
}

// embedPoint is the graph point of the token embedding's lookup.
const embedPoint = "token_embd"

// embedHook adds the replaced embedding's rows to the lookup's output (see Probe).
func (p *Probe) embedHook(name string, x []float32, nTok, dim int) {
	if p.delta == nil || name != embedPoint {
		return
	}
	for i := 0; i < nTok; i++ {
		tok := p.toks[p.pos+i]
		row, d := x[i*dim:(i+1)*dim], p.delta[tok*dim:(tok+1)*dim]
		for j := range row {
			row[j] += d[j]
		}
	}
	p.pos += nTok
}

// NewProbe loads the model at path and computes its logits over the corpus windows.
func NewProbe(path string, o ProbeOptions) (*Probe, error) {
	sha, err := filehash.SHA256(o.Corpus)
	if err != nil {
		return nil, err
	}
	p := &Probe{sha: sha, corpus: filepath.Base(o.Corpus)}
	hooks := &runtime.Hooks{Activation: p.embedHook, Points: func(pt string) bool { return pt == embedPoint },
		Modifies: func(pt string) bool { return pt == embedPoint }}
	m, err := runtime.Load(path, runtime.Options{Threads: o.Threads, Blocks: true, Hooks: hooks})
	if err != nil {
		return nil, err
	}
	p.m = m
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	ctx := o.Ctx
	switch limit := m.Context(); {
	case ctx == 0:
		ctx = min(DefaultCtx, limit)
	case ctx > limit:
		return nil, fmt.Errorf("%s: --ctx %d exceeds the context length %d of %s", o.Corpus, ctx, limit, path)
	}
	tok := m.Tokenizer()
	toks, err := calibrate.ReadTokens(o.Corpus, tok, o.Chunks*ctx)
	if err != nil {
		return nil, err
	}
	bos := -1
	if tok.AddBOS() {
		bos = tok.BOS()
	}
	if p.win, err = NewWindows(toks, ctx, o.Chunks, bos); err != nil {
		return nil, fmt.Errorf("%s: %v", o.Corpus, err)
	}
	p.st = m.NewState(ctx)
	p.ref = make([][]float32, p.win.Chunks)
	for c := range p.ref {
		lg, err := p.logits(c, 0, nil)
		if err != nil {
			return nil, err
		}
		p.ref[c] = lg
	}
	p.x = make([][]float32, p.win.Chunks)
	ok = true
	return p, nil
}

// Windows describes the probe's windows: the corpus's file name and SHA-256, the window
// length and their number.
func (p *Probe) Windows() (corpus, sha256 string, ctx, chunks int) {
	return p.corpus, p.sha, p.win.Ctx, p.win.Chunks
}

// Close releases the model.
func (p *Probe) Close() error { return p.m.Close() }

// logits runs window c from block l (its residual stream x; nil from the tokens when l is 0)
// through the last block and the tail, and returns a copy of the scored positions' logits.
func (p *Probe) logits(c, l int, x []float32) ([]float32, error) {
	L := p.m.Spec().Layers
	toks := p.win.Window(c)
	p.toks, p.pos = toks, 0
	if l < L {
		p.st.Reset()
		out, err := p.m.EvalBlocks(p.st, toks, x, l, L)
		if err != nil {
			return nil, err
		}
		x = out
	}
	p.st.Reset()
	lg, err := p.m.EvalBlocks(p.st, toks, x, L, L)
	if err != nil {
		return nil, err
	}
	V, first := p.m.Vocab(), p.win.First()
	return append([]float32(nil), lg[first*V:(first+p.win.Scored())*V]...), nil
}

// layerOf is the block a weight belongs to (its GGUF name): the number of blocks for the
// output layer, 0 for the token embedding.
func (p *Probe) layerOf(name string) (int, error) {
	L := p.m.Spec().Layers
	switch {
	case name == "output.weight":
		return L, nil
	case name == "token_embd.weight" && !p.m.Spec().Tied:
		return 0, nil
	}
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i > 0 {
			if l, err := strconv.Atoi(rest[:i]); err == nil && l >= 0 && l < L {
				return l, nil
			}
		}
	}
	return 0, fmt.Errorf("%s: %s is not a linear weight of a block, the output or an untied token embedding", p.m.Path(), name)
}

// seek makes p.x the residual streams entering block l.
func (p *Probe) seek(l int) error {
	if l < p.at {
		p.at, p.x = 0, make([][]float32, p.win.Chunks)
	}
	for ; p.at < l; p.at++ {
		for c := range p.x {
			p.st.Reset()
			out, err := p.m.EvalBlocks(p.st, p.win.Window(c), p.x[c], p.at, p.at+1)
			if err != nil {
				return err
			}
			p.x[c] = out
		}
	}
	return nil
}

// KL replaces the weight name (GGUF name; rows × cols in the source's row order) by w,
// returns the mean KL(model ‖ model with w) over the scored positions of every window, and
// puts orig, the weight's own values, back. Weights asked for in model order cost one block
// each to move the kept streams forward.
func (p *Probe) KL(name string, w, orig []float32) (float64, error) {
	l, err := p.layerOf(name)
	if err != nil {
		return 0, err
	}
	if err := p.seek(l); err != nil {
		return 0, err
	}
	embd := name == "token_embd.weight"
	if embd {
		if len(w) != len(orig) || len(w) != p.m.Spec().Vocab*p.m.Spec().Hidden {
			return 0, fmt.Errorf("%s: %s: %d and %d values, want %d × %d", p.m.Path(), name, len(w), len(orig), p.m.Spec().Vocab, p.m.Spec().Hidden)
		}
		p.delta = make([]float32, len(w))
		for i := range w {
			p.delta[i] = w[i] - orig[i]
		}
		defer func() { p.delta = nil }()
	} else if err := p.m.ReplaceLinear(name, w); err != nil {
		return 0, err
	}
	V, n := p.m.Vocab(), p.win.Scored()
	var sum float64
	for c := range p.ref {
		lg, err := p.logits(c, l, p.x[c])
		if err != nil {
			return 0, err
		}
		for j := 0; j < n; j++ {
			x, y := p.ref[c][j*V:(j+1)*V], lg[j*V:(j+1)*V]
			kl, _, _ := softmaxKL(x, y, float64(x[Argmax(x)]), float64(y[Argmax(y)]))
			sum += kl
		}
	}
	if !embd {
		if err := p.m.ReplaceLinear(name, orig); err != nil {
			return 0, err
		}
	}
	kl := sum / float64(n*len(p.ref))
	if math.IsNaN(kl) || math.IsInf(kl, 0) {
		return 0, fmt.Errorf("%s: %s: the replaced weight gives a KL of %v", p.m.Path(), name, kl)
	}
	return kl, nil
}
