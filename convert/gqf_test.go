package convert

import (
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/convert/export"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/runtime"
)

const (
	gqfModel  = "../testdata/models/stories260k"
	gqfCorpus = "../testdata/corpora/tinystories-calib.txt"
)

// calibOpts are small calibration settings for tests.
func calibOpts(scheme string) GQFOptions {
	return GQFOptions{Scheme: scheme, MaxLen: 32, Corpus: gqfCorpus, CalibLines: 16, CalibWindows: 2}
}

func needCorpus(t *testing.T) {
	if _, err := os.Stat(gqfCorpus); err != nil {
		t.Skipf("corpus not available: %v", err)
	}
}

// referencePrompt returns the first prompt of reference.json and its top-1 next token.
func referencePrompt(t *testing.T, dir string) ([]int, int) {
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Skip(err)
	}
	var ref struct {
		Prompts []struct {
			IDs  []int `json:"ids"`
			Top5 []struct {
				ID int `json:"id"`
			} `json:"last_position_top5"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return ref.Prompts[0].IDs, ref.Prompts[0].Top5[0].ID
}

// TestGQFGraphMatchesRuntime evaluates the gqf graph of an f16 file with the reference
// evaluator and compares its logits with the runtime's over the same file: two independent
// implementations of the model.
func TestGQFGraphMatchesRuntime(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gqf")
	if _, err := ConvertGQF(gqfModel, out, GQFOptions{Scheme: "f16", MaxLen: 16}); err != nil {
		t.Fatal(err)
	}
	ids, top1 := referencePrompt(t, gqfModel)
	f, err := gqf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vals, err := gqfValues(f)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]int64, 16)
	for i := range in {
		in[i] = int64(ids[min(i, len(ids)-1)])
	}
	res, err := evalGraph(f.Manifest.Graph, map[string]*value{inputIDs: {shape: []int{1, 16}, i: in}}, vals, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(out, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rl, err := m.Eval(m.NewState(0), ids, true)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Vocab()
	gl := res[outputLogits].f
	var maxd float64
	for i := range rl {
		maxd = max(maxd, math.Abs(float64(rl[i]-gl[i])))
	}
	if maxd > 1e-3 {
		t.Errorf("graph and runtime logits differ by up to %g", maxd)
	}
	if a := argmax(gl[(len(ids)-1)*V : len(ids)*V]); a != top1 {
		t.Errorf("graph top-1 %d, reference %d", a, top1)
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// TestLPBQ checks the LPBQ encoder against its definition, in float64.
func TestLPBQ(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	rows, cols, bs := 5, 128, 32
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * math.Pow(10, float64(i/bs%4-2)))
	}
	for i := 0; i < cols; i++ {
		w[3*cols+i] = 0 // an all-zero row
	}
	lt := encodeLPBQ(w, rows, cols, bs, 4, 8)
	for r := 0; r < rows; r++ {
		c := float64(lt.scales[r])
		if !(c > 0) {
			t.Fatalf("row %d: channel scale %g", r, c)
		}
		for b := 0; b < cols/bs; b++ {
			k := int(lt.blocks[r*(cols/bs)+b])
			if k < 1 || k > 16 {
				t.Fatalf("row %d block %d: int scale %d outside [1, 16]", r, b, k)
			}
			s := float64(float32(float32(c) * float32(k)))
			for i := b * bs; i < (b+1)*bs; i++ {
				q := int(lt.codes[r*cols+i])
				if q < -8 || q > 7 {
					t.Fatalf("code %d", q)
				}
				if d := math.Abs(float64(w[r*cols+i]) - float64(q)*s); d > s/2*(1+1e-6) {
					t.Fatalf("row %d col %d: |w − q·s| = %g > s/2 = %g (w %g, q %d)", r, i, d, s/2, w[r*cols+i], q)
				}
			}
		}
	}
}

func TestGQFDryRunAndErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gqf")
	p, err := ConvertGQF(gqfModel, out, GQFOptions{Scheme: "w4a16-lpbq", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("dry run wrote the output")
	}
	// stories260k: 1 embedding + 5 layers × 9 tensors + output_norm, then 6 constants (GQA adds attn.kv_rep).
	if len(p.Tensors) != 1+5*9+1+6 || p.MaxLen != 128 || !strings.Contains(p.Text(), "int4 LPBQ block 64") {
		t.Errorf("plan:\n%s", p.Text())
	}
	if _, err := ConvertGQF(gqfModel, out, GQFOptions{Scheme: "w8a16"}); err == nil || !strings.Contains(err.Error(), "need --encodings FILE, --stats FILE or --corpus FILE") {
		t.Errorf("w8a16 without encodings: %v", err)
	}
	if _, err := ConvertGQF(gqfModel, out, GQFOptions{Scheme: "w3a3"}); err == nil || !strings.Contains(err.Error(), `scheme: "w3a3" is not a gqf scheme`) {
		t.Errorf("unknown scheme: %v", err)
	}
}

// TestGQFEncodingsFromAIMET converts once with calibration, exports the encodings as AIMET
// JSON and converts again from that file: the activation encodings must come back as they
// were, and a file lacking one activation must be refused.
func TestGQFEncodingsFromAIMET(t *testing.T) {
	needCorpus(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gqf"), filepath.Join(dir, "b.gqf")
	if _, err := ConvertGQF(gqfModel, a, calibOpts("w8a16")); err != nil {
		t.Fatal(err)
	}
	fa, err := gqf.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	js := filepath.Join(dir, "a.json")
	if err := export.WriteAIMET(js, fa, "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	if _, err := ConvertGQF(gqfModel, b, GQFOptions{Scheme: "w8a16", MaxLen: 32, Encodings: js}); err != nil {
		t.Fatal(err)
	}
	fb, err := gqf.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	for i, x := range fa.Manifest.Graph.Activations {
		y := fb.Manifest.Graph.Activations[i]
		if x.Encoding.Scale[0] != y.Encoding.Scale[0] || x.Encoding.Offset[0] != y.Encoding.Offset[0] || x.Encoding.Bits != y.Encoding.Bits {
			t.Fatalf("%s: %v after the AIMET round trip, want %v", x.Name, y.Encoding, x.Encoding)
		}
	}
	raw, _ := os.ReadFile(js)
	cut := strings.Replace(string(raw), `"name": "blk.2.kq_softmax"`, `"name": "renamed"`, 1)
	if err := os.WriteFile(js, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ConvertGQF(gqfModel, b, GQFOptions{Scheme: "w8a16", MaxLen: 32, Encodings: js, Force: true}); err == nil || !strings.Contains(err.Error(), "no encoding for graph activations blk.2.kq_softmax") {
		t.Errorf("missing activation: %v", err)
	}
}
