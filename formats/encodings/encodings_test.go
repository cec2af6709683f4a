package encodings

import (
	"strings"
	"testing"
)

// aimetV1 is a 1.0.0 file in the shape AIMET's specification gives (hand-written).
const aimetV1 = `{
  "version": "1.0.0",
  "activation_encodings": [
    {"name": "x", "enc_type": "PER_TENSOR", "dtype": "INT", "bw": 16, "is_sym": false, "scale": [0.0005], "offset": [-32768]},
    {"name": "h", "enc_type": "PER_TENSOR", "dtype": "FP", "bw": 16, "is_sym": false}
  ],
  "param_encodings": [
    {"name": "w", "enc_type": "PER_CHANNEL", "dtype": "INT", "bw": 8, "is_sym": true, "scale": [0.1, 0.2], "offset": [-128, -128]},
    {"name": "q", "enc_type": "LPBQ", "dtype": "INT", "bw": 8, "compressed_bw": 4, "block_size": 32, "is_sym": true,
     "scale": [0.01, 0.02], "offset": [-128, -128], "per_block_int_scale": [1, 16, 3, 4]}
  ],
  "quantizer_args": {"activation_bitwidth": 16, "dtype": "int", "is_symmetric": true, "param_bitwidth": 8, "per_channel_quantization": true, "quant_scheme": "post_training_tf"},
  "excluded_layers": []
}`

// aimetV061 is a 0.6.1 file: dictionaries, per-channel lists, booleans as strings.
const aimetV061 = `{
  "version": "0.6.1",
  "activation_encodings": {"x": [{"bitwidth": 16, "dtype": "int", "is_symmetric": "False", "max": 1.0, "min": -0.5, "offset": -21845, "scale": 2.2888e-05}]},
  "param_encodings": {"w": [
    {"bitwidth": 8, "dtype": "int", "is_symmetric": "True", "max": 12.7, "min": -12.8, "offset": -128, "scale": 0.1},
    {"bitwidth": 8, "dtype": "int", "is_symmetric": "True", "max": 25.4, "min": -25.6, "offset": -128, "scale": 0.2}]},
  "quantizer_args": {"activation_bitwidth": 16, "dtype": "int", "is_symmetric": "True", "param_bitwidth": 8, "per_channel_quantization": "True", "quant_scheme": "post_training_tf"}
}`

func TestParseV1(t *testing.T) {
	f, err := Parse("a.json", []byte(aimetV1))
	if err != nil {
		t.Fatal(err)
	}
	x, ok := f.Activation("x")
	if !ok || x.Bitwidth != 16 || x.Scale[0] != 0.0005 || x.Offset[0] != -32768 || x.Symmetric {
		t.Errorf("x = %+v", x)
	}
	q, ok := f.Param("q")
	if !ok || q.Type != LPBQ || q.CompressedBitwidth != 4 || q.BlockSize != 32 || len(q.PerBlockIntScale) != 4 || q.PerBlockIntScale[1] != 16 {
		t.Errorf("q = %+v", q)
	}
	if h, _ := f.Activation("h"); h.Dtype != Float {
		t.Errorf("h = %+v", h)
	}
	if f.QuantizerArgs == nil || !f.QuantizerArgs.PerChannelQuantization {
		t.Errorf("quantizer_args = %+v", f.QuantizerArgs)
	}
}

func TestParseV061(t *testing.T) {
	f, err := Parse("a.json", []byte(aimetV061))
	if err != nil {
		t.Fatal(err)
	}
	w, ok := f.Param("w")
	if !ok || w.Type != PerChannel || len(w.Scale) != 2 || w.Scale[1] != 0.2 || !w.Symmetric || w.Offset[0] != -128 {
		t.Errorf("w = %+v", w)
	}
	if !f.QuantizerArgs.IsSymmetric {
		t.Error("is_symmetric \"True\" read as false")
	}
}

// TestRoundTrip writes both versions and reads them back.
func TestRoundTrip(t *testing.T) {
	f, err := Parse("a.json", []byte(aimetV1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Marshal(V1)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse("b.json", b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := g.Marshal(V1)
	if string(b) != string(b2) {
		t.Errorf("1.0.0 round trip differs:\n%s\n%s", b, b2)
	}
	if _, err := f.Marshal(V061); err == nil || !strings.Contains(err.Error(), "q: LPBQ encodings cannot be written as version 0.6.1") {
		t.Errorf("LPBQ as 0.6.1: %v", err)
	}
	f.Params = f.Params[:1]
	b, err = f.Marshal(V061)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"is_symmetric": "True"`) || !strings.Contains(string(b), `"min": -12.8`) {
		t.Errorf("0.6.1 output:\n%s", b)
	}
	g, err = Parse("c.json", b)
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := g.Param("w"); len(w.Scale) != 2 || w.Scale[0] != 0.1 {
		t.Errorf("w after 0.6.1 round trip = %+v", w)
	}
}

func TestMalformed(t *testing.T) {
	cases := map[string]string{
		`{"version": "3.0.0", "activation_encodings": []}`: `version: "3.0.0" is not supported`,
		`{"version": "1.0.0", "activation_encodings": [{"name": "x", "enc_type": "PER_TENSOR", "dtype": "INT", "bw": 2, "scale": [1], "offset": [0]}], "param_encodings": []}`: "x: bw: 2 out of range",
		`{"version": "1.0.0", "activation_encodings": [{"name": "x", "enc_type": "PER_TENSOR", "dtype": "INT", "bw": 8, "scale": [0], "offset": [0]}], "param_encodings": []}`: "x: scale[0]: 0 is not positive",
		`{"version": "1.0.0", "activation_encodings": [{"name": "x", "enc_type": "ODD", "dtype": "INT", "bw": 8, "scale": [1], "offset": [0]}], "param_encodings": []}`:        `x: enc_type: "ODD"`,
		`{"version": "0.6.1", "activation_encodings": {"x": [{"bitwidth": 8, "dtype": "int"}]}, "param_encodings": {}}`:                                                        "x: channel 0: scale or offset missing",
		`{"activation_encodings": [`: "bad.json: unexpected end of JSON input",
	}
	for in, want := range cases {
		_, err := Parse("bad.json", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "bad.json: ") {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
}
