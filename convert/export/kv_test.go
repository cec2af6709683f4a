package export

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/onnx"
	"github.com/gquant/gquant/internal/peers"
	"github.com/gquant/gquant/runtime"
)

// kvExport exports the gqf file at path as deployment graphs into a new folder.
func kvExport(t *testing.T, path string, o KVOptions) string {
	t.Helper()
	f, err := gqf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := filepath.Join(t.TempDir(), "kv")
	if _, err := WriteKV(dir, f, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ortKV runs the export in dir through testdata/interop/ortkv.mjs over the windows and
// returns, per window, the logits of its positions from the prompt graph and from the token
// graph, and the greedy continuation of greedy (nil: none) for n tokens.
func ortKV(t *testing.T, node, modules, dir string, wins [][]int, greedy []int, n int) (prompt, token [][][]float64, cont []int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "logits.bin")
	req := map[string]any{"dir": dir, "windows": wins, "out": out}
	if greedy != nil {
		req["greedy"] = map[string]any{"prompt": greedy, "n": n}
	}
	var ans struct {
		Vocab  int   `json:"vocab"`
		Greedy []int `json:"greedy"`
	}
	peers.Run(t, node, modules, "ortkv.mjs", req, &ans)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	V, at := ans.Vocab, 0
	next := func(T int) [][]float64 {
		rows := make([][]float64, T)
		for p := range rows {
			rows[p] = make([]float64, V)
			for j := range rows[p] {
				rows[p][j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[at:])))
				at += 4
			}
		}
		return rows
	}
	for _, w := range wins {
		prompt = append(prompt, next(len(w)))
		token = append(token, next(len(w)))
	}
	if at != len(b) {
		t.Fatalf("ortkv.mjs: %d bytes of logits, read %d", len(b), at)
	}
	return prompt, token, ans.Greedy
}

// evalLogits returns the log-probabilities of every position of each window in m.
func evalLogits(t *testing.T, m *runtime.Model, wins [][]int) [][][]float64 {
	t.Helper()
	out := make([][][]float64, len(wins))
	V := m.Vocab()
	for i, w := range wins {
		lg, err := m.Eval(m.NewState(0), w, true)
		if err != nil {
			t.Fatal(err)
		}
		for p := range w {
			row := make([]float64, V)
			for j := range row {
				row[j] = float64(lg[p*V+j])
			}
			out[i] = append(out[i], logSoftmax(row))
		}
	}
	return out
}

// meanKL is the mean over positions of KL(p ‖ q), p given as logits, q as log-probabilities.
func meanKL(p [][][]float64, q [][][]float64) float64 {
	var s float64
	n := 0
	for i := range p {
		for j := range p[i] {
			s += kl(logSoftmax(p[i][j]), q[i][j])
			n++
		}
	}
	return s / float64(n)
}

func maxDiff(a, b [][][]float64) float64 {
	var d float64
	for i := range a {
		for j := range a[i] {
			for k := range a[i][j] {
				d = max(d, math.Abs(a[i][j][k]-b[i][j][k]))
			}
		}
	}
	return d
}

