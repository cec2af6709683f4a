package runtime

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"sync"

	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/tokenizer"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/runtime/kernels"
)

// Model is a loaded model, ready to evaluate. Its weights are views of the mapped files:
// Close releases them.
type Model struct {
	spec  *arch.Spec
	tok   *tokenizer.Tokenizer
	path  string
	hooks *Hooks
	pool  *kernels.Pool
	ropes []*rope // one per table of the graph (arch.Graph.Ropes)
	// ropesLong are the tables with longrope's long factors (nil without longrope): a State
	// whose capacity exceeds the original context takes them, as llama.cpp does.
	ropesLong []*rope
	graph     *arch.Graph
	plan      *plan

	embd *embedding
	// mats and vecs are the weight matrices and the vectors (norms, biases), by GGUF name;
	// a tied output is mats["token_embd.weight"]. experts holds each stack of expert matrices
	// (GGUF name) as one matrix per expert, views of the stored bytes.
	mats    map[string]*kernels.Matrix
	vecs    map[string][]float32
	experts map[string][]*kernels.Matrix

	// dyn is a gqf file's run-time encoding of linear inputs (w4a8), nil for none;
	// dynInKernel marks the matrices whose kernels quantize their input that way themselves
	// (filled at load; compile turns it into each linear node's execNode.dynX).
	dyn         *gqf.Encoding
	dynInKernel map[*kernels.Matrix]bool

	bpwAll, bpwLinear float64
	weightBytes       int64
	// denseBytes is the weight bytes every evaluation reads whatever the tokens (weightBytes
	// without the experts); an evaluation reads its routed experts' on top (State.BytesRead).
	denseBytes int64
	// encTotal counts a gqf file's activation encodings, every one placed on a point of the
	// graph (placeEncodings).
	encTotal int

	// blocks: every step belongs to one block (Options.Blocks); released: the blocks
	// ReleaseBlock dropped.
	blocks   bool
	released map[int]bool
	// fileBacked marks the matrices whose data are the source file's mapped bytes.
	fileBacked map[*kernels.Matrix]bool

	mu     sync.Mutex // serialises Eval: the pool runs one job at a time
	close  func() error
	closed bool
}

// Load opens a model: a directory is a HuggingFace folder (config.json, tokenizer.json,
// *.safetensors), a file a GGUF model (the first part of a split one) or a gqf file.
func Load(path string, opts Options) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var src *source
	lower := strings.ToLower(path)
	switch {
	case st.IsDir():
		src, err = openHF(path)
	case opts.Format == "gguf" || (opts.Format == "" && strings.HasSuffix(lower, ".gguf")):
		src, err = openGGUF(path)
	case opts.Format == "gqf" || (opts.Format == "" && strings.HasSuffix(lower, ".gqf")):
		return loadGQF(path, opts)
	default:
		return nil, fmt.Errorf("%s: not a model: want a HuggingFace folder, a .gguf or a .gqf file", path)
	}
	if err != nil {
		return nil, err
	}
	m, err := build(src, opts, nil)
	if err != nil {
		src.close()
		return nil, err
	}
	return m, nil
}

