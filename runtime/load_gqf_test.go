package runtime

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// TestGQFRoundTrip converts stories260k to a w8a16 gqf file, inspects it and runs it, and
// checks that its logits equal those of the same scheme applied in memory to the HF
// checkpoint: int8 symmetric per-channel weights (quantize.QuantizeGroups) and every named
// activation quantized to its 16-bit encoding (written out below, not gqf.QDQ).
func TestGQFRoundTrip(t *testing.T) {
	dir := filepath.Join("..", "testdata", "models", "stories260k")
	corpus := filepath.Join("..", "..", "shared", "corpora", "tinystories-calib.txt")
	out := filepath.Join(t.TempDir(), "m.gqf")
	_, err := convert.ConvertGQF(dir, out, convert.GQFOptions{Scheme: "w8a16", MaxLen: 32, Corpus: corpus, CalibLines: 16, CalibWindows: 2})
	if err != nil {
		t.Skipf("conversion needs the calibration corpus: %v", err)
	}

	// inspect
	rep, err := gqf.Inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.(*gqf.Report)
	if r.Scheme != "w8a16" || r.Graph == nil || len(r.Graph.Nodes) == 0 {
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

	// runtime on the file
	ids := []int{1, 403, 407, 261, 378}
	m, err := Load(out, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got, err := m.Eval(m.NewState(0), ids, true)
	if err != nil {
		t.Fatal(err)
	}

	// the same scheme in memory
	src, err := openHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	hfTensor := src.tensor
	src.tensor = func(at arch.Tensor) (rawTensor, bool, error) {
		rt, ok, err := hfTensor(at)
		if err != nil || !ok {
			return rt, ok, err
		}
		role := at.Ref.Role
		if !role.IsLinear() && role != arch.TokenEmbd && role != arch.Output {
			return rt, ok, nil
		}
		w, err := decodeVector(rawTensor{name: rt.name, typ: rt.typ, shape: []int{rt.shape[0] * rt.shape[1]}, data: rt.data})
		if err != nil {
			return rt, ok, err
		}
		gt, err := quantize.QuantizeGroups(quantize.GroupSpec{Bits: 8, Symmetric: true}, w, rt.shape[0], rt.shape[1], nil)
		if err != nil {
			return rt, ok, err
		}
		deq := gt.Dequantize()
		return rawTensor{name: rt.name, typ: gguf.F32, shape: rt.shape, data: f32le(deq)}, true, nil
	}
	matched := map[string]bool{}
	hooks := &Hooks{Activation: func(name string, x []float32, n, dim int) {
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
	mem, err := build(src, Options{Threads: 1, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	want, err := mem.Eval(mem.NewState(0), ids, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ActivationNames(mem.Spec()) {
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

func f32le(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}