// TestInteropKV drives the deployment graphs of stories260k and stories3m (--ar 32 --ctx
// 128) in stock ONNX Runtime as a host does (ortkv.mjs: its own KV cache, masks and rotation
// tables from metadata.json) and compares the logits of every position of evaluation windows
// of 96 tokens with gquant's runtime on the same gqf file, for the prompt graph fed 32 tokens
// at a time and the token graph fed one at a time: the float export of the f16 file within
// KL 1e-5; the QDQ exports of the w8a16 and w4a16-lpbq files within 1 % of the file's own
// quantization error, KL(bf16 ‖ gquant); in two parts as in one (logits within 1e-3); and
// the float export's greedy continuation of the reference prompt equal to the runtime's
// (gquant run's Generate).
func TestInteropKV(t *testing.T) {
	node, modules := peers.Require(t, "onnxruntime-node")
	const ar, ctx, T, nWin = 32, 128, 96, 3
	for _, dir := range []string{model260k, peers.Stories3m(t)} {
		name := filepath.Base(dir)
		bf16, err := runtime.Load(dir, runtime.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		wins := windows(t, bf16, nWin, T)
		ref := evalLogits(t, bf16, wins)
		bf16.Close()
		prompt := readReference(t, dir)[0].ids
		for _, c := range []struct {
			scheme   string
			qdq      bool
			eightBit bool
		}{{"f16", false, false}, {"w8a16", true, false}, {"w4a16-lpbq", true, false}, {"w4a8-qnn", true, true}} {
			path := convertTo(t, dir, c.scheme, ctx)
			m, err := runtime.Load(path, runtime.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			ours := evalLogits(t, m, wins)
			var want []int
			if !c.qdq {
				if err := m.Generate(prompt, 24, runtime.Sampler{}, func(id int) bool { want = append(want, id); return true }); err != nil {
					t.Fatal(err)
				}
			}
			m.Close()
			klRef := 0.0
			for i := range ref {
				for j := range ref[i] {
					klRef += kl(ref[i][j], ours[i][j])
				}
			}
			klRef /= float64(nWin * T)
			var one [2][][][]float64
			for _, parts := range []int{1, 2} {
				kv := kvExport(t, path, KVOptions{QDQ: c.qdq, AR: ar, Ctx: ctx, Parts: parts})
				var g []int
				if !c.qdq {
					g = prompt
				}
				pl, tl, cont := ortKV(t, node, modules, kv, wins, g, 24)
				for k, got := range [][][][]float64{pl, tl} {
					mode := []string{"prompt", "token"}[k]
					klOrt := meanKL(got, ours)
					klBO := 0.0 // KL(bf16 ‖ ORT)
					for i := range ref {
						for j := range ref[i] {
							klBO += kl(ref[i][j], logSoftmax(got[i][j]))
						}
					}
					klBO /= float64(nWin * T)
					t.Logf("%s %s qdq=%v parts=%d %s graph: KL(ORT‖gquant) %.3g, KL(bf16‖gquant) %.3g, KL(bf16‖ORT) %.3g", name, c.scheme, c.qdq, parts, mode, klOrt, klRef, klBO)
					limit, what := 1e-5, "1e-5"
					if c.qdq {
						limit, what = 0.01*klRef, "1 % of KL(bf16‖gquant)"
					}
					if c.eightBit {
						// 8-bit activations: a rounding tie that ONNX Runtime's float arithmetic
						// breaks the other way moves a value by a whole step, and the difference
						// spreads layer by layer, so the two runs agree in their error, not value
						// by value: KL(bf16 ‖ ORT) within 20 % of KL(bf16 ‖ gquant).
						if r := klBO / klRef; !(r >= 0.8 && r <= 1.2) {
							t.Errorf("%s %s parts=%d %s graph: KL(bf16‖ORT) %.3g is %.2f× KL(bf16‖gquant) %.3g, want within 20 %%", name, c.scheme, parts, mode, klBO, r, klRef)
						}
						limit = math.Inf(1)
					}
					if !(klOrt <= limit) {
						t.Errorf("%s %s qdq=%v parts=%d %s graph: KL(ORT‖gquant) %.3g > %s (%.3g)", name, c.scheme, c.qdq, parts, mode, klOrt, what, limit)
					}
					if parts == 1 {
						one[k] = got
					} else if d := maxDiff(one[k], got); !(d <= 1e-3) {
						t.Errorf("%s %s qdq=%v %s graph: two parts differ from one by %.3g in a logit", name, c.scheme, c.qdq, mode, d)
					}
				}
				if !c.qdq && !slices.Equal(cont, want) {
					t.Errorf("%s %s parts=%d: greedy continuation in ONNX Runtime %v, gquant %v", name, c.scheme, parts, cont, want)
				}
			}
		}
	}
}

// standardOps are the ONNX ops the exports use, all of the standard (default) domain.
var standardOps = map[string]bool{"MatMul": true, "Mul": true, "Add": true, "Softmax": true, "Gather": true,
	"Reshape": true, "Transpose": true, "Sigmoid": true, "Concat": true, "Pow": true, "ReduceMean": true,
	"Sqrt": true, "Reciprocal": true, "QuantizeLinear": true, "DequantizeLinear": true}

// TestStandardOpsOnly walks every graph of the exports (full and deployment forms, float and
// QDQ, one part and two) and finds no op outside the standard ONNX domain, opset 21 alone
// imported.
func TestStandardOpsOnly(t *testing.T) {
	check := func(what string, m *onnx.ModelProto) {
		for _, op := range m.OpsetImport {
			if op.GetDomain() != "" || op.GetVersion() != onnx.Opset {
				t.Errorf("%s: opset import %q %d", what, op.GetDomain(), op.GetVersion())
			}
		}
		for _, n := range m.Graph.Node {
			if d := n.GetDomain(); (d != "" && d != "ai.onnx") || !standardOps[n.GetOpType()] {
				t.Errorf("%s: node %s: op %q of domain %q", what, n.GetName(), n.GetOpType(), n.GetDomain())
			}
		}
	}
	for _, scheme := range []string{"f16", "w8a16", "w4a16-lpbq"} {
		path := convertTo(t, model260k, scheme, 16)
		f, err := gqf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		qdqs := []bool{false}
		if scheme != "f16" {
			qdqs = append(qdqs, true)
		}
		for _, qdq := range qdqs {
			check(scheme+" onnx", readONNX(t, f, qdq))
			for _, parts := range []int{1, 2} {
				dir := kvExport(t, path, KVOptions{QDQ: qdq, AR: 8, Ctx: 32, Parts: parts})
				ents, _ := os.ReadDir(dir)
				n := 0
				for _, e := range ents {
					if !strings.HasSuffix(e.Name(), ".onnx") {
						continue
					}
					b, err := os.ReadFile(filepath.Join(dir, e.Name()))
					if err != nil {
						t.Fatal(err)
					}
					m := &onnx.ModelProto{}
					if err := proto.Unmarshal(b, m); err != nil {
						t.Fatal(err)
					}
					check(scheme+" "+e.Name(), m)
					n++
				}
				if n != 2*parts {
					t.Errorf("%s parts=%d: %d graphs, want %d", scheme, parts, n, 2*parts)
				}
			}
		}
		f.Close()
	}
}

// TestKVMetadata checks metadata.json against the graphs it describes: every input and
// output of every file with its shape and type, the I/O contract's names and shapes, and the
// external data files every large initializer points into.
func TestKVMetadata(t *testing.T) {
	path := convertTo(t, model260k, "w8a16", 16)
	dir := kvExport(t, path, KVOptions{QDQ: true, AR: 8, Ctx: 32, Parts: 2})
	b, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta Metadata
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.ContextLength != 32 || meta.Layers != 5 || meta.KVHeads != 4 || meta.HeadDim != 8 || meta.Vocab != 512 || len(meta.RopeInvFreq) != 4 || meta.AttentionMaskValue >= 0 {
		t.Errorf("metadata: %+v", meta)
	}
	if len(meta.Graphs) != 2 || meta.Graphs[0].Name != "prompt" || meta.Graphs[0].AR != 8 || meta.Graphs[1].Name != "token" || meta.Graphs[1].AR != 1 {
		t.Fatalf("graphs: %+v", meta.Graphs)
	}
	elem := map[int32]string{int32(onnx.TensorProto_FLOAT): "float32", int32(onnx.TensorProto_INT32): "int32"}
	for _, g := range meta.Graphs {
		if len(g.Files) != 2 || len(g.Parts) != 2 {
			t.Fatalf("%s: files %v", g.Name, g.Files)
		}
		for i, p := range g.Parts {
			bm, err := os.ReadFile(filepath.Join(dir, p.File))
			if err != nil {
				t.Fatal(err)
			}
			m := &onnx.ModelProto{}
			if err := proto.Unmarshal(bm, m); err != nil {
				t.Fatal(err)
			}
			same := func(what string, infos []IOInfo, vis []*onnx.ValueInfoProto) {
				if len(infos) != len(vis) {
					t.Fatalf("%s %s: %d in metadata, %d in the graph", p.File, what, len(infos), len(vis))
				}
				for k, vi := range vis {
					tt := vi.GetType().GetTensorType()
					var dims []int64
					for _, d := range tt.GetShape().GetDim() {
						dims = append(dims, d.GetDimValue())
					}
					io := infos[k]
					if io.Name != vi.GetName() || elem[tt.GetElemType()] != io.Dtype || !slices.Equal(dims, io.Shape) {
						t.Errorf("%s %s %d: metadata %+v, graph %s %v %d", p.File, what, k, io, vi.GetName(), dims, tt.GetElemType())
					}
					if io.Dtype == "float32" && io.Encoding == nil {
						t.Errorf("%s: %s has no encoding", p.File, io.Name)
					}
				}
			}
			same("inputs", p.Inputs, m.Graph.Input)
			same("outputs", p.Outputs, m.Graph.Output)
			want := map[string][]int64{"attention_mask": {1, 1, int64(g.AR), 32}, "position_ids_cos": {1, 1, int64(g.AR), 4}}
			l := p.Layers[0]
			want[fmt.Sprintf("past_key_%d_in", l)] = []int64{4, 1, 8, int64(32 - g.AR)}
			want[fmt.Sprintf("past_value_%d_in", l)] = []int64{4, 1, int64(32 - g.AR), 8}
			if i == 0 {
				want["input_ids"] = []int64{1, int64(g.AR)}
			} else {
				want["blk.2.out"] = []int64{1, int64(g.AR), 64}
			}
			for _, io := range p.Inputs {
				if w, ok := want[io.Name]; ok {
					if !slices.Equal(w, io.Shape) {
						t.Errorf("%s: %s %v, want %v", p.File, io.Name, io.Shape, w)
					}
					delete(want, io.Name)
				}
			}
			if len(want) > 0 {
				t.Errorf("%s: inputs missing: %v", p.File, want)
			}
			outs := map[string]bool{}
			for _, io := range p.Outputs {
				outs[io.Name] = true
			}
			if last := i == 1; outs["logits"] != last || outs["blk.2.out"] == last || !outs[fmt.Sprintf("past_key_%d_out", l)] {
				t.Errorf("%s: outputs %v", p.File, outs)
			}
			for _, in := range m.Graph.Initializer {
				if in.GetDataLocation() != onnx.TensorProto_EXTERNAL {
					if len(in.GetRawData()) >= onnx.ExternalMin {
						t.Errorf("%s: %s: %d bytes inline", p.File, in.GetName(), len(in.GetRawData()))
					}
					continue
				}
				if loc := in.GetExternalData()[0].GetValue(); loc != p.Data {
					t.Errorf("%s: %s in %s, want %s", p.File, in.GetName(), loc, p.Data)
				}
			}
		}
	}
}

// TestAIMETKVNamesMatchONNX: the encodings of the deployment graphs (AIMETKV, and the
// export's encodings.json) name exactly the tensors of the float prompt and token graphs:
// every node output and float input has an activation entry, every float initializer a
// parameter entry (the insides of RmsNorm's standard-op form aside), and nothing else.
func TestAIMETKVNamesMatchONNX(t *testing.T) {
	path := convertTo(t, model260k, "w8a16", 16)
	dir := kvExport(t, path, KVOptions{AR: 8, Ctx: 32})
	f, err := gqf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc, err := AIMETKV(f, 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := encodings.Read(filepath.Join(dir, "encodings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Activations) != len(enc.Activations) || len(saved.Params) != len(enc.Params) {
		t.Errorf("encodings.json: %d/%d entries, AIMETKV %d/%d", len(saved.Activations), len(saved.Params), len(enc.Activations), len(enc.Params))
	}
	acts, params := map[string]bool{}, map[string]bool{}
	for _, name := range []string{"prompt.onnx", "token.onnx"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m := &onnx.ModelProto{}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		for _, in := range m.Graph.Input {
			if in.GetType().GetTensorType().GetElemType() == int32(onnx.TensorProto_FLOAT) {
				acts[in.GetName()] = true
			}
		}
		graphNames(m, acts, params)
	}
	compare(t, "activations", acts, enc.Activations)
	compare(t, "params", params, enc.Params)
	for _, name := range []string{"past_key_0_in", "past_value_4_out", "attention_mask", "position_ids_cos", "blk.0.k_cache"} {
		e, ok := enc.Activation(name)
		if !ok || e.Dtype != encodings.Int || e.Bitwidth != 16 {
			t.Errorf("%s: %+v", name, e)
		}
	}
	k, _ := enc.Activation("past_key_0_out")
	r, _ := enc.Activation("blk.0.k_rope")
	if k == nil || r == nil || k.Scale[0] != r.Scale[0] || k.Offset[0] != r.Offset[0] {
		t.Errorf("past_key_0_out %+v, blk.0.k_rope %+v: want the same encoding", k, r)
	}
}

// TestInteropKVFamilies: the deployment graphs of the other families gquant lowers, run by
// ONNX Runtime as TestInteropKV runs them, reproduce gquant's runtime on the same f16 file:
// tiny-llama3 (grouped-query attention, llama3 rope scaling in rope_inv_freq, tied), tiny-qwen2
// (q/k/v biases), tiny-qwen3 (per-head q/k norms, head_dim 128 ≠ hidden/heads), tiny-gemma2
// (GeGLU, post-norms, scaled embedding, soft-capping, a window of 16 in a context of 32:
// attention_mask_sliding), tiny-gemma3 (its sliding layers' own rotary table,
// position_ids_*_local) and tiny-phi3 (fused gate_up, partial rotary, longrope's long factors
// and attention factor), in two parts, prompt and token graphs, KL ≤ 1e-5 and every logit
// within 1e-3 of the runtime's.
func TestInteropKVFamilies(t *testing.T) {
	node, modules := peers.Require(t, "onnxruntime-node")
	for _, preset := range []string{"tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-gemma2", "tiny-gemma3", "tiny-phi3"} {
		spec, err := synth.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		switch preset {
		case "tiny-gemma2", "tiny-gemma3":
			spec.SlidingWindow = 16
			if preset == "tiny-gemma3" {
				spec.Layers, spec.SlidingPattern = 3, 3
			}
		case "tiny-phi3":
			spec.OriginalContext, spec.RopeScaling = 16, &synth.RopeScaling{Type: "longrope"}
			for i := range 24 {
				x := float64(i) / 23
				spec.RopeScaling.ShortFactor = append(spec.RopeScaling.ShortFactor, 1+0.5*x*x)
				spec.RopeScaling.LongFactor = append(spec.RopeScaling.LongFactor, 1+39*x*x*x)
			}
		}
		dir := filepath.Join(t.TempDir(), preset)
		if err := synth.Generate(dir, spec, synth.Options{Seed: 7, TokenizerDir: model260k}); err != nil {
			t.Fatal(err)
		}
		path := convertTo(t, dir, "f16", 32)
		m, err := runtime.Load(path, runtime.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		wins := windows(t, m, 2, 24)
		ours := evalLogits(t, m, wins)
		m.Close()
		kv := kvExport(t, path, KVOptions{AR: 8, Ctx: 32, Parts: 2})
		pl, tl, _ := ortKV(t, node, modules, kv, wins, nil, 0)
		for k, got := range [][][][]float64{pl, tl} {
			mode := []string{"prompt", "token"}[k]
			klOrt := meanKL(got, ours)
			var d float64
			for i := range got {
				for p := range got[i] {
					lq := logSoftmax(got[i][p])
					for j := range lq {
						d = max(d, math.Abs(lq[j]-ours[i][p][j]))
					}
				}
			}
			t.Logf("%s %s graph: KL(ORT‖gquant) %.3g, largest log-probability difference %.3g", preset, mode, klOrt, d)
			if !(klOrt <= 1e-5) || !(d <= 1e-3) {
				t.Errorf("%s %s graph: KL %.3g (limit 1e-5), log-probabilities within %.3g (limit 1e-3)", preset, mode, klOrt, d)
			}
		}
	}
}