// build turns a source into a model, checking every tensor's presence and shape (all
// problems are reported together), then compiles the graph; quant holds a gqf file's
// activation encodings by point (nil for none).
func build(src *source, opts Options, quant map[string]*qdq) (*Model, error) {
	s := src.spec
	m := &Model{spec: s, tok: src.tok, path: src.file, hooks: opts.Hooks, close: src.close,
		mats: map[string]*kernels.Matrix{}, vecs: map[string][]float32{}, experts: map[string][]*kernels.Matrix{},
		dyn: src.dyn, dynInKernel: map[*kernels.Matrix]bool{},
		blocks: opts.Blocks, fileBacked: map[*kernels.Matrix]bool{}}
	m.graph = arch.ModelGraph(s)
	reads := graphReads(m.graph)
	var probs []string
	var totalBits, totalN, linBits, linN float64
	account := func(rt rawTensor, linear bool) {
		n := 1.0
		for _, d := range rt.shape {
			n *= float64(d)
		}
		totalBits += 8 * float64(rt.stored())
		totalN += n
		if linear {
			linBits += 8 * float64(rt.stored())
			linN += n
		}
	}
	for _, t := range src.family.Tensors(s) {
		if t.Generated {
			continue // rope_freqs: computed from the spec or read by the GGUF loader
		}
		rt, found, err := src.tensor(t)
		if err != nil {
			probs = append(probs, err.Error())
			continue
		}
		name := t.Ref.GGUFName()
		if !found {
			what := name
			if !src.ggufNames {
				what = t.HFName
			}
			probs = append(probs, fmt.Sprintf("%s: missing", what))
			continue
		}
		if !sameShape(rt.shape, t.Shape) {
			probs = append(probs, fmt.Sprintf("%s: shape %v, want %v", name, rt.shape, t.Shape))
			continue
		}
		account(rt, t.Ref.Role.IsLinear())
		if err := m.place(name, reads[name], rt, opts.Mode, src); err != nil {
			probs = append(probs, err.Error())
		}
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", src.file, strings.Join(probs, "; "))
	}
	m.bpwAll, m.bpwLinear = totalBits/totalN, linBits/max(linN, 1)

	factors := src.ropeFactors
	if factors == nil {
		factors = arch.RopeFreqFactors(s)
	}
	tables := func(f []float32, attn float32) []*rope {
		var rs []*rope
		for k, t := range m.graph.Ropes {
			if k > 0 {
				f, attn = nil, 1 // the sliding layers' own table takes no scaling
			}
			r := newRope(s, t, src.family.RopeLayout(src.format), f)
			r.attn = attn
			rs = append(rs, r)
		}
		return rs
	}
	m.ropes = tables(factors, 1)
	if sc := s.RopeScaling; sc != nil && sc.Type == "longrope" {
		m.ropes = tables(arch.LongRopeFactors(s, 0))
		m.ropesLong = tables(arch.LongRopeFactors(s, sc.OriginalContext+1))
		if src.graphLen > 0 { // a gqf file: its graph's tables (arch.Lower)
			m.ropes, m.ropesLong = tables(arch.LongRopeFactors(s, src.graphLen)), nil
		}
	}
	if src.mask != 0 {
		m.graph.Mask = src.mask
	}
	var observed, modifies func(string) bool
	if h := opts.Hooks; h != nil && h.Activation != nil {
		observed, modifies = h.Points, h.Modifies
		if observed == nil {
			observed = func(string) bool { return true }
		}
	}
	p, err := m.compile(m.graph, observed, modifies, quant)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.file, err)
	}
	m.plan = p
	m.weightBytes, m.denseBytes = m.streamedBytes()

	threads := opts.Threads
	if threads <= 0 {
		threads = goruntime.NumCPU()
	}
	m.pool = kernels.NewPool(threads)
	m.pack()
	return m, nil
}

// sameShape compares a stored shape with the expected one.
func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// tensorUse is how the graph's nodes read a tensor (a set: a tied embedding is also the
// output's matrix).
type tensorUse uint8

const (
	useEmbed   tensorUse = 1 << iota // an embed node's rows
	useMatrix                        // a linear node's weight
	useVector                        // an rms_norm node's weight, a linear node's bias
	useExperts                       // a moe node's stack of expert matrices
)

// graphReads maps every tensor the nodes of g read (GGUF name) to how they read it.
func graphReads(g *arch.Graph) map[string]tensorUse {
	reads := map[string]tensorUse{}
	for _, n := range g.Nodes {
		switch n.Op {
		case arch.OpEmbed:
			reads[n.Weight] |= useEmbed
		case arch.OpLinear:
			reads[n.Weight] |= useMatrix
			if n.Bias != "" {
				reads[n.Bias] |= useVector
			}
		case arch.OpRMSNorm:
			reads[n.Weight] |= useVector
		case arch.OpMoE:
			for _, w := range []string{n.GateExps, n.UpExps, n.DownExps} {
				reads[w] |= useExperts
			}
		}
	}
	return reads
}

// place stores one checked tensor in the model, in each form the graph reads it in (use).
func (m *Model) place(name string, use tensorUse, rt rawTensor, mode kernels.ActMode, src *source) error {
	if use == 0 {
		return fmt.Errorf("%s: unexpected tensor", rt.name)
	}
	var err error
	if use&useEmbed != 0 {
		if m.embd, err = newEmbedding(rt); err != nil {
			return err
		}
	}
	if use&useMatrix != 0 {
		if err := m.placeMatrix(name, rt, mode, src); err != nil {
			return err
		}
	}
	if use&useVector != 0 {
		m.vecs[name], err = decodeVector(rt)
	}
	if use&useExperts != 0 {
		err = m.placeExperts(name, rt, mode)
	}
	return err
}

// placeExperts stores a stack of expert matrices as one kernels matrix per expert over its
// bytes.
func (m *Model) placeExperts(name string, rt rawTensor, mode kernels.ActMode) error {
	parts, err := rt.experts()
	if err != nil {
		return err
	}
	ws := make([]*kernels.Matrix, len(parts))
	for e, data := range parts {
		w, err := newLinear(rawTensor{name: arch.ExpertWeight(name, e), typ: rt.typ, shape: rt.shape[1:], data: data}, mode)
		if err != nil {
			return err
		}
		ws[e] = w
		if len(w.Data) > 0 && len(data) > 0 && &w.Data[0] == &data[0] {
			m.fileBacked[w] = true
		}
	}
	m.experts[name] = ws
	return nil
}

