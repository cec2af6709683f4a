package runtime

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"sync"

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
	rope  *rope

	embd       *embedding
	output     *kernels.Matrix
	outputNorm []float32
	layers     []layer

	bpwAll, bpwLinear float64
	weightBytes       int64

	mu     sync.Mutex // serialises Eval: the pool runs one job at a time
	close  func() error
	closed bool
}

// layer holds one transformer block's weights.
type layer struct {
	attnNorm, ffnNorm   []float32
	q, k, v, o          *kernels.Matrix
	gate, up, down      *kernels.Matrix
	qBias, kBias, vBias []float32 // Qwen2
	qNorm, kNorm        []float32 // Qwen3
	nq, nk, nv, no      string    // GGUF weight names, for LinearInput
	ngate, nup, ndown   string
}

// Load opens a model: a directory is a HuggingFace folder (config.json, tokenizer.json,
// *.safetensors), a file a GGUF model (the first part of a split one).
func Load(path string, opts Options) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var src *source
	switch {
	case st.IsDir():
		src, err = openHF(path)
	case strings.HasSuffix(strings.ToLower(path), ".gguf"):
		src, err = openGGUF(path)
	case strings.HasSuffix(strings.ToLower(path), ".gqf"):
		return loadGQF(path, opts)
	default:
		return nil, fmt.Errorf("%s: not a model: want a HuggingFace folder, a .gguf or a .gqf file", path)
	}
	if err != nil {
		return nil, err
	}
	m, err := build(src, opts)
	if err != nil {
		src.close()
		return nil, err
	}
	return m, nil
}

// build turns a source into a model, checking every tensor's presence and shape; all problems
// are reported together.
func build(src *source, opts Options) (*Model, error) {
	s := src.spec
	if s.RopeScaling != nil && s.RopeScaling.Type == "yarn" {
		return nil, fmt.Errorf("%s: rope_scaling: yarn is not supported by the runtime", src.file)
	}
	m := &Model{spec: s, tok: src.tok, path: src.file, hooks: opts.Hooks, close: src.close}
	m.layers = make([]layer, s.Layers)
	var probs []string
	var totalBits, totalN, linBits, linN float64
	var embdRaw rawTensor
	account := func(rt rawTensor, linear bool) {
		n := 1.0
		for _, d := range rt.shape {
			n *= float64(d)
		}
		totalBits += 8 * float64(len(rt.data))
		totalN += n
		if linear {
			linBits += 8 * float64(len(rt.data))
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
			if src.format == "hf" {
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
		if err := m.place(t.Ref, rt, opts.Mode); err != nil {
			probs = append(probs, err.Error())
		}
		if t.Ref.Role == arch.TokenEmbd {
			embdRaw = rt
		}
	}
	if len(probs) == 0 && s.Tied {
		out, err := newLinear(embdRaw, opts.Mode)
		if err != nil {
			probs = append(probs, err.Error())
		}
		m.output = out
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", src.file, strings.Join(probs, "; "))
	}
	m.bpwAll, m.bpwLinear = totalBits/totalN, linBits/max(linN, 1)
	m.weightBytes = m.streamedBytes()

	factors := src.ropeFactors
	if factors == nil {
		factors = arch.RopeFreqFactors(s)
	}
	m.rope = newRope(s, src.family.RopeLayout(src.format), factors)

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

// place stores one checked tensor in the model.
func (m *Model) place(ref arch.TensorRef, rt rawTensor, mode kernels.ActMode) error {
	var err error
	switch ref.Role {
	case arch.TokenEmbd:
		m.embd, err = newEmbedding(rt)
		return err
	case arch.Output:
		m.output, err = newLinear(rt, mode)
		return err
	case arch.OutputNorm:
		m.outputNorm, err = decodeVector(rt)
		return err
	}
	if ref.Layer < 0 || ref.Layer >= len(m.layers) {
		return fmt.Errorf("%s: unexpected tensor", rt.name)
	}
	L := &m.layers[ref.Layer]
	mat := func(dst **kernels.Matrix, name *string) {
		*dst, err = newLinear(rt, mode)
		*name = rt.name
	}
	vec := func(dst *[]float32) { *dst, err = decodeVector(rt) }
	switch ref.Role {
	case arch.AttnNorm:
		vec(&L.attnNorm)
	case arch.FFNNorm:
		vec(&L.ffnNorm)
	case arch.AttnQ:
		mat(&L.q, &L.nq)
	case arch.AttnK:
		mat(&L.k, &L.nk)
	case arch.AttnV:
		mat(&L.v, &L.nv)
	case arch.AttnOut:
		mat(&L.o, &L.no)
	case arch.FFNGate:
		mat(&L.gate, &L.ngate)
	case arch.FFNUp:
		mat(&L.up, &L.nup)
	case arch.FFNDown:
		mat(&L.down, &L.ndown)
	case arch.AttnQBias:
		vec(&L.qBias)
	case arch.AttnKBias:
		vec(&L.kBias)
	case arch.AttnVBias:
		vec(&L.vBias)
	case arch.AttnQNorm:
		vec(&L.qNorm)
	case arch.AttnKNorm:
		vec(&L.kNorm)
	default:
		return fmt.Errorf("%s: unexpected tensor", rt.name)
	}
	return err
}

// matrices lists every weight matrix of the model (the output once).
func (m *Model) matrices() []*kernels.Matrix {
	var ms []*kernels.Matrix
	for i := range m.layers {
		L := &m.layers[i]
		ms = append(ms, L.q, L.k, L.v, L.o, L.gate, L.up, L.down)
	}
	return append(ms, m.output)
}

// streamedBytes is the weight bytes one decoded token reads: every matrix, every vector, one
// embedding row.
func (m *Model) streamedBytes() int64 {
	var n int64
	for _, w := range m.matrices() {
		n += int64(len(w.Data))
	}
	vec := func(v []float32) { n += 4 * int64(len(v)) }
	for i := range m.layers {
		L := &m.layers[i]
		for _, v := range [][]float32{L.attnNorm, L.ffnNorm, L.qBias, L.kBias, L.vBias, L.qNorm, L.kNorm} {
			vec(v)
		}
	}
	vec(m.outputNorm)
	return n + int64(m.embd.rowBytes)
}

// pack builds the kernels' repacked weights up front, in parallel, so that the first
// evaluation does not pay for it.
func (m *Model) pack() {
	ms := m.matrices()
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
func (m *Model) Vocab() int { return m.output.Rows }

// Path returns the path the model was loaded from.
func (m *Model) Path() string { return m.path }

// Threads returns the number of workers evaluating the model.
func (m *Model) Threads() int { return m.pool.Workers() }

// BPW returns the bits per weight of the stored weights: over all tensors, and over the
// linear layers of the blocks only (attention and MLP projections; not the embedding or the
// output).
func (m *Model) BPW() (all, linear float64) { return m.bpwAll, m.bpwLinear }

// WeightBytes returns the bytes of weights one decoded token reads: every matrix (the output
// included), the norms and biases, and one embedding row.
func (m *Model) WeightBytes() int64 { return m.weightBytes }

// Close stops the workers and releases the mapped files. The model must not be used after.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.pool.Close()
	if m.close != nil {
		return m.close()
	}
	return nil
}

// errClosed is returned by Eval on a closed model.
var errClosed = errors.New("model is closed")
