package verify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/internal/filehash"
)

// Options configure Run.
type Options struct {
	Artifact  string // the model under test (any file the runtime loads)
	Ref       string // the reference model (HF folder or artifact); optional with RefLogits
	Corpus    string // evaluation text; ignored with RefLogits (the file holds the tokens)
	RefLogits string // a stored reference (llama-perplexity --kl-divergence-base or --save-ref file)
	SaveRef   string // store the reference's log-probabilities (and logits, greedy continuations) here
	Force     bool   // replace an existing SaveRef file

	Ctx    int // tokens per window (0: 512, or the RefLogits file's)
	Chunks int // windows to score (0: all)

	LayerSNR bool // SNR of the hidden state after every block (needs the live reference)
	NeedSNR  bool // fail unless the logits SNR can be measured (a --min-snr threshold is set)

	Prompts     []string // greedy prompts; nil: DefaultPrompts
	PromptsFile string   // where Prompts came from (hashed into the report's inputs)
	Gen         int      // tokens per greedy continuation; 0 or less: no greedy check

	Threads  int                                           // runtime workers (0: one per CPU)
	Progress func(done, total int)                         // windows done; may be nil
	Open     func(path string, threads int) (Model, error) // model loader; nil: OpenRuntime
	OpenRef  func(path string, threads int) (Model, error) // the reference's loader; nil: Open
}

// DefaultCtx is the window length when none is given (llama-perplexity's default).
const DefaultCtx = 512

// Run compares the artifact with the reference and returns the report (thresholds not applied;
// see Report.Apply). Command and GquantVersion are left for the caller.
func Run(o Options) (rep *Report, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	open := o.Open
	if open == nil {
		open = OpenRuntime
	}
	openRef := o.OpenRef
	if openRef == nil {
		openRef = open
	}
	test, err := open(o.Artifact, o.Threads)
	if err != nil {
		return nil, err
	}
	defer test.Close()

	var kld *KLDFile
	if o.RefLogits != "" {
		if kld, err = OpenKLD(o.RefLogits); err != nil {
			return nil, err
		}
		defer kld.Close()
		if kld.Vocab != test.Vocab() {
			return nil, fmt.Errorf("%s: n_vocab: %d, the artifact %s has %d", o.RefLogits, kld.Vocab, o.Artifact, test.Vocab())
		}
		if m := kld.Meta; m != nil && m.Architecture != "" {
			if d, desc := identity(test); d != "" && d != m.Architecture {
				return nil, fmt.Errorf("%s: made with a reference of another model (%s), not one of the artifact's (%s)", o.RefLogits, m.ArchitectureDesc, desc)
			}
		}
		if o.Ctx != 0 && o.Ctx != kld.Ctx {
			return nil, fmt.Errorf("%s: n_ctx: the file was made with windows of %d tokens, not %d", o.RefLogits, kld.Ctx, o.Ctx)
		}
		if o.NeedSNR && !kld.HasLogits() {
			return nil, fmt.Errorf("%s: logits: the file holds only log-probabilities (llama.cpp's), so no logits SNR can be checked; drop --min-snr or use a file from gquant verify --save-ref", o.RefLogits)
		}
	}
	// The live reference: for the corpus without a stored one, and for greedy continuations the
	// stored file does not hold.
	needGreedyRef := o.Gen > 0 && (kld == nil || kld.Meta == nil || kld.Meta.Greedy == nil)
	var ref Model
	if o.Ref != "" && (kld == nil || needGreedyRef) {
		if ref, err = openRef(o.Ref, o.Threads); err != nil {
			return nil, err
		}
		defer ref.Close()
		if ref.Vocab() != test.Vocab() {
			return nil, fmt.Errorf("%s: vocabulary: %d entries, the reference %s has %d", o.Artifact, test.Vocab(), o.Ref, ref.Vocab())
		}
		if o.LayerSNR && ref.Layers() != test.Layers() {
			return nil, fmt.Errorf("%s: layers: %d, the reference %s has %d", o.Artifact, test.Layers(), o.Ref, ref.Layers())
		}
		// An artifact of another architecture or size than its reference is a mistake, not a
		// measurement (the KL would be meaningless).
		if rd, rdesc := identity(ref); rd != "" {
			if td, tdesc := identity(test); td != "" && td != rd {
				return nil, fmt.Errorf("%s: another model (%s) than the reference %s (%s)", o.Artifact, tdesc, o.Ref, rdesc)
			}
		}
	}

	win, err := o.windows(kld, ref, test)
	if err != nil {
		return nil, err
	}
	layers := 0
	if o.LayerSNR {
		layers = test.Layers()
	}
	acc := NewAccumulator(test.Vocab(), layers)

	var w *KLDWriter
	if o.SaveRef != "" {
		if w, err = CreateKLD(o.SaveRef, win.Ctx, test.Vocab(), win.Tokens, true, o.Force); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				w.Abort()
			}
		}()
	}
	// The metrics of a window's positions are computed on as many goroutines as the models
	// have workers (the models are idle meanwhile).
	workers := o.Threads
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	if kld != nil {
		err = scoreCached(kld, win, test, acc, workers, o.Progress)
	} else {
		err = scoreLive(win, ref, test, acc, w, workers, o.Progress)
	}
	if err != nil {
		return nil, err
	}

	// Greedy reproductions.
	var greedy *Greedy
	var gref *GreedyRefData
	switch {
	case o.Gen <= 0:
	case !needGreedyRef:
		gref = kld.Meta.Greedy
	case ref != nil:
		prompts := o.Prompts
		if prompts == nil {
			prompts = DefaultPrompts
		}
		if gref, err = ReferenceGreedy(ref, prompts, o.Gen); err != nil && o.PromptsFile != "" {
			return nil, fmt.Errorf("%s: %w", o.PromptsFile, err)
		} else if err != nil {
			return nil, err
		}
	}
	var notes []string
	if o.Gen > 0 && gref == nil {
		notes = append(notes, "greedy reproductions skipped: the stored reference holds no greedy continuations and no --ref model was given")
	}
	if kld != nil && !kld.HasLogits() {
		notes = append(notes, "PPL(ref) comes from llama.cpp's stored rows, which floor every log-probability 16 nats below the top token: it is biased low (llama.cpp's PPL(base)), and so is the ratio")
	}
	if gref != nil && len(gref.Prompts) > 0 {
		if greedy, err = CompareGreedy(test, gref); err != nil {
			return nil, err
		}
	}
	if w != nil {
		meta := &KLDMeta{Reference: o.Ref, Greedy: gref}
		meta.Architecture, meta.ArchitectureDesc = identity(ref)
		if err = w.Close(meta); err != nil {
			return nil, err
		}
	}

	rep = &Report{Schema: Schema, Metrics: acc.Summary(), Greedy: greedy, Notes: notes, klValues: acc.KLValues()}
	rep.Artifact.Path = o.Artifact
	rep.Artifact.BPW, rep.Artifact.BPWLinear = test.BPW()
	if e, ok := test.(interface{ Encodings() (int, int) }); ok {
		if sim, in := e.Encodings(); in > 0 {
			rep.Artifact.ActivationEncodings = &EncodingCount{Simulated: sim, InFile: in}
		}
	}
	rep.Reference = Reference{Path: o.Ref, Logits: o.RefLogits}
	if ref != nil {
		rep.Reference.BPW, rep.Reference.BPWLinear = ref.BPW()
	}
	rep.Protocol = Protocol{Ctx: win.Ctx, Chunks: win.Chunks, First: win.First(), BOS: win.BOS, KL: "exact"}
	if kld != nil {
		rep.Protocol.KL = "llama.cpp"
	}
	if rep.Inputs, err = hashInputs(o); err != nil {
		return nil, err
	}
	return rep, nil
}

