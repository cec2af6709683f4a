package calibrate

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/safetensors"
	"github.com/gquant/gquant/quantize"
	"github.com/gquant/gquant/runtime"
	"github.com/gquant/gquant/runtime/arch"
)

// The acceptance test: the encodings JSON (both versions) has, for every activation tensor of
// the graph and every weight of the model, an entry with every field; activations are
// asymmetric 16-bit per-tensor, matrices 8-bit symmetric per-channel with max|row|/127 (read
// here from the checkpoint), and no name is in both lists.
func TestEncodingsWalkGraph(t *testing.T) {
	res := calib(t, Options{Ctx: 64, Tokens: 128})
	spec := res.Spec
	set, err := W8A16(res.Stats, model260k, spec, quantize.RangeOptions{Mode: quantize.RangeMinMax})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(model260k)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	tensors, err := arch.StoredTensors(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	// version 1.0.0
	p := filepath.Join(dir, "e100.json")
	if err := WriteEncodings(p, set, encodings.V1); err != nil {
		t.Fatal(err)
	}
	var f100 struct {
		Version             string           `json:"version"`
		ActivationEncodings []map[string]any `json:"activation_encodings"`
		ParamEncodings      []map[string]any `json:"param_encodings"`
		QuantizerArgs       map[string]any   `json:"quantizer_args"`
	}
	readJSON(t, p, &f100)
	if back, err := encodings.Read(p); err != nil || len(back.Activations) != len(set.Activations) || len(back.Params) != len(set.Params) {
		t.Errorf("formats/encodings reads 1.0.0 back: %v", err)
	}
	if f100.Version != "1.0.0" || f100.QuantizerArgs["activation_bitwidth"] != 16.0 || f100.QuantizerArgs["quant_scheme"] != "post_training_tf" {
		t.Errorf("version %q, quantizer_args %v", f100.Version, f100.QuantizerArgs)
	}
	byName := func(list []map[string]any) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, e := range list {
			for _, k := range []string{"name", "enc_type", "dtype", "bw", "is_sym", "scale", "offset"} {
				if _, ok := e[k]; !ok {
					t.Errorf("entry %v lacks %s", e["name"], k)
				}
			}
			m[e["name"].(string)] = e
		}
		return m
	}
	acts, params := byName(f100.ActivationEncodings), byName(f100.ParamEncodings)
	names := runtime.ActivationNames(spec)
	if len(acts) != len(names) {
		t.Errorf("%d activation encodings for %d activations", len(acts), len(names))
	}
	for _, n := range names {
		e := acts[n]
		if e == nil {
			t.Errorf("activation %s: no encoding", n)
			continue
		}
		if params[n] != nil {
			t.Errorf("%s: listed among parameters too", n)
		}
		if e["enc_type"] != "PER_TENSOR" || e["dtype"] != "INT" || e["bw"] != 16.0 || e["is_sym"] != false {
			t.Errorf("activation %s: %v", n, e)
		}
		sc, off := e["scale"].([]any)[0].(float64), e["offset"].([]any)[0].(float64)
		lo, hi, _ := res.Stats.ActRange(n)
		gridLo, gridHi := off*sc, (off+65535)*sc
		if off > 0 || gridLo > float64(lo)+sc/2 || gridHi < float64(hi)-sc/2 {
			t.Errorf("activation %s: grid [%g, %g] does not cover the observed [%g, %g]", n, gridLo, gridHi, lo, hi)
		}
	}
	if len(params) != len(tensors) {
		t.Errorf("%d parameter encodings for %d weights", len(params), len(tensors))
	}
	for _, tn := range tensors {
		n := tn.Ref.GGUFName()
		e := params[n]
		if e == nil {
			t.Errorf("weight %s: no encoding", n)
			continue
		}
		scales, offsets := e["scale"].([]any), e["offset"].([]any)
		if len(tn.Shape) == 1 {
			if e["enc_type"] != "PER_TENSOR" || e["bw"] != 16.0 || e["is_sym"] != true || len(scales) != 1 || offsets[0] != -32768.0 {
				t.Errorf("vector %s: %v", n, e)
			}
			continue
		}
		rows, cols := tn.Shape[0], tn.Shape[1]
		if e["enc_type"] != "PER_CHANNEL" || e["bw"] != 8.0 || e["is_sym"] != true || e["dtype"] != "INT" || len(scales) != rows || len(offsets) != rows {
			t.Errorf("matrix %s: %v %v %v %v, %d scales for %d rows", n, e["enc_type"], e["bw"], e["is_sym"], e["dtype"], len(scales), rows)
			continue
		}
		w, err := ck.ToFloat32(tn.HFName, nil)
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < rows; r++ {
			var m float64
			for _, v := range w[r*cols : (r+1)*cols] {
				m = math.Max(m, math.Abs(float64(v)))
			}
			if got := scales[r].(float64); float32(got) != float32(m/127) || offsets[r] != -128.0 {
				t.Fatalf("%s row %d: scale %g offset %v, want %g −128", n, r, got, offsets[r], float32(m/127))
			}
		}
	}

	// version 0.6.1: the same names, as maps of per-channel lists.
	p = filepath.Join(dir, "e061.json")
	if err := WriteEncodings(p, set, encodings.V061); err != nil {
		t.Fatal(err)
	}
	var f061 struct {
		Version             string                      `json:"version"`
		ActivationEncodings map[string][]map[string]any `json:"activation_encodings"`
		ParamEncodings      map[string][]map[string]any `json:"param_encodings"`
	}
	readJSON(t, p, &f061)
	if back, err := encodings.Read(p); err != nil || len(back.Activations) != len(set.Activations) || len(back.Params) != len(set.Params) {
		t.Errorf("formats/encodings reads 0.6.1 back: %v", err)
	}
	if f061.Version != "0.6.1" || len(f061.ActivationEncodings) != len(names) || len(f061.ParamEncodings) != len(tensors) {
		t.Fatalf("0.6.1: version %q, %d activations, %d params", f061.Version, len(f061.ActivationEncodings), len(f061.ParamEncodings))
	}
	for _, n := range names {
		l := f061.ActivationEncodings[n]
		if len(l) != 1 || l[0]["bitwidth"] != 16.0 || l[0]["is_symmetric"] != "False" || l[0]["dtype"] != "int" {
			t.Errorf("0.6.1 activation %s: %v", n, l)
		}
	}
	e := f061.ParamEncodings["blk.0.attn_q.weight"]
	if len(e) != 64 || e[0]["is_symmetric"] != "True" || e[0]["offset"] != -128.0 || e[0]["min"].(float64) != -128*e[0]["scale"].(float64) {
		t.Errorf("0.6.1 blk.0.attn_q.weight: %d channels, first %v", len(e), e[0])
	}
}

// readJSON decodes a file.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// Activation and parameter encodings never mix: a name in both lists is refused, as are
// malformed entries, and nothing is written.
func TestEncodingsRefuseMixing(t *testing.T) {
	e := encodings.Encoding{Name: "blk.0.q", Type: encodings.PerTensor, Dtype: encodings.Int, Bitwidth: 16, Scale: []float32{1}, Offset: []int32{0}}
	path := filepath.Join(t.TempDir(), "e.json")
	err := WriteEncodings(path, &encodings.File{Activations: []encodings.Encoding{e}, Params: []encodings.Encoding{e}}, encodings.V1)
	if err == nil || !strings.Contains(err.Error(), path+": blk.0.q: listed as activation and as parameter") {
		t.Errorf("mixed: %v", err)
	}
	bad := e
	bad.Scale = []float32{0}
	if err := WriteEncodings(path, &encodings.File{Activations: []encodings.Encoding{bad}}, encodings.V1); err == nil || !strings.Contains(err.Error(), "scale[0]: 0") {
		t.Errorf("zero scale: %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a refused set was written")
	}
}