// placeMatrix stores a weight matrix: the source's own matrix when it makes one (gqf's packed
// integer groups), else a kernels matrix over the stored bytes.
func (m *Model) placeMatrix(name string, rt rawTensor, mode kernels.ActMode, src *source) error {
	if src.matrix != nil {
		w, inKernel, err := src.matrix(name, rt, mode)
		if err != nil {
			return err
		}
		if w != nil {
			m.mats[name] = w
			if inKernel {
				m.dynInKernel[w] = true
			}
			return nil
		}
	}
	if rt.rows != nil {
		var err error
		if rt, err = rt.widened(); err != nil {
			return err
		}
	}
	w, err := newLinear(rt, mode)
	if err != nil {
		return err
	}
	m.mats[name] = w
	if len(w.Data) > 0 && len(rt.data) > 0 && &w.Data[0] == &rt.data[0] {
		m.fileBacked[w] = true
	}
	return nil
}

// matrices lists every weight matrix of the model, in graph order, each once: the linear
// nodes', then (dense false) every expert's.
func (m *Model) matrices(dense bool) []*kernels.Matrix {
	var ms []*kernels.Matrix
	seen := map[*kernels.Matrix]bool{}
	for _, n := range m.graph.Nodes {
		if w := m.mats[n.Weight]; n.Op == arch.OpLinear && w != nil && !seen[w] {
			seen[w] = true
			ms = append(ms, w)
		}
		if n.Op == arch.OpMoE && !dense {
			for _, st := range []string{n.GateExps, n.UpExps, n.DownExps} {
				ms = append(ms, m.experts[st]...)
			}
		}
	}
	return ms
}

// streamedBytes is the weight bytes one decoded token reads: every matrix but the experts',
// every vector, one embedding row (dense), and with them the matrices of the experts a token
// is routed to (all: every expert of a stack has the same bytes).
func (m *Model) streamedBytes() (all, dense int64) {
	for _, w := range m.matrices(true) {
		dense += int64(len(w.Data))
	}
	for _, v := range m.vecs {
		dense += 4 * int64(len(v))
	}
	dense += int64(m.embd.rowBytes)
	all = dense
	for _, n := range m.graph.Nodes {
		if n.Op != arch.OpMoE {
			continue
		}
		for _, st := range []string{n.GateExps, n.UpExps, n.DownExps} {
			all += int64(n.Used) * int64(len(m.experts[st][0].Data))
		}
	}
	return all, dense
}

// pack builds the kernels' repacked weights up front, in parallel, so that the first
// evaluation does not pay for it.
func (m *Model) pack() {
	ms := m.matrices(false)
	m.pool.Run(len(ms), 1, func(_, lo, hi int) {
		for _, w := range ms[lo:hi] {
			w.Pack()
		}
	})
}

// Spec returns the model's hyperparameters (do not modify).
func (m *Model) Spec() *arch.Spec { return m.spec }

// Tokenizer returns the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Vocab returns the number of logits per position.
func (m *Model) Vocab() int { return m.plan.output.n.Dim }

// Encodings returns how many activation encodings of a gqf file the model applies and how many
// the file has: the same number, since Load refuses a file with encodings it cannot place;
// 0, 0 for other models.
func (m *Model) Encodings() (placed, total int) { return m.encTotal, m.encTotal }

// Graph returns the model's graph (do not modify).
func (m *Model) Graph() *arch.Graph { return m.graph }

// Path returns the path the model was loaded from.
func (m *Model) Path() string { return m.path }

// Threads returns the number of workers evaluating the model.
func (m *Model) Threads() int { return m.pool.Workers() }

// BPW returns the bits per weight of the stored weights: over all tensors, and over the
// linear layers of the blocks only (attention and MLP projections; not the embedding or the
// output).
func (m *Model) BPW() (all, linear float64) { return m.bpwAll, m.bpwLinear }

// WeightBytes returns the bytes of weights one decoded token reads: every matrix (the output
// included), the norms and biases, and one embedding row; of a mixture of experts, the
// matrices of the experts a token is routed to only (State.BytesRead counts those an
// evaluation really read).
func (m *Model) WeightBytes() int64 { return m.weightBytes }

// Bytes returns the bytes of all the model's weights as the runtime reads them: every matrix,
// every expert's, the norms and biases (float32) and the token embedding.
func (m *Model) Bytes() int64 {
	var n int64
	for _, w := range m.matrices(false) {
		n += int64(len(w.Data))
	}
	for _, v := range m.vecs {
		n += 4 * int64(len(v))
	}
	if m.mats[string(arch.TokenEmbd)] == nil { // untied: the embedding is not a matrix too
		n += int64(m.embd.rows) * int64(m.embd.rowBytes)
	}
	return n
}

// Close stops the workers and releases the mapped files. The model must not be used after.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.pool.Close()
	for _, w := range m.mats {
		w.Free()
	}
	for _, ws := range m.experts {
		for _, w := range ws {
			w.Free()
		}
	}
	if m.close != nil {
		return m.close()
	}
	return nil
}

// errClosed is returned by Eval on a closed model.
var errClosed = errors.New("model is closed")
