package convert

import (
	"fmt"
	"sync"

	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// The layer-sequential methods (GPTQ and AWQ without a statistics file): the calibration text runs
// through the model one block at a time. Before block l's tensors are encoded, the Sequence
// collects the statistics of block l's linear inputs, with the earlier blocks already replaced
// by their rounded values; once they are encoded, their rounded values, decoded from the bytes
// just written, replace block l in the model and the calibration text runs through it to the
// next block (llm-compressor's sequential pipeline). Memory: one block's statistics and
// rounded weights, plus the calibration activations.

// A Sequence is the model side of layer-sequential execution (calibrate.Sequential).
type Sequence interface {
	// Stages lists, in order, the groups of linear weights (GGUF names) rounded together:
	// block by block, the weights that read one input, then the output layer.
	Stages() [][]string
	// Observe makes the statistics of stage i's input available to the tensors' rounders.
	Observe(i int) error
	// Advance replaces stage i's weights by their rounded values (GGUF name → rows × cols in
	// the source's row order) and, after a block's last stage, runs the calibration text
	// through the block.
	Advance(i int, weights map[string][]float32) error
	// Statistics holds an entry for every linear weight; Observe fills a stage's.
	Statistics() *stats.Stats
}

// A Decoder is an Encoder that can decode what it wrote: bufs are the tensor's buffers
// (Buffers' order and sizes, nil for empty ones); dst gets the rows × cols values, rows in
// the plan's (GGUF) order.
type Decoder interface {
	Decode(bufs [][]byte, rows, cols int, dst []float32) error
}

// Decode decodes a GGUF tensor's bytes with its ggml type.
func (e *ggufEncoder) Decode(bufs [][]byte, rows, cols int, dst []float32) error {
	codec, err := quantize.For(e.typ)
	if err != nil {
		return err
	}
	if cols%codec.BlockSize() != 0 || uint64(len(bufs[0])) != uint64(rows)*uint64(e.typ.RowBytes(cols)) {
		return fmt.Errorf("%d bytes of %s do not hold %d × %d values", len(bufs[0]), e.typ, rows, cols)
	}
	codec.Dequantize(dst[:rows*cols], bufs[0])
	return nil
}

// capture keeps the bytes written for the linear tensors of the block being encoded.
type capture struct {
	mu   sync.Mutex
	bufs map[int][][]byte // plan tensor → its buffers
	drop map[int]bool     // plan tensors whose bytes are kept here only (not the file's yet)
}

// sink wraps next: the bytes of the tensors in c.bufs are also copied there.
func (c *capture) sink(next Sink) Sink {
	return func(t, buf int, off uint64, data []byte) error {
		c.mu.Lock()
		if b := c.bufs[t]; b != nil {
			copy(b[buf][off:], data)
		}
		drop := c.drop[t]
		c.mu.Unlock()
		if drop {
			return nil
		}
		return next(t, buf, off, data)
	}
}

// Layer-sequential AWQ (Plan.seqFolds): each stage's scaling (foldGroups: the attn_norm → q,
// k, v one at the q/k/v stage, v → attn_output at the o stage, ffn_norm → gate, up at the
// gate/up stage, up → down at the down stage) is searched, as PrepareFolds does, from the
// statistics Observe has just collected, and attached before the stage is encoded. What it
// divides is then encoded at that stage, so that the model the calibration text runs through
// holds the file's values: a norm (kept back from the tensors of no stage) and, for v and up,
// the earlier stage's weight, which that stage encoded for the running model only (again: its
// bytes kept, not written) and which is encoded once more, rows divided, for the file.

// executeSequential runs the plan's tensors stage by stage: those of no stage (embedding,
// norms) first, then each stage's between Observe and Advance. total is the source bytes
// Progress counts to, grown by those layer-sequential AWQ encodes twice.
func executeSequential(inv *Inventory, p *Plan, sink Sink, opts ExecOptions, run func(ts []int, sink Sink) error, total *int64) error {
	seq := opts.Sequence
	stages := seq.Stages()
	at := map[string]int{}
	for i, ws := range stages {
		for _, w := range ws {
			at[w] = i
			if stack, _, ok := arch.SplitExpert(w); ok { // an expert's matrix: its stack's stage
				at[stack] = i
			}
		}
	}
	fo := p.seqFolds
	groups := make([][]foldGroup, len(stages)) // the scalings searched at each stage
	into := map[string]int{}                   // a tensor a scaling divides → the stage of that scaling
	if fo != nil {
		for l := 0; l < p.spec.Layers; l++ {
			for _, g := range foldGroups(p.spec, l, true) {
				si, ok := at[g.statsKey()]
				if !ok {
					return fmt.Errorf("%s: layer-sequential AWQ: no stage rounds %s", g.label, g.statsKey())
				}
				groups[si] = append(groups[si], g)
				for _, t := range g.into {
					into[t] = si
				}
			}
		}
	}
	phases := make([][]int, len(stages)+1) // phases[0]: the tensors of no stage
	again := make([][]int, len(stages))    // encoded for the running model only, at their stage
	for i := range p.Tensors {
		pt := &p.Tensors[i]
		if pt.fold != nil {
			return fmt.Errorf("%s: layer-sequential execution does not take folded tensors (AWQ's are searched stage by stage; --smooth needs --stats)", pt.Name)
		}
		ph := 0
		if s, ok := at[pt.Name]; ok && len(pt.Shape) >= 2 {
			ph = s + 1
		}
		if s, ok := into[pt.Name]; ok {
			if ph > s {
				return fmt.Errorf("%s: layer-sequential AWQ: rounded at stage %d, after the scaling folded into it (stage %d)", pt.Name, ph-1, s)
			}
			if ph > 0 {
				again[ph-1] = append(again[ph-1], i)
				rows, n := rowsOf(pt)
				*total += int64(rows * n * 2)
			}
			ph = s + 1
		}
		phases[ph] = append(phases[ph], i)
	}
	c := &capture{}
	csink := c.sink(sink)
	if err := run(phases[0], sink); err != nil {
		return err
	}
	for si := range stages {
		ts := phases[si+1]
		if len(ts) == 0 && si == len(stages)-1 {
			break // a tied output: nothing after the blocks
		}
		if err := seq.Observe(si); err != nil {
			return err
		}
		if len(groups[si]) > 0 {
			o := *fo
			o.Stats = seq.Statistics()
			lines, err := searchFolds(inv, p, groups[si], o)
			if err != nil {
				return err
			}
			p.Folds = append(p.Folds, lines...)
		}
		c.mu.Lock()
		c.bufs, c.drop = map[int][][]byte{}, map[int]bool{}
		for _, t := range again[si] {
			c.drop[t] = true
			p.Tensors[t].again = true
		}
		ts = append(append([]int{}, ts...), again[si]...)
		for _, t := range ts {
			pt := &p.Tensors[t]
			if _, ok := pt.enc.(Decoder); !ok {
				c.mu.Unlock()
				return fmt.Errorf("%s: layer-sequential execution: the encoder of %s cannot decode its bytes", pt.Name, pt.Type)
			}
			var bufs [][]byte
			for _, size := range pt.enc.Buffers() {
				bufs = append(bufs, make([]byte, size))
			}
			c.bufs[t] = bufs
		}
		c.mu.Unlock()
		if err := run(ts, csink); err != nil {
			return err
		}
		for _, t := range again[si] {
			p.Tensors[t].again = false // finished when encoded for the file
		}
		weights := map[string][]float32{}
		for t, bufs := range c.bufs {
			pt := &p.Tensors[t]
			rows, cols := rowsOf(pt)
			for i, b := range bufs {
				if len(b) == 0 {
					bufs[i] = nil
				}
			}
			vals := make([]float32, rows*cols)
			if err := pt.enc.(Decoder).Decode(bufs, rows, cols, vals); err != nil {
				return fmt.Errorf("%s: %w", pt.Name, err)
			}
			// Back to the source's row order (the Q/K permutation of llama's GGUF layout).
			if pt.trans != arch.NoTransform && len(pt.Shape) >= 2 {
				src := make([]float32, len(vals))
				for r := 0; r < rows; r++ {
					sr := arch.SourceRow(pt.trans, p.spec, r)
					copy(src[sr*cols:(sr+1)*cols], vals[r*cols:(r+1)*cols])
				}
				vals = src
			}
			if pt.ref.Role.IsExperts() { // each expert's matrix, as the model replaces them
				n := int(pt.Shape[2])
				per := len(vals) / n
				for e := 0; e < n; e++ {
					weights[arch.ExpertWeight(pt.Name, e)] = vals[e*per : (e+1)*per]
				}
				continue
			}
			weights[pt.Name] = vals
		}
		c.mu.Lock()
		c.bufs, c.drop = nil, nil
		c.mu.Unlock()
		if err := seq.Advance(si, weights); err != nil {
			return err
		}
	}
	return nil
}
