package export

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/convert/gqfconv"
	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/onnx"
)

const (
	model260k = "../../testdata/models/stories260k"
	corpus    = "../../testdata/corpora/tinystories-calib.txt"
)

// convertTo makes a gqf file of stories260k with the given scheme.
func convertTo(t *testing.T, dir, scheme string, maxLen int) string {
	t.Helper()
	if _, err := os.Stat(corpus); err != nil {
		t.Skipf("corpus not available: %v", err)
	}
	out := filepath.Join(t.TempDir(), scheme+".gqf")
	_, err := gqfconv.Convert(dir, out, gqfconv.Options{Scheme: scheme, MaxLen: maxLen, Corpus: corpus, CalibWindows: 8})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readONNX exports f and parses the written file back.
func readONNX(t *testing.T, f *gqf.File, qdq bool) *onnx.ModelProto {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.onnx")
	if _, err := WriteONNX(path, f, Options{QDQ: qdq, Version: "test"}, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &onnx.ModelProto{}
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAIMETNamesMatchONNX enumerates the float ONNX export and the AIMET JSON: every
// activation (node output) has an activation entry and every activation entry names a node
// output; every float initializer has a parameter entry and every parameter entry names a
// float initializer. The tensors inside the standard-op form of RmsNorm (QNN's one op) are
// the exception: they have no entry.
func TestAIMETNamesMatchONNX(t *testing.T) {
	for _, scheme := range []string{"w8a16", "w4a16-lpbq", "f16"} {
		path := convertTo(t, model260k, scheme, 16)
		f, err := gqf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m := readONNX(t, f, false)
		js := filepath.Join(t.TempDir(), "e.json")
		if err := WriteAIMET(js, f, encodings.V1, false); err != nil {
			t.Fatal(err)
		}
		f.Close()
		enc, err := encodings.Read(js)
		if err != nil {
			t.Fatal(err)
		}
		acts, params := map[string]bool{}, map[string]bool{}
		graphNames(m, acts, params)
		compare(t, scheme+" activations", acts, enc.Activations)
		compare(t, scheme+" params", params, enc.Params)
		if scheme != "f16" {
			for _, e := range enc.Activations {
				if e.Dtype != encodings.Int || e.Bitwidth != 16 {
					t.Fatalf("%s: %s: %+v, want a 16-bit integer encoding", scheme, e.Name, e)
				}
			}
		}
		if scheme == "w4a16-lpbq" {
			e, _ := enc.Param("blk.0.attn_q.weight")
			if e == nil || e.Type != encodings.LPBQ || e.CompressedBitwidth != 4 || e.Bitwidth != 8 || len(e.PerBlockIntScale) != 64 {
				t.Errorf("w4a16 attn_q: %+v", e)
			}
		}
		if scheme == "w8a16" {
			e, _ := enc.Param("output.weight") // the tied output's own initializer
			if e == nil || e.Type != encodings.PerChannel || len(e.Scale) != 512 || e.Offset[0] != -128 {
				t.Errorf("w8a16 output.weight: %+v", e)
			}
		}
	}
}

// graphNames adds to acts every node output and to params every float initializer of m, the
// tensors inside RmsNorm's standard-op form aside: the names an AIMET file must cover.
func graphNames(m *onnx.ModelProto, acts, params map[string]bool) {
	for _, n := range m.Graph.Node {
		for _, o := range n.Output {
			if !inRMSNorm(o) {
				acts[o] = true
			}
		}
	}
	for _, in := range m.Graph.Initializer {
		if in.GetDataType() == int32(onnx.TensorProto_FLOAT) && !inRMSNorm(in.GetName()) {
			params[in.GetName()] = true
		}
	}
}

// inRMSNorm reports whether name is a tensor inside the standard-op form of an RmsNorm.
func inRMSNorm(name string) bool {
	for _, p := range append([]string{"two", "axes", "eps"}, rmsNormParts...) {
		if strings.HasSuffix(name, "_norm."+p) {
			return true
		}
	}
	return false
}

func compare(t *testing.T, what string, graph map[string]bool, list []encodings.Encoding) {
	t.Helper()
	listed := map[string]bool{}
	var extra, missing []string
	for _, e := range list {
		listed[e.Name] = true
		if !graph[e.Name] {
			extra = append(extra, e.Name)
		}
	}
	for n := range graph {
		if !listed[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(extra) > 0 || len(missing) > 0 || len(list) == 0 {
		t.Errorf("%s: %d entries; not in the graph: %v; without an entry: %v", what, len(list), extra, missing)
	}
}

// TestQDQForm checks the structure of the QDQ export: every activation goes through a
// QuantizeLinear/DequantizeLinear pair with uint16 codes, and every weight matrix is int8
// behind a DequantizeLinear.
func TestQDQForm(t *testing.T) {
	path := convertTo(t, model260k, "w8a16", 16)
	f, err := gqf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := readONNX(t, f, true)
	inits := map[string]*onnx.TensorProto{}
	for _, in := range m.Graph.Initializer {
		inits[in.GetName()] = in
	}
	quantized := map[string]bool{}
	for _, n := range m.Graph.Node {
		if n.GetOpType() == "QuantizeLinear" {
			quantized[n.Input[0]] = true
			if zp := inits[n.Input[2]]; zp.GetDataType() != int32(onnx.TensorProto_UINT16) {
				t.Errorf("%s: zero point type %d, want uint16", n.GetName(), zp.GetDataType())
			}
		}
	}
	for _, a := range f.Manifest.Graph.Activations {
		name := a.Name
		if name == "logits" {
			name = "logits.f"
		}
		if !quantized[name] {
			t.Errorf("activation %s is not quantized", a.Name)
		}
	}
	if q := inits["blk.0.attn_q.weight.q"]; q.GetDataType() != int32(onnx.TensorProto_INT8) || q.Dims[0] != 64 {
		t.Errorf("attn_q codes: %v", q)
	}
	if _, err := ONNX(f, Options{QDQ: true}); err != nil {
		t.Fatal(err)
	}
	pf16 := convertTo(t, model260k, "f16", 16)
	f16, err := gqf.Open(pf16)
	if err != nil {
		t.Fatal(err)
	}
	defer f16.Close()
	if _, err := ONNX(f16, Options{QDQ: true}); err == nil || !strings.Contains(err.Error(), "no QDQ form") {
		t.Errorf("QDQ of f16: %v", err)
	}
}
