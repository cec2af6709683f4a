package convert_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime/arch"
)

// recording is a Sequence that keeps what Advance was given.
type recording struct {
	*calibrate.Sequential
	got      map[string][]float32
	observed []int
}

func (r *recording) Observe(i int) error {
	r.observed = append(r.observed, i)
	return r.Sequential.Observe(i)
}

func (r *recording) Advance(i int, w map[string][]float32) error {
	for k, v := range w {
		r.got[k] = append([]float32(nil), v...)
	}
	return r.Sequential.Advance(i, w)
}

// TestSequentialHandsBackTheFilesValues: layer-sequential GPTQ into Q4_0 gives the model, for
// every stage, exactly the values the GGUF file holds (decoded from its bytes), in the HF
// checkpoint's row order (llama's Q/K rows permuted back): each is the source weight up to
// Q4_0's rounding (within 20 % RMS; rows in the wrong order give errors the size of the
// weights themselves). Every stage is observed
// once, in order.
func TestSequentialHandsBackTheFilesValues(t *testing.T) {
	dir := "../testdata/models/stories260k"
	seq, err := calibrate.NewSequential(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt", Ctx: 64, Tokens: 512, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	rec := &recording{Sequential: seq, got: map[string][]float32{}}
	out := filepath.Join(t.TempDir(), "seq.gguf")
	if _, err := convert.Convert(dir, out, convert.Options{Scheme: "q4_0", Method: convert.MethodGPTQ, Sequence: rec, Threads: 2,
		GPTQ: quantize.GPTQOptions{Damp: 0.01, ActOrder: true, StaticGroups: true}}); err != nil {
		t.Fatal(err)
	}
	stages := seq.Stages()
	for i, o := range rec.observed {
		if o != i {
			t.Fatalf("observed stages %v, want 0..%d in order", rec.observed, len(stages)-1)
		}
	}
	// stories260k ties its output: every stage but the output's, 4 per block.
	if len(rec.observed) != len(stages)-1 || len(stages) != 4*seq.Layers()+1 {
		t.Fatalf("observed %d of %d stages (%d blocks)", len(rec.observed), len(stages), seq.Layers())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := hf.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fam, _ := arch.ForHF(m.Config.Architectures[0])
	spec, err := fam.SpecFromHF(m.Config.Raw)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, tn := range fam.Tensors(spec) {
		name := tn.Ref.GGUFName()
		got := rec.got[name]
		if !tn.Ref.Role.IsLinear() || tn.Ref.Layer < 0 {
			continue
		}
		if got == nil {
			t.Fatalf("%s: not handed back", name)
		}
		idx, ok := f.TensorIndex(name)
		if !ok {
			t.Fatalf("%s: not in the file", name)
		}
		ti := f.Tensors[idx]
		codec, err := quantize.For(ti.Type)
		if err != nil {
			t.Fatal(err)
		}
		rows, cols := tn.Shape[0], tn.Shape[1]
		file := make([]float32, rows*cols)
		codec.Dequantize(file, f.TensorData(idx))
		src, err := m.Checkpoint.ToFloat32(tn.HFName, nil)
		if err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for r := 0; r < rows; r++ {
			sr := arch.SourceRow(tn.Transform, spec, r)
			for j := 0; j < cols; j++ {
				g := got[sr*cols+j]
				if math.Float32bits(g) != math.Float32bits(file[r*cols+j]) {
					t.Fatalf("%s: row %d (HF row %d) col %d: handed back %v, the file holds %v", name, r, sr, j, g, file[r*cols+j])
				}
				d := float64(g - src[sr*cols+j])
				num += d * d
				den += float64(src[sr*cols+j]) * float64(src[sr*cols+j])
			}
		}
		if rel := math.Sqrt(num / den); rel > 0.2 {
			t.Fatalf("%s: handed-back values are %.0f %% RMS from the source weights", name, 100*rel)
		}
		checked++
	}
	if checked != 7*seq.Layers() {
		t.Fatalf("checked %d weights, want %d", checked, 7*seq.Layers())
	}
}
