package calibrate

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
)

// Sequential is the calibration side of the layer-sequential methods (convert.Sequence): the
// corpus windows run through the model one block at a time, each window's residual stream
// kept between blocks. The linear layers are rounded in stages, in graph order: the layers
// that read one input together (q, k and v; o; gate and up; down), then the output layer.
// Observe(i) collects the statistics of stage i's input (Σx², Σx, max|x| and the Hessians)
// with every earlier stage already replaced by its rounded values (the blocks before, and the
// stages before it in its own block: GPTQ's "true sequential" order); Advance(i) replaces
// stage i's weights by their rounded values and, after the last stage of a block, runs the
// windows through the block and frees it. At any time it holds one stage's statistics, one
// block's rounded weights and the residual streams (tokens × hidden float32).
type Sequential struct {
	m       *runtime.Model
	st      *runtime.State
	path    string
	chunks  [][]int
	x       [][]float32 // residual stream entering the current block, per window
	model   stats.Model
	meta    stats.Meta
	threads int
	stages  []stage
	col     *collector // the observer of the stage being observed (nil: none)
	// Stats has an entry for every linear weight of the model; the statistics of a stage's
	// weights are there from its Observe to its Advance.
	Stats *stats.Stats
	// Progress, when set, is called after each block with the blocks done and to do.
	Progress func(done, total int)
}

// stage is a group of linear weights rounded together: they read the same input.
type stage struct {
	layer   int // Layers for the output layer
	weights []stats.Weight
}

