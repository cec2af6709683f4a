package runtime_test

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/convert/gqfconv"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/hf/synth"
	. "github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
	"google.golang.org/protobuf/proto"
)

// TestPointsAreTheLoweredTensors checks that the points the runtime names (what calibration
// observes and a gqf file's encodings quantize) are exactly the tensors the lowered graph
// computes, the data-movement ones being attached to a point, for every family's branch:
// Llama, Qwen2's biases, Qwen3's per-head norms, grouped-query attention.
func TestPointsAreTheLoweredTensors(t *testing.T) {
	for _, preset := range []string{"tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gemma2", "tiny-gemma3", "tiny-phi3"} {
		syn, err := synth.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := synth.Generate(dir, syn, synth.Options{Seed: 1}); err != nil {
			t.Fatal(err)
		}
		m := loadModel(t, dir, Options{Threads: 1})
		spec := m.Spec()
		g := m.Graph()
		low, err := g.Lower(8)
		if err != nil {
			t.Fatal(err)
		}
		points := g.Points()
		set := map[string]bool{}
		for _, p := range points {
			set[p] = true
		}
		reached := map[string]bool{}
		for _, a := range low.Graph.Activations {
			pt, ok := low.Point[a.Name]
			if !ok || !set[pt] {
				t.Errorf("%s: lowered tensor %s belongs to no point of the graph (%q)", preset, a.Name, pt)
			}
			reached[pt] = true
		}
		for _, p := range points {
			if !reached[p] {
				t.Errorf("%s: point %s has no tensor in the lowered graph", preset, p)
			}
		}
		if got := ActivationNames(spec); !slices.Equal(got, points) {
			t.Errorf("%s: ActivationNames differ from the graph's points", preset)
		}
		if (spec.QKVBias && !set["blk.0.q_fc"]) || (spec.QKNorm && !set["blk.1.k_norm"]) || (spec.Heads != spec.KVHeads) != (low.Point["blk.0.k_rep"] == "blk.0.k_rope") {
			t.Errorf("%s: the family's branches are missing from the points", preset)
		}
	}
}

// TestPrimitiveForm runs every node in its primitive form (a hook that modifies every point,
// here with an identity) and checks it against the fast path: the same logits to float32
// rounding (it sums the masked positions' e^−50 and computes sigmoid on its own), and, on the
// first token's attention scores, the causal mask over the later positions of the batch.
func TestPrimitiveForm(t *testing.T) {
	for _, preset := range []string{"tiny-qwen2", "tiny-qwen3"} {
		spec, err := synth.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := synth.Generate(dir, spec, synth.Options{Seed: 2}); err != nil {
			t.Fatal(err)
		}
		ids := synthIDs(9)
		plain := loadModel(t, dir, Options{Threads: 2})
		want, err := plain.Eval(plain.NewState(0), ids, true)
		if err != nil {
			t.Fatal(err)
		}
		var scaled, masked, soft []float32
		h := &Hooks{Modifies: func(string) bool { return true }, Activation: func(name string, x []float32, n, dim int) {
			switch name {
			case "blk.0.kq_scaled":
				scaled = append([]float32(nil), x[:dim]...)
			case "blk.0.kq_masked":
				masked = append([]float32(nil), x[:dim]...)
			case "blk.0.kq_softmax":
				soft = append([]float32(nil), x[:dim]...)
			}
		}}
		prim := loadModel(t, dir, Options{Threads: 2, Hooks: h})
		got, err := prim.Eval(prim.NewState(0), ids, true)
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i := range want {
			worst = max(worst, math.Abs(float64(got[i]-want[i]))/(1+math.Abs(float64(want[i]))))
		}
		if worst > 1e-5 {
			t.Errorf("%s: primitive form differs from the fast path by %g (relative)", preset, worst)
		}
		P := len(ids) // token 0's row: every head over the 9 positions
		if len(masked) != spec.Heads*P {
			t.Fatalf("%s: kq_masked row of %d values, want %d", preset, len(masked), spec.Heads*P)
		}
		for h := 0; h < spec.Heads; h++ {
			for j := 1; j < P; j++ {
				if masked[h*P+j] != scaled[h*P+j]+arch.MaskValue || soft[h*P+j] > 1e-15 {
					t.Fatalf("%s: head %d position %d: scaled %g masked %g softmax %g", preset, h, j, scaled[h*P+j], masked[h*P+j], soft[h*P+j])
				}
			}
			if math.Abs(float64(soft[h*P]-1)) > 1e-6 {
				t.Errorf("%s: head %d: token 0 attends %g to itself, want 1", preset, h, soft[h*P])
			}
		}
	}
}

