package gqfconv_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/convert/gqfconv"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/formats/safetensors"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
)

// TestGQFRoundTrip converts stories260k to a w8a16 gqf file, inspects it and runs it with its
// weights widened to float32 (runtime.Options.Widen), and checks that its logits equal those of the same scheme applied in memory: a copy of the HF
// checkpoint whose matrices hold the int8 symmetric per-channel weights decoded to float32
// (quantize.QuantizeGroups), run with every point of the graph quantized to its 16-bit
// encoding by a hook (written out below, not gqf.QDQ).
func TestGQFRoundTrip(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "models", "stories260k")
	corpus := filepath.Join("..", "..", "testdata", "corpora", "tinystories-calib.txt")
	out := filepath.Join(t.TempDir(), "m.gqf")
	plan, err := gqfconv.Convert(dir, out, gqfconv.Options{Scheme: "w8a16", MaxLen: 32, Corpus: corpus, CalibWindows: 2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := gqf.Inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.(*gqf.Report); r.Scheme != "w8a16" || r.Graph == nil || len(r.Graph.Nodes) == 0 {
		t.Fatalf("inspect: %+v", r)
	}
	encs := map[string]*gqf.Encoding{}
	f, err := gqf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range f.Manifest.Graph.Activations {
		if a.Encoding == nil || a.Encoding.Bits != 16 {
			t.Fatalf("%s: encoding %v, want 16 bits", a.Name, a.Encoding)
		}
		encs[a.Name] = a.Encoding
	}
	f.Close()

	ids := []int{1, 403, 407, 261, 378}
	m, err := runtime.Load(out, runtime.Options{Threads: 1, Widen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// the runtime decodes the weights to float32 but reports what the file stores
	if all, lin := m.BPW(); math.Abs(all-plan.BPW) > 1e-9 || math.Abs(lin-plan.BPWLinear) > 1e-9 {
		t.Errorf("runtime bpw %.4f / %.4f, plan %.4f / %.4f", all, lin, plan.BPW, plan.BPWLinear)
	}
	got, err := m.Eval(m.NewState(0), ids, true)
	if err != nil {
		t.Fatal(err)
	}

	memDir := int8Copy(t, dir)
	matched := map[string]bool{}
	hooks := &runtime.Hooks{Modifies: func(name string) bool { return encs[name] != nil }, Activation: func(name string, x []float32, n, dim int) {
		e, ok := encs[name]
		if !ok {
			return
		}
		matched[name] = true
		s, off := e.Scale[0], float64(e.Offset[0])
		for i, v := range x {
			q := math.Max(0, math.Min(65535, math.RoundToEven(float64(v/s))-off))
			x[i] = float32(float32(q+off) * s)
		}
	}}
	mem, err := runtime.Load(memDir, runtime.Options{Threads: 1, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	want, err := mem.Eval(mem.NewState(0), ids, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range runtime.ActivationNames(mem.Spec()) {
		if !matched[name] {
			t.Errorf("runtime activation %s has no encoding in the gqf graph", name)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("logit %d: gqf file %g, in memory %g", i, got[i], want[i])
		}
	}
}

// int8Copy writes a copy of an HF folder whose matrices (linear layers, embeddings, head) are
// replaced by their int8 symmetric per-channel quantization, decoded to float32.
func int8Copy(t *testing.T, dir string) string {
	t.Helper()
	model, err := hf.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	fam, err := arch.ForHF(model.Config.Architectures[0])
	if err != nil {
		t.Fatal(err)
	}
	spec, err := fam.SpecFromHF(model.Config.Raw)
	if err != nil {
		t.Fatal(err)
	}
	matrices := map[string]bool{}
	for _, x := range fam.Tensors(spec) {
		if r := x.Ref.Role; r.IsLinear() || r == arch.TokenEmbd || r == arch.Output {
			matrices[x.HFName] = true
		}
	}
	var tensors []safetensors.NamedTensor
	for _, ti := range model.Checkpoint.Tensors() {
		data, err := model.Checkpoint.Data(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !matrices[ti.Name] {
			tensors = append(tensors, safetensors.NamedTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: append([]byte(nil), data...)})
			continue
		}
		w, err := model.Checkpoint.ToFloat32(ti.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, err := quantize.QuantizeGroups(quantize.GroupSpec{Bits: 8, Symmetric: true}, w, ti.Shape[0], ti.Shape[1], nil)
		if err != nil {
			t.Fatal(err)
		}
		deq := g.Dequantize()
		b := make([]byte, 4*len(deq))
		for i, v := range deq {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		tensors = append(tensors, safetensors.NamedTensor{Name: ti.Name, DType: safetensors.F32, Shape: ti.Shape, Data: b})
	}
	out := filepath.Join(t.TempDir(), "int8")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(out, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