// NewSequential loads the model at path (a HuggingFace folder) for layer-sequential
// calibration over the corpus windows that o selects (o.Output and o.Hessian are not used:
// every block's Hessians are collected, in memory).
func NewSequential(path string, o Options) (*Sequential, error) {
	f, err := os.Open(o.Corpus)
	if err != nil {
		return nil, err
	}
	f.Close()
	s := &Sequential{path: path, threads: o.Threads}
	if s.threads <= 0 {
		s.threads = goruntime.NumCPU()
	}
	hooks := &runtime.Hooks{LinearInput: func(w string, x []float32, n, cols int) {
		if s.col != nil && s.col.linear[w] != nil {
			s.col.linearInput(w, x, n, cols)
		}
	}}
	m, err := runtime.Load(path, runtime.Options{Threads: s.threads, Hooks: hooks, Format: o.Format, Blocks: true})
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	s.m = m
	spec := m.Spec()
	ctx, corp, err := readWindows(path, m, o)
	if err != nil {
		return nil, err
	}
	s.chunks = corp.Chunks
	s.x = make([][]float32, len(s.chunks))
	ntok := 0
	for _, c := range s.chunks {
		ntok += len(c)
	}
	if s.model, err = arch.StatsModel(filepath.Base(filepath.Clean(path)), spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg, err := os.ReadFile(filepath.Join(path, "config.json")); err == nil {
		s.model.ID.ConfigSHA256 = sha256Hex(cfg)
	}
	s.model.ID.WeightsSHA256 = WeightsDigest(path, spec)
	s.meta = stats.Meta{
		Model: s.model.ID, CorpusName: filepath.Base(o.Corpus), CorpusSHA256: corp.SHA256,
		Tokens: ntok, Ctx: ctx, Chunks: len(s.chunks), Seed: o.Seed, Hessian: true,
	}
	all := &collector{}
	if err := all.init(stats.Model{ID: s.model.ID, Weights: s.model.Weights}, false, s.threads); err != nil {
		return nil, err
	}
	s.Stats = all.stats(s.meta)
	s.Stats.Source = path
	s.Stats.Reindex()
	// Each stage's Hessians serve that stage's GPTQ plans once, then Advance drops them: a
	// weight that is its input's only reader (o, down) may take its Hessian for the plan to
	// be built in, instead of a copy (stats.TakeHessian).
	s.Stats.HandOverHessians()
	s.st = m.NewState(ctx)
	s.st.SkipLogits(true) // the output layer's input is observed, its product not needed
	s.stages = stagesOf(spec, s.model.Weights)
	ok = true
	return s, nil
}

// stagesOf groups the linear weights by input, in graph order; the output layer is last. A
// moe node's experts make two stages: every expert's gate and up (each reading its tokens'
// rows of the node's input), then every expert's down.
func stagesOf(spec *arch.Spec, weights []stats.Weight) []stage {
	byName := map[string]stats.Weight{}
	for _, w := range weights {
		byName[w.Name] = w
	}
	var out []stage
	at := map[string]int{} // input value → its stage
	for _, n := range arch.ModelGraph(spec).Nodes {
		if n.Op == arch.OpMoE {
			var gateUp, down stage
			gateUp.layer, down.layer = n.Layer, n.Layer
			for e := 0; e < n.Experts; e++ {
				for _, st := range []string{n.GateExps, n.UpExps} {
					gateUp.weights = append(gateUp.weights, byName[arch.ExpertWeight(st, e)])
				}
				down.weights = append(down.weights, byName[arch.ExpertWeight(n.DownExps, e)])
			}
			out = append(out, gateUp, down)
			continue
		}
		if n.Op != arch.OpLinear || n.Tail {
			continue
		}
		w, ok := byName[n.Weight]
		if !ok {
			continue
		}
		i, seen := at[n.Inputs[0]]
		if !seen {
			i = len(out)
			at[n.Inputs[0]] = i
			out = append(out, stage{layer: n.Layer})
		}
		out[i].weights = append(out[i].weights, w)
	}
	if w, ok := byName[string(arch.Output)]; ok {
		out = append(out, stage{layer: spec.Layers, weights: []stats.Weight{w}})
	}
	return out
}

// Stages lists the stages' weights (GGUF names), in order (convert.Sequence).
func (s *Sequential) Stages() [][]string {
	out := make([][]string, len(s.stages))
	for i, st := range s.stages {
		for _, w := range st.weights {
			out[i] = append(out[i], w.Name)
		}
	}
	return out
}

// Statistics returns s.Stats (convert.Sequence).
func (s *Sequential) Statistics() *stats.Stats { return s.Stats }

// Close releases the model.
func (s *Sequential) Close() error { return s.m.Close() }

// Layers is the model's number of blocks.
func (s *Sequential) Layers() int { return s.m.Spec().Layers }

// Tokens is the number of calibration tokens.
func (s *Sequential) Tokens() int { return s.meta.Tokens }

// run evaluates block l (Layers: the tail) over every window, replacing the residual streams
// with the block's outputs when keep is set.
func (s *Sequential) run(l int, keep bool) error {
	L := s.Layers()
	for ci, chunk := range s.chunks {
		if s.col != nil {
			s.col.held = ci%stats.HoldoutEvery == stats.HoldoutEvery-1
		}
		s.st.Reset()
		out, err := s.m.EvalBlocks(s.st, chunk, s.x[ci], l, min(l+1, L))
		if err != nil {
			return err
		}
		if keep && l < L {
			s.x[ci] = out
		}
		if s.col != nil && s.col.err != nil {
			return fmt.Errorf("%s: chunk %d: %w", s.path, ci, s.col.err)
		}
	}
	return nil
}

// Observe collects the statistics of stage i's input into s.Stats, Hessians included.
func (s *Sequential) Observe(i int) error {
	if i < 0 || i >= len(s.stages) {
		return fmt.Errorf("%s: stage %d of %d", s.path, i, len(s.stages))
	}
	sg := s.stages[i]
	col := &collector{}
	defer col.close()
	if err := col.init(stats.Model{ID: s.model.ID, Weights: sg.weights}, true, s.threads); err != nil {
		return err
	}
	batches, _ := col.hessianBatches(-1)
	batch := batches[0]
	col.startPass(true, batch)
	s.col = col
	err := s.run(sg.layer, false)
	s.col = nil
	if err != nil {
		return err
	}
	got := col.stats(s.meta)
	for _, ls := range batch {
		finishHessian(ls.Hessian, ls.Cols)
		if i, ok := stats.Finite(ls.Hessian); !ok {
			return fmt.Errorf("%s: %s: Hessian element %d is not finite", s.path, ls.Weight, i)
		}
	}
	for _, ls := range got.Linear {
		if _, _, expert := stats.SplitExpert(ls.Weight); ls.Count == 0 && !expert {
			// An expert no token was routed to keeps count 0 (rounded as llama-quantize does
			// with an imatrix); any other weight is reached by every token.
			return fmt.Errorf("%s: %s: the calibration run did not reach it", s.path, ls.Weight)
		}
		dst := s.Stats.LinearFor(ls.Weight)
		if dst == nil {
			return fmt.Errorf("%s: %s: no statistics entry", s.path, ls.Weight)
		}
		*dst = *ls
	}
	return nil
}

// Advance replaces stage i's weights by weights (GGUF name → values, the source's row order;
// a weight not given keeps the source's values) and frees the stage's Hessians; after the
// last stage of a block, it runs the windows through the block and frees the block. weights
// may also hold other tensors of the stage's block, which are replaced too: layer-sequential
// AWQ hands over the norm, or the earlier stage's weight (v, up) and bias, that the stage's
// scaling was folded into.
func (s *Sequential) Advance(i int, weights map[string][]float32) error {
	if i < 0 || i >= len(s.stages) {
		return fmt.Errorf("%s: stage %d of %d", s.path, i, len(s.stages))
	}
	sg := s.stages[i]
	own := map[string]bool{}
	for _, w := range sg.weights {
		own[w.Name] = true
		if ls := s.Stats.LinearFor(w.Name); ls != nil {
			ls.Hessian = nil
		}
		v, ok := weights[w.Name]
		if !ok || sg.layer == s.Layers() {
			continue // the output layer: nothing runs after it
		}
		if err := s.m.ReplaceLinear(w.Name, v); err != nil {
			return err
		}
	}
	var others []string
	for name := range weights {
		if !own[name] {
			others = append(others, name)
		}
	}
	slices.Sort(others) // one order, whatever the map's
	for _, name := range others {
		if !strings.HasPrefix(name, fmt.Sprintf("blk.%d.", sg.layer)) || sg.layer == s.Layers() {
			return fmt.Errorf("%s: stage %d: %s is not a tensor of block %d", s.path, i, name, sg.layer)
		}
		var err error
		if s.Stats.LinearFor(name) != nil {
			err = s.m.ReplaceLinear(name, weights[name])
		} else {
			err = s.m.ReplaceVector(name, weights[name])
		}
		if err != nil {
			return err
		}
	}
	if sg.layer == s.Layers() || (i+1 < len(s.stages) && s.stages[i+1].layer == sg.layer) {
		return nil
	}
	if err := s.run(sg.layer, true); err != nil {
		return err
	}
	s.m.ReleaseBlock(sg.layer)
	if s.Progress != nil {
		s.Progress(sg.layer+1, s.Layers())
	}
	return nil
}
