package gqfconv

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
	"github.com/gquant/gquant/verify"
)

// The qualitative claims of docs/quality.md, checked cheaply on stories260k: statistics with
// Hessians from 4096 calibration tokens, scores on 6 windows of 128 tokens of the held-out
// text against the bf16 checkpoint.

const (
	qualityEval  = "../../testdata/corpora/tinystories-eval.txt"
	qualityCalib = "../../testdata/corpora/tinystories-calib.txt"
)

// qualityStats calibrates stories260k once per test binary.
var qualityStats = struct {
	st  *stats.Stats
	err error
}{}

func calibrated(t *testing.T) *stats.Stats {
	t.Helper()
	if qualityStats.st == nil && qualityStats.err == nil {
		res, err := calibrate.Calibrate(gqfModel, calibrate.Options{Corpus: qualityCalib, Ctx: 256, Tokens: 4096, Hessian: true, Threads: 2})
		if err != nil {
			qualityStats.err = err
		} else {
			qualityStats.st = res.Stats
		}
	}
	if qualityStats.err != nil {
		t.Fatal(qualityStats.err)
	}
	return qualityStats.st
}

// score converts stories260k with o and returns verify's report against the checkpoint.
func score(t *testing.T, o Options) (*verify.Report, *convert.Plan) {
	t.Helper()
	out := filepath.Join(t.TempDir(), o.Scheme+"-"+o.Method+".gqf")
	o.MaxLen = 16
	plan, err := Convert(gqfModel, out, o)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Run(verify.Options{Artifact: out, Ref: gqfModel, Corpus: qualityEval, Ctx: 128, Chunks: 6, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return rep, plan
}

// TestGQFMethodsBeatRTN: GPTQ and AWQ give a lower mean KL than round-to-nearest for w4a16
// (int4 groups), and GPTQ than RTN for w4a8 too.
func TestGQFMethodsBeatRTN(t *testing.T) {
	st := calibrated(t)
	kl := map[string]float64{}
	for _, m := range []string{convert.MethodRTN, convert.MethodGPTQ, convert.MethodAWQ} {
		rep, plan := score(t, Options{Scheme: "w4a16", Method: m, Stats: st,
			GPTQ: quantize.GPTQOptions{ActOrder: true}})
		kl[m] = rep.KL.Mean
		t.Logf("w4a16 %s: KL %.5f, top-1 %.4f, bpw %.3f (linear %.3f)", m, rep.KL.Mean, rep.Top1, plan.BPW, plan.BPWLinear)
	}
	if !(kl[convert.MethodGPTQ] < kl[convert.MethodRTN]) || !(kl[convert.MethodAWQ] < kl[convert.MethodRTN]) {
		t.Errorf("KL rtn %.5f, gptq %.5f, awq %.5f: want gptq and awq below rtn", kl[convert.MethodRTN], kl[convert.MethodGPTQ], kl[convert.MethodAWQ])
	}
	rtn, _ := score(t, Options{Scheme: "w4a8", Method: convert.MethodRTN})
	gptq, _ := score(t, Options{Scheme: "w4a8", Method: convert.MethodGPTQ, Stats: st})
	if !(gptq.KL.Mean < rtn.KL.Mean) {
		t.Errorf("w4a8 KL rtn %.5f, gptq %.5f", rtn.KL.Mean, gptq.KL.Mean)
	}
}

// TestGQFW8A16Ranges: w8a16 with activation encodings from the statistics keeps the logits
// above 40 dB SNR with either range setting.
func TestGQFW8A16Ranges(t *testing.T) {
	st := calibrated(t)
	for _, mode := range []quantize.RangeMode{quantize.RangeSQNR, quantize.RangeMinMax} {
		rep, plan := score(t, Options{Scheme: "w8a16", Stats: st, Range: quantize.RangeOptions{Mode: mode}})
		t.Logf("w8a16 %s: SNR %.2f dB, KL %.6f (%s)", mode, float64(rep.Logits.SNR), rep.KL.Mean, plan.Calibration)
		if !(float64(rep.Logits.SNR) >= 40) {
			t.Errorf("w8a16 %s: logits SNR %v dB, want ≥ 40", mode, rep.Logits.SNR)
		}
		if !strings.Contains(plan.Calibration, "from the statistics ("+string(mode)+" ranges)") {
			t.Errorf("calibration: %s", plan.Calibration)
		}
	}
}

// TestGQFInt4Decode: the int4 group encodings of a gqf file decode to exactly what
// quantize.QuantizeGroups gives for the same weights (symmetric with signed codes and
// possibly negative scales; asymmetric with zero points), and the bpw of g128 on stories3m's
// linear layers is 4 + 24/128 (fp16 scale and uint8 zero per group).
func TestGQFInt4Decode(t *testing.T) {
	for _, sym := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "m.gqf")
		if _, err := Convert(gqfModel, out, Options{Scheme: "w4a16", Sym: sym, GroupSize: 32, MaxLen: 16}); err != nil {
			t.Fatal(err)
		}
		f, err := gqf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := convert.Open(gqfModel, convert.InventoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, at := range inv.Family.Tensors(inv.Spec) {
			if !at.Ref.Role.IsLinear() {
				continue
			}
			gt, _ := f.Tensor(at.Ref.GGUFName())
			got, err := f.Decode(gt)
			if err != nil {
				t.Fatal(err)
			}
			w, err := hfFloat(inv, at)
			if err != nil {
				t.Fatal(err)
			}
			rows, cols := at.Shape[0], at.Shape[1]
			if cols%32 != 0 {
				continue // int8 fallback (ffn_down, rows of 172)
			}
			ref, err := quantize.QuantizeGroups(quantize.GroupSpec{Bits: 4, Group: 32, Symmetric: sym}, w, rows, cols, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := ref.Dequantize()
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("sym %v: %s [%d]: decoded %g, want %g", sym, gt.Name, i, got[i], want[i])
				}
			}
			checked++
		}
		inv.Close()
		f.Close()
		if checked == 0 {
			t.Fatal("no int4 tensor checked")
		}
	}
	m3 := filepath.Join("..", "..", "testdata", "models", "stories3m")
	if _, err := os.Stat(m3); err != nil {
		t.Logf("stories3m bpw check skipped: %v", err)
		return
	}
	p, err := Convert(m3, "", Options{Scheme: "w4a16", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.BPWLinear != 4+24.0/128 || p.Fallbacks != 0 {
		t.Errorf("stories3m w4a16 g128: linear bpw %g, %d fallbacks; want %g, 0", p.BPWLinear, p.Fallbacks, 4+24.0/128)
	}
}

// TestGQFW4A8Dynamic: w4a8 and symmetric w4a16 store the same int4 weights; the w4a8 file
// quantizes linear inputs to int8 per token at run time, so its logits differ from w4a16's,
// but only by that quantization (within 25 dB).
func TestGQFW4A8Dynamic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gqf"), filepath.Join(dir, "b.gqf")
	if _, err := Convert(gqfModel, a, Options{Scheme: "w4a8", MaxLen: 16}); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(gqfModel, b, Options{Scheme: "w4a16", Sym: true, MaxLen: 16}); err != nil {
		t.Fatal(err)
	}
	ids, _ := referencePrompt(t, gqfModel)
	logits := func(path string) []float32 {
		m, err := runtime.Load(path, runtime.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		l, err := m.Eval(m.NewState(0), ids, true)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	la, lb := logits(a), logits(b)
	var sig, noise float64
	for i := range la {
		sig += float64(lb[i]) * float64(lb[i])
		noise += float64(la[i]-lb[i]) * float64(la[i]-lb[i])
	}
	snr := 10 * math.Log10(sig/noise)
	t.Logf("w4a8 against w4a16 --sym: %.1f dB", snr)
	if noise == 0 || snr < 25 {
		t.Errorf("w4a8 logits %.1f dB from w4a16's (want different, but within 25 dB)", snr)
	}
}

// TestGQFBadStats: statistics of another model, with a tensor missing, or with a NaN are
// refused before anything is written.
func TestGQFBadStats(t *testing.T) {
	st := calibrated(t)
	out := filepath.Join(t.TempDir(), "m.gqf")
	try := func(what string, s *stats.Stats, method, want string) {
		t.Helper()
		_, err := Convert(gqfModel, out, Options{Scheme: "w4a16", Method: method, Stats: s, MaxLen: 16})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", what, err, want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: output written", what)
		}
	}
	// Another model: the same statistics claiming another tensor list.
	other := *st
	other.Meta.Model.TensorsSHA256 = strings.Repeat("0", 64)
	try("wrong model", &other, convert.MethodGPTQ, "not on this model")
	// A missing tensor.
	missing := &stats.Stats{Source: "cut.stats", Kind: st.Kind, Meta: st.Meta}
	for _, l := range st.Linear {
		if l.Weight != "blk.2.ffn_down.weight" {
			missing.Linear = append(missing.Linear, l)
		}
	}
	missing.Acts = st.Acts
	try("missing tensor", missing, convert.MethodImatrix, "blk.2.ffn_down.weight: missing")
	// A NaN.
	bad := &stats.Stats{Source: "nan.stats", Kind: st.Kind, Meta: st.Meta, Acts: st.Acts}
	for _, l := range st.Linear {
		c := *l
		if l.Weight == "blk.1.attn_q.weight" {
			c.Sum2 = append([]float64(nil), l.Sum2...)
			c.Sum2[3] = math.NaN()
		}
		bad.Linear = append(bad.Linear, &c)
	}
	try("NaN", bad, convert.MethodAWQ, "blk.1.attn_q.weight: Σx²[3] = NaN")
	// GPTQ without Hessians.
	noH := &stats.Stats{Source: "noh.stats", Kind: st.Kind, Meta: st.Meta, Acts: st.Acts}
	for _, l := range st.Linear {
		c := *l
		c.Hessian = nil
		noH.Linear = append(noH.Linear, &c)
	}
	try("no Hessian", noH, convert.MethodGPTQ, "no Hessian (gquant calibrate --hessian)")
}

// TestGGUFQ4_0Methods: --format gguf --scheme q4_0 --method gptq writes, for every Q4_0
// linear weight, exactly the blocks of quantize.GPTQ's symmetric int4 groups of 32 (rows in
// GGUF order), and both GPTQ and AWQ files score a lower KL than plain q4_0.
func TestGGUFQ4_0Methods(t *testing.T) {
	st := calibrated(t)
	dir := t.TempDir()
	kl := map[string]float64{}
	for _, m := range []string{convert.MethodRTN, convert.MethodGPTQ, convert.MethodAWQ} {
		out := filepath.Join(dir, m+".gguf")
		var err error
		if m == convert.MethodRTN {
			_, err = convert.Convert(gqfModel, out, convert.Options{Scheme: "q4_0", Method: m, Threads: 2})
		} else {
			_, err = convert.Convert(gqfModel, out, convert.Options{Scheme: "q4_0", Threads: 2, Method: m, Stats: statsPath(t, st)})
		}
		if err != nil {
			t.Fatal(err)
		}
		rep, err := verify.Run(verify.Options{Artifact: out, Ref: gqfModel, Corpus: qualityEval, Ctx: 128, Chunks: 6, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		kl[m] = rep.KL.Mean
		t.Logf("q4_0 %s: KL %.5f, top-1 %.4f", m, rep.KL.Mean, rep.Top1)
	}
	if !(kl[convert.MethodGPTQ] < kl[convert.MethodRTN]) || !(kl[convert.MethodAWQ] < kl[convert.MethodRTN]) {
		t.Errorf("q4_0 KL rtn %.5f, gptq %.5f, awq %.5f", kl[convert.MethodRTN], kl[convert.MethodGPTQ], kl[convert.MethodAWQ])
	}

	f, err := gguf.Open(filepath.Join(dir, convert.MethodGPTQ+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inv, err := convert.Open(gqfModel, convert.InventoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	dec, _ := quantize.For(gguf.Q4_0)
	checked := 0
	for _, at := range inv.Family.Tensors(inv.Spec) {
		if !at.Ref.Role.IsLinear() || at.Shape[1]%32 != 0 {
			continue
		}
		i, ok := f.TensorIndex(at.Ref.GGUFName())
		if !ok {
			t.Fatalf("%s: missing", at.Ref.GGUFName())
		}
		rows, cols := at.Shape[0], at.Shape[1]
		got := make([]float32, rows*cols)
		dec.Dequantize(got, f.TensorData(i))
		w, err := hfFloat(inv, at)
		if err != nil {
			t.Fatal(err)
		}
		H, _, err := st.Hessian(at.Ref.GGUFName())
		if err != nil || H == nil {
			t.Fatalf("%s: Hessian: %v", at.Ref.GGUFName(), err)
		}
		gt, err := quantize.GPTQ(w, rows, cols, H, quantize.GroupSpec{Bits: 4, Group: 32, Symmetric: true}, quantize.GPTQOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := gt.Dequantize()
		for r := 0; r < rows; r++ {
			sr := arch.SourceRow(at.Transform, inv.Spec, r)
			for c := 0; c < cols; c++ {
				if got[r*cols+c] != want[sr*cols+c] {
					t.Fatalf("%s [%d, %d]: %g, want %g (GGUF row %d is HF row %d)", at.Ref.GGUFName(), r, c, got[r*cols+c], want[sr*cols+c], r, sr)
				}
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no Q4_0 tensor checked")
	}
}

// hfFloat reads a checkpoint tensor as float32 in HF layout.
func hfFloat(inv *convert.Inventory, at arch.Tensor) ([]float32, error) {
	m, err := hf.Open(inv.Dir)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return m.Checkpoint.ToFloat32(at.HFName, nil)
}

// statsPath writes statistics to a file of the test and returns its path.
func statsPath(t *testing.T, st *stats.Stats) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stats.gguf")
	if err := stats.Write(p, st); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMaskFromScores: stories260k's scaled attention scores span hundreds, through which the
// default −50 mask leaks; a w8a16 file made from its statistics records a mask that puts every
// masked score 20 below every visible one, the runtime applies the file's mask, and the file
// scores far better than the same file with −50.
func TestMaskFromScores(t *testing.T) {
	st := calibrated(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gqf")
	if _, err := Convert(gqfModel, good, Options{Scheme: "w8a16", Stats: st, MaxLen: 128}); err != nil {
		t.Fatal(err)
	}
	f, err := gqf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	mt, _ := f.Tensor(arch.ConstMask)
	vals, err := f.Decode(mt)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	mask := vals[1]
	var lo, hi float64 = 1e9, -1e9
	for _, a := range st.Acts {
		if strings.HasSuffix(a.Name, ".kq_scaled") {
			lo, hi = math.Min(lo, float64(a.Min)), math.Max(hi, float64(a.Max))
		}
	}
	if !(hi-lo > 30) || !(float64(mask) <= -(hi-lo)-20) {
		t.Fatalf("scores over [%g, %g], mask %g", lo, hi, mask)
	}
	m, err := runtime.Load(good, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m.Graph().Mask != mask {
		t.Errorf("runtime mask %g, file %g", m.Graph().Mask, mask)
	}
	m.Close()
	// The same file with the default mask: rewrite the constant.
	leaky := filepath.Join(dir, "leaky.gqf")
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	f, err = gqf.Parse(good, raw)
	if err != nil {
		t.Fatal(err)
	}
	mt, _ = f.Tensor(arch.ConstMask)
	start := 4096 + mt.Data.Offset // the data section of a version 2 file
	for i := range vals {
		if vals[i] != 0 {
			binary.LittleEndian.PutUint32(raw[start+uint64(4*i):], math.Float32bits(arch.MaskValue))
		}
	}
	if err := os.WriteFile(leaky, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	kl := map[string]float64{}
	for name, p := range map[string]string{"good": good, "leaky": leaky} {
		// Windows of 256 tokens: the early positions of each see many masked ones.
		rep, err := verify.Run(verify.Options{Artifact: p, Ref: gqfModel, Corpus: qualityEval, Ctx: 256, Chunks: 4, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		kl[name] = rep.KL.Mean
	}
	t.Logf("mask %g: KL %.5f; mask −50: KL %.5f", mask, kl["good"], kl["leaky"])
	if !(kl["good"] < kl["leaky"]/2) {
		t.Errorf("KL with the scores' mask %.5f, with −50 %.5f", kl["good"], kl["leaky"])
	}
}