// TestObservePoints: Hooks.Points limits what Activation receives, and the logits stay those
// of the unobserved model.
func TestObservePoints(t *testing.T) {
	dir := modelDir(t, stories260k)
	ids := []int{1, 403, 407, 261, 378}
	plain := loadModel(t, dir, Options{Threads: 2})
	want, err := plain.Eval(plain.NewState(8), ids, true)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	h := &Hooks{Points: func(p string) bool { return p == "blk.2.out" || p == "blk.1.kq_softmax" },
		Activation: func(name string, x []float32, n, dim int) { seen = append(seen, name) }}
	m := loadModel(t, dir, Options{Threads: 2, Hooks: h})
	got, err := m.Eval(m.NewState(8), ids, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Error("observing two points changed the logits")
	}
	if !slices.Equal(seen, []string{"blk.1.kq_softmax", "blk.2.out"}) {
		t.Errorf("observed %v", seen)
	}
}

// rewriteGQF copies a gqf file with its manifest edited.
func rewriteGQF(t *testing.T, in, out string, edit func(m *gqf.Manifest)) {
	t.Helper()
	f, err := gqf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := proto.Clone(f.Manifest).(*gqf.Manifest)
	tensors := m.Tensors
	m.Tensors = nil
	edit(m)
	b := gqf.NewBuilder(m)
	for i, tt := range tensors {
		src := f.Manifest.Tensors[i]
		b.AddTensor(tt, f.Bytes(src.Data), f.Bytes(src.Scales), f.Bytes(src.Zeros), f.Bytes(src.BlockScales))
	}
	if err := b.WriteFile(out, true); err != nil {
		t.Fatal(err)
	}
}

// TestGQFEncodingsPlacedOrRefused: every activation encoding of a w8a16 file is simulated
// (Encodings), and a file whose encodings name no tensor of the graph, or give a
// data-movement tensor another encoding than the tensor it moves, is refused in one line
// naming them.
func TestGQFEncodingsPlacedOrRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gqf")
	if _, err := gqfconv.Convert(stories260k, path, gqfconv.Options{Scheme: "w8a16", MaxLen: 16, Corpus: filepath.Join("..", "testdata", "corpora", "tinystories-calib.txt"), CalibWindows: 2}); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, path, Options{Threads: 1})
	placed, total := m.Encodings()
	low, err := m.Graph().Lower(16)
	if err != nil {
		t.Fatal(err)
	}
	if total != len(low.Graph.Activations) || placed != total {
		t.Errorf("%d of %d encodings placed; the graph has %d activations", placed, total, len(low.Graph.Activations))
	}
	for _, c := range []struct {
		name string
		edit func(m *gqf.Manifest)
		want []string
	}{
		{"unknown names", func(m *gqf.Manifest) {
			g := m.Graph
			last := g.Activations[len(g.Activations)-1]
			for _, name := range []string{"mystery", "enigma"} {
				g.Nodes = append(g.Nodes, &gqf.Node{Name: name, Op: gqf.OpSigmoid, Inputs: []string{last.Name}, Outputs: []string{name}})
				g.Activations = append(g.Activations, &gqf.Value{Name: name, Dtype: gqf.DataType_F32, Shape: last.Shape, Encoding: last.Encoding})
			}
		}, []string{"2 activation encodings name no tensor of the llama graph: enigma, mystery"}},
		{"requantized data movement", func(m *gqf.Manifest) {
			for _, a := range m.Graph.Activations {
				if a.Name == "blk.1.v_heads" {
					a.Encoding.Scale[0] *= 2
				}
			}
		}, []string{"1 data-movement tensors carry another encoding", "blk.1.v and blk.1.v_heads"}},
	} {
		bad := filepath.Join(dir, "bad.gqf")
		rewriteGQF(t, path, bad, c.edit)
		_, err := Load(bad, Options{Threads: 1})
		if err == nil {
			t.Errorf("%s: loaded", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), bad+": ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %q, want one line naming the file and containing %q", c.name, err, w)
			}
		}
	}
}
