package gqfconv_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/convert/gqfconv"
	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
)

const (
	qnnModel  = "../../testdata/models/stories260k"
	qnnCorpus = "../../testdata/corpora/tinystories-calib.txt"
)

func qnnNeedCorpus(t *testing.T) {
	if _, err := os.Stat(qnnCorpus); err != nil {
		t.Skipf("corpus not available: %v", err)
	}
}

// qnnModels are the model shapes of the calibrate → convert round trip: the bundled llama
// models and synthetic Qwen3 (q/k norms per head, head_dim ≠ hidden/heads, GQA) and Qwen2
// (q/k/v biases: the graph's NAME_fc points).
func qnnModels(t *testing.T) map[string]string {
	t.Helper()
	models := map[string]string{
		"stories260k": filepath.Join("..", "..", "testdata", "models", "stories260k"),
		"stories3m":   filepath.Join("..", "..", "testdata", "models", "stories3m"),
	}
	for _, p := range []string{"tiny-qwen3", "tiny-qwen2"} {
		spec, err := synth.Preset(p)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), p)
		if err := synth.Generate(dir, spec, synth.Options{Seed: 3}); err != nil {
			t.Fatal(err)
		}
		models[p] = dir
	}
	return models
}

// TestQNNEncodingsRoundTrip: for every model shape and QNN scheme, the encodings calibrate
// writes (calibrate.QNN, WriteEncodings) are taken by convert --encodings for the same scheme:
// every activation of the file's graph gets the file's encoding of its point, at the scheme's
// width; the graph's mask is the one the encodings were made for (calibrate.EncodingsMask),
// with kq_masked's range reaching it; the 4-bit schemes' LPBQ weight encodings are the ones
// the file stores; and the runtime loads the file, simulating every encoding, to finite
// logits.
func TestQNNEncodingsRoundTrip(t *testing.T) {
	qnnNeedCorpus(t)
	models := qnnModels(t)
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		dir := models[name]
		t.Run(name, func(t *testing.T) {
			res, err := calibrate.Calibrate(dir, calibrate.Options{Corpus: qnnCorpus, Ctx: 32, Tokens: 64, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, scheme := range []string{"w8a16", "w4a16-qnn", "w4a8-qnn"} {
				bits, err := gqfconv.ActivationBits(scheme)
				if err != nil {
					t.Fatal(err)
				}
				ef, err := calibrate.QNN(res.Stats, dir, res.Spec, scheme, quantize.RangeOptions{})
				if err != nil {
					t.Fatalf("%s: %v", scheme, err)
				}
				js := filepath.Join(t.TempDir(), scheme+".json")
				if err := calibrate.WriteEncodings(js, ef, encodings.V1); err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), scheme+".gqf")
				if _, err := gqfconv.Convert(dir, out, gqfconv.Options{Scheme: scheme, MaxLen: 32, Encodings: js}); err != nil {
					t.Fatalf("%s: convert --encodings: %v", scheme, err)
				}
				checkQNNFile(t, scheme, out, js, res.Spec, bits)
			}
		})
	}
}