// check validates the combination of options.
func (o *Options) check() error {
	var p []string
	if o.Artifact == "" {
		p = append(p, "no artifact")
	}
	if o.Ref == "" && o.RefLogits == "" {
		p = append(p, "a reference is needed: --ref MODEL_DIR or --ref-logits FILE")
	}
	if o.RefLogits == "" && o.Corpus == "" {
		p = append(p, "--corpus FILE is needed (or --ref-logits FILE, which holds the tokens)")
	}
	if o.RefLogits != "" && o.SaveRef != "" {
		p = append(p, "--save-ref and --ref-logits exclude each other")
	}
	if o.LayerSNR && (o.RefLogits != "" || o.Ref == "") {
		p = append(p, "--snr needs the live reference (--ref without --ref-logits)")
	}
	if o.Ctx < 0 || o.Chunks < 0 {
		p = append(p, "--ctx and --chunks must not be negative")
	}
	if len(p) > 0 {
		return errors.New(joinProblems(p))
	}
	return nil
}

// windows builds the evaluation windows: from the stored file's tokens, or by tokenizing the
// corpus with the reference's tokenizer as llama-perplexity does (the whole text as one, BOS
// added; calibrate.ReadTokens streams it and keeps the windows' tokens only).
func (o *Options) windows(kld *KLDFile, ref, test Model) (*Windows, error) {
	bos := func(t Tokenizer) int {
		if t.AddBOS() {
			return t.BOS()
		}
		return -1
	}
	// Windows must fit every model run over them: the default is 512 or the shorter context.
	limit, who := test.Context(), test.Path()
	if ref != nil && ref.Context() < limit {
		limit, who = ref.Context(), ref.Path()
	}
	if kld != nil {
		if kld.Ctx > limit {
			return nil, fmt.Errorf("%s: windows of %d tokens exceed the context length %d of %s", o.RefLogits, kld.Ctx, limit, who)
		}
		return NewWindows(kld.Tokens, kld.Ctx, o.Chunks, bos(test.Tokenizer()))
	}
	ctx := o.Ctx
	switch {
	case ctx == 0:
		ctx = min(DefaultCtx, limit)
	case ctx > limit:
		return nil, fmt.Errorf("--ctx %d exceeds the context length %d of %s", ctx, limit, who)
	}
	tok := ref.Tokenizer()
	// Only the tokens of the windows are kept (all of them without --chunks).
	toks, err := calibrate.ReadTokens(o.Corpus, tok, o.Chunks*ctx)
	if err != nil {
		return nil, err
	}
	w, err := NewWindows(toks, ctx, o.Chunks, bos(tok))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", o.Corpus, err)
	}
	return w, nil
}

// scoreLive runs both models over every window and scores the second half of each.
func scoreLive(win *Windows, ref, test Model, acc *Accumulator, w *KLDWriter, workers int, progress func(int, int)) error {
	first, n, V := win.First(), win.Scored(), test.Vocab()
	capture := len(acc.layers) > 0
	next := make([]int, n)
	run := func(m Model, toks []int) ([]float32, [][]float32, error) {
		m.Begin(win.Ctx)
		if _, _, err := m.Eval(toks[:first], false, false); err != nil {
			return nil, nil, err
		}
		return m.Eval(toks[first:], true, capture)
	}
	for c := 0; c < win.Chunks; c++ {
		toks := win.Window(c)
		rl, rh, err := run(ref, toks)
		if err != nil {
			return err
		}
		if capture { // the hidden buffers are reused by the next call: keep the reference's
			rh = cloneRows(rh)
		}
		tl, th, err := run(test, toks)
		if err != nil {
			return err
		}
		for j := range next {
			next[j] = win.Next(c, j)
		}
		acc.AddLiveRows(rl[:n*V], tl[:n*V], next, workers)
		for j := 0; j < n && w != nil; j++ {
			if err := w.WriteRow(rl[j*V : (j+1)*V]); err != nil {
				return err
			}
		}
		for l := range acc.layers {
			if len(rh[l]) != len(th[l]) {
				return fmt.Errorf("%s: blk.%d.out: %d values, the reference has %d", test.Path(), l, len(th[l]), len(rh[l]))
			}
			dim := len(rh[l]) / (win.Ctx - first)
			acc.AddHidden(l, rh[l][:n*dim], th[l][:n*dim])
		}
		if progress != nil {
			progress(c+1, win.Chunks)
		}
	}
	return nil
}

// scoreCached runs the test model over every window and scores it against the stored rows.
func scoreCached(kld *KLDFile, win *Windows, test Model, acc *Accumulator, workers int, progress func(int, int)) error {
	first, n, V := win.First(), win.Scored(), test.Vocab()
	next := make([]int, n)
	for c := 0; c < win.Chunks; c++ {
		toks := win.Window(c)
		test.Begin(win.Ctx)
		if _, _, err := test.Eval(toks[:first], false, false); err != nil {
			return err
		}
		tl, _, err := test.Eval(toks[first:], true, false)
		if err != nil {
			return err
		}
		rows, err := kld.ReadChunk(c)
		if err != nil {
			return err
		}
		lg, err := kld.ReadChunkLogits(c)
		if err != nil {
			return err
		}
		for j := range next {
			next[j] = win.Next(c, j)
		}
		acc.AddCachedRows(rows[:n], lg, tl[:n*V], next, workers)
		if progress != nil {
			progress(c+1, win.Chunks)
		}
	}
	return nil
}

func cloneRows(x [][]float32) [][]float32 {
	out := make([][]float32, len(x))
	for i, r := range x {
		out[i] = append([]float32(nil), r...)
	}
	return out
}

// hashInputs returns path → sha256 of every input file; a folder contributes each regular file
// directly inside it.
func hashInputs(o Options) (map[string]string, error) {
	in := map[string]string{}
	for _, p := range []string{o.Artifact, o.Ref, o.Corpus, o.RefLogits, o.PromptsFile} {
		if p == "" {
			continue
		}
		if o.RefLogits != "" && p == o.Corpus {
			continue // unused: the stored file holds the tokens
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		files := []string{p}
		if st.IsDir() {
			ents, err := os.ReadDir(p)
			if err != nil {
				return nil, err
			}
			files = files[:0]
			for _, e := range ents {
				if e.Type().IsRegular() {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
			sort.Strings(files)
		}
		for _, f := range files {
			h, err := filehash.SHA256(f)
			if err != nil {
				return nil, err
			}
			in[f] = h
		}
	}
	return in, nil
}