func checkQNNFile(t *testing.T, scheme, out, js string, spec *arch.Spec, bits int) {
	t.Helper()
	ef, err := encodings.Read(js)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gqf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	low, err := arch.ModelGraph(spec).Lower(int(f.Manifest.Graph.MaxLen))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range f.Manifest.Graph.Activations {
		e := a.Encoding
		if e == nil || int(e.Bits) != bits {
			t.Fatalf("%s: %s: encoding %v, want %d bits", scheme, a.Name, e, bits)
		}
		want, ok := ef.Activation(low.Point[a.Name])
		if !ok {
			t.Fatalf("%s: %s: point %s not in the encodings", scheme, a.Name, low.Point[a.Name])
		}
		if e.Scale[0] != want.Scale[0] || e.Offset[0] != want.Offset[0] {
			t.Fatalf("%s: %s: scale %g offset %d, the encodings say %g %d", scheme, a.Name, e.Scale[0], e.Offset[0], want.Scale[0], want.Offset[0])
		}
		n++
	}
	if n != len(low.Graph.Activations) {
		t.Fatalf("%s: %d activations encoded, the graph has %d", scheme, n, len(low.Graph.Activations))
	}
	// The mask: the file's attn.mask is the one the encodings were made for, and kq_masked's
	// range reaches below every visible score by it.
	mask, ok := calibrate.EncodingsMask(ef, spec)
	if !ok {
		t.Fatalf("%s: no mask from the encodings", scheme)
	}
	mt, ok := f.Tensor(arch.ConstMask)
	if !ok {
		t.Fatalf("%s: no %s", scheme, arch.ConstMask)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(f.Bytes(mt.Data)[4:])); got != mask {
		t.Errorf("%s: attn.mask %g, the encodings' mask %g", scheme, got, mask)
	}
	for l := 0; l < spec.Layers; l++ {
		sc, _ := ef.Activation(fmt.Sprintf("blk.%d.kq_scaled", l))
		km, _ := ef.Activation(fmt.Sprintf("blk.%d.kq_masked", l))
		if lo, loS := float64(km.Scale[0])*float64(km.Offset[0]), float64(sc.Scale[0])*float64(sc.Offset[0]); lo > loS+float64(mask)/2 {
			t.Errorf("%s: blk.%d.kq_masked starts at %g: the mask %g is not within its range (kq_scaled from %g)", scheme, l, lo, mask, loS)
		}
	}
	// The 4-bit schemes' weight encodings are those of the file's LPBQ tensors.
	if strings.HasPrefix(scheme, "w4") {
		lpbq := 0
		for _, p := range ef.Params {
			if p.Type != encodings.LPBQ {
				continue
			}
			lpbq++
			tt, ok := f.Tensor(p.Name)
			if !ok || tt.Encoding.Granularity != gqf.Granularity_LPBQ || int(tt.Encoding.BlockSize) != p.BlockSize {
				t.Fatalf("%s: %s: LPBQ in the encodings, %v in the file", scheme, p.Name, tt.GetEncoding())
			}
			if !slices.Equal(f.Scales(tt), p.Scale) {
				t.Fatalf("%s: %s: channel scales differ from the file's", scheme, p.Name)
			}
			for i, k := range f.BlockScales(tt) {
				if uint16(k) != p.PerBlockIntScale[i] {
					t.Fatalf("%s: %s: block scale %d is %d, the file's %d", scheme, p.Name, i, p.PerBlockIntScale[i], k)
				}
			}
		}
		if lpbq == 0 {
			t.Errorf("%s: no LPBQ weight encodings", scheme)
		}
	}
	m, err := runtime.Load(out, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatalf("%s: runtime: %v", scheme, err)
	}
	defer m.Close()
	ids := []int{1, 403, 407, 261, 378}
	st := m.NewState(len(ids))
	logits, err := m.Eval(st, ids, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%s: logit %d is %g", scheme, i, v)
		}
	}
}

// Encodings of another activation width than the scheme's are refused in one line naming the
// file and the tensor; statistics lacking graph points (a version 1 file) are refused by
// calibrate.QNN rather than written into a file convert would refuse.
func TestQNNEncodingsRefused(t *testing.T) {
	qnnNeedCorpus(t)
	res, err := calibrate.Calibrate(qnnModel, calibrate.Options{Corpus: qnnCorpus, Ctx: 32, Tokens: 32, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	ef, err := calibrate.QNN(res.Stats, qnnModel, res.Spec, "w4a16-qnn", quantize.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(t.TempDir(), "a16.json")
	if err := calibrate.WriteEncodings(js, ef, encodings.V1); err != nil {
		t.Fatal(err)
	}
	_, err = gqfconv.Convert(qnnModel, filepath.Join(t.TempDir(), "m.gqf"), gqfconv.Options{Scheme: "w4a8-qnn", MaxLen: 32, Encodings: js})
	if err == nil || !strings.Contains(err.Error(), js+": token_embd: bw 16, but the scheme's activations are 8-bit") || strings.Contains(err.Error(), "\n") {
		t.Errorf("16-bit encodings for w4a8-qnn: %v", err)
	}
	if _, err := calibrate.QNN(res.Stats, qnnModel, res.Spec, "w4a4", quantize.RangeOptions{}); err == nil || !strings.Contains(err.Error(), `"w4a4" is not a QNN scheme`) {
		t.Errorf("unknown scheme: %v", err)
	}

	old := res.Stats
	old.Version = 1
	old.Acts = slices.DeleteFunc(old.Acts, func(a *stats.ActStats) bool { return strings.HasSuffix(a.Name, "_softmax") })
	old.Reindex()
	_, err = calibrate.QNN(old, qnnModel, res.Spec, "w8a16", quantize.RangeOptions{})
	if err == nil || !strings.Contains(err.Error(), "lack 5 of the graph's") || !strings.Contains(err.Error(), "blk.0.kq_softmax") {
		t.Errorf("version 1 statistics without the softmax points: %v", err)
	}
}
