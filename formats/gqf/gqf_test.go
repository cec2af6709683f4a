package gqf

import (
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gquant/gquant/formats/half"
)

// sample builds a small valid file: one tensor of each encoding and a two-node graph.
// It returns the file bytes and, per tensor, the values an independent float64 computation
// expects Decode to return.
func sample(t testing.TB) ([]byte, map[string][]float64) {
	m := &Manifest{Scheme: "w8a16", Config: &ModelConfig{Family: "llama", HfArchitecture: "LlamaForCausalLM", ConfigJson: []byte(`{"hidden_size":4}`)}}
	b := NewBuilder(m)
	want := map[string][]float64{}
	le32 := func(v ...float32) []byte {
		out := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		}
		return out
	}
	// f32 vector
	b.AddTensor(&Tensor{Name: "norm", Role: "attn_norm.weight", Shape: []int64{4},
		Encoding: &Encoding{Dtype: DataType_F32, Bits: 32, Granularity: Granularity_FLOAT}}, le32(1, -2, 0.5, 3), nil, nil, nil)
	want["norm"] = []float64{1, -2, 0.5, 3}
	// f16 matrix 2×2
	f16 := make([]byte, 8)
	for i, v := range []float32{0.25, -1, 2, 65504} {
		binary.LittleEndian.PutUint16(f16[2*i:], half.F32ToF16(v))
	}
	b.AddTensor(&Tensor{Name: "h", Role: "x", Shape: []int64{2, 2},
		Encoding: &Encoding{Dtype: DataType_F16, Bits: 16, Granularity: Granularity_FLOAT}}, f16, nil, nil, nil)
	want["h"] = []float64{0.25, -1, 2, 65504}
	// int8 symmetric per channel: rows scaled by 0.5 and 0.125
	b.AddTensor(&Tensor{Name: "w8", Role: "attn_q.weight", Shape: []int64{2, 3},
		Encoding: &Encoding{Dtype: DataType_INT8, Bits: 8, Granularity: Granularity_PER_CHANNEL, Symmetric: true, ScaleType: DataType_F32}},
		[]byte{1, 0xff, 127, 0x81, 0, 3}, le32(0.5, 0.125), nil, nil)
	want["w8"] = []float64{0.5, -0.5, 63.5, -127 * 0.125, 0, 0.375}
	// uint4 asymmetric blocks of 2 with fp16 scales and zero points
	sc := make([]byte, 4)
	binary.LittleEndian.PutUint16(sc, half.F32ToF16(0.5))
	binary.LittleEndian.PutUint16(sc[2:], half.F32ToF16(2))
	b.AddTensor(&Tensor{Name: "w4", Role: "ffn_up.weight", Shape: []int64{1, 4},
		Encoding: &Encoding{Dtype: DataType_UINT4, Bits: 4, Granularity: Granularity_PER_BLOCK, BlockSize: 2, ScaleType: DataType_F16, ZeroType: DataType_UINT8}},
		[]byte{0x3f, 0x70}, sc, []byte{8, 1}, nil)
	want["w4"] = []float64{(15 - 8) * 0.5, (3 - 8) * 0.5, (0 - 1) * 2, (7 - 1) * 2}
	// int4 LPBQ: 2 rows of 4, blocks of 2; channel scales 0.25, 1; block ints 3,1 / 16,2
	b.AddTensor(&Tensor{Name: "lp", Role: "ffn_down.weight", Shape: []int64{2, 4},
		Encoding: &Encoding{Dtype: DataType_INT4, Bits: 4, Granularity: Granularity_LPBQ, Symmetric: true, BlockSize: 2, ScaleType: DataType_F32, DecompressedBits: 8}},
		[]byte{0x87, 0x21, 0xf0, 0x9a}, le32(0.25, 1), nil, []byte{3, 1, 16, 2})
	want["lp"] = []float64{7 * 0.75, -8 * 0.75, 1 * 0.25, 2 * 0.25, 0, -1 * 16, -6 * 2, -7 * 2}
	m.Graph = &Graph{Name: "g", MaxLen: 4,
		Inputs:  []*Value{{Name: "input_ids", Dtype: DataType_INT64, Shape: []int64{1, 4}}},
		Outputs: []string{"y"},
		Nodes: []*Node{
			{Name: "x", Op: "Gather", Inputs: []string{"h", "input_ids"}, Outputs: []string{"x"}},
			{Name: "y", Op: "RmsNorm", Inputs: []string{"x", "norm"}, Outputs: []string{"y"}, Attrs: []*Attribute{{Name: "epsilon", F: 1e-5}}},
		},
		Activations: []*Value{
			{Name: "x", Dtype: DataType_F32, Shape: []int64{1, 4, 2}, Encoding: RangeEncoding(-1, 2, 16)},
			{Name: "y", Dtype: DataType_F32, Shape: []int64{1, 4, 2}, Encoding: RangeEncoding(-3, 3, 8)},
		}}
	raw, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return raw, want
}

func TestRoundTripDecode(t *testing.T) {
	raw, want := sample(t)
	path := filepath.Join(t.TempDir(), "s.gqf")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tn := range f.Manifest.Tensors {
		if tn.Data.Offset%Alignment != 0 {
			t.Errorf("%s: data at %d, not aligned to %d", tn.Name, tn.Data.Offset, Alignment)
		}
		got, err := f.Decode(tn)
		if err != nil {
			t.Fatal(err)
		}
		w := want[tn.Name]
		if len(got) != len(w) {
			t.Fatalf("%s: %d values, want %d", tn.Name, len(got), len(w))
		}
		for i := range w {
			if float64(got[i]) != w[i] {
				t.Errorf("%s[%d] = %g, want %g", tn.Name, i, got[i], w[i])
			}
		}
	}
	// The data section starts on the first page boundary; the manifest follows it.
	if v, off := binary.LittleEndian.Uint32(raw[4:]), binary.LittleEndian.Uint64(raw[8:]); v != 2 || off < dataStart || int(off+binary.LittleEndian.Uint64(raw[16:])) != len(raw) {
		t.Errorf("version %d, manifest at %d of %d bytes", v, off, len(raw))
	}
	rep := f.Report()
	if rep.Graph == nil || len(rep.Graph.Nodes) != 2 || !strings.Contains(rep.String(), "RmsNorm(x, norm) -> y 1x4x2 uint8 per-tensor") {
		t.Errorf("report:\n%s", rep.String())
	}
}

func TestBytesDeterministic(t *testing.T) {
	a, _ := sample(t)
	b, _ := sample(t)
	if string(a) != string(b) {
		t.Fatal("two builds of the same manifest differ")
	}
}

// TestMalformed checks that each broken file gives its own clear error, not a panic.
func TestMalformed(t *testing.T) {
	good, _ := sample(t)
	man := binary.LittleEndian.Uint64(good[8:]) // where the manifest starts
	clone := func() []byte { return append([]byte(nil), good...) }
	// reencode rewrites the manifest through edit and rebuilds the file around it.
	reencode := func(edit func(m *Manifest)) []byte {
		f, err := Parse("x", good)
		if err != nil {
			t.Fatal(err)
		}
		edit(f.Manifest)
		b := NewBuilder(f.Manifest)
		b.l.size = uint64(len(f.data))
		b.chunks = []chunk{{0, f.data}}
		out, err := b.bytesUnchecked()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "header: 0 bytes"},
		{"bad magic", append([]byte("GGUF"), good[4:]...), `magic: "GGUF"`},
		{"bad version", func() []byte { b := clone(); b[4] = 9; return b }(), "version: 9 is not supported"},
		{"manifest past end", func() []byte { b := clone(); binary.LittleEndian.PutUint64(b[16:], uint64(len(b))); return b }(), "manifest: bytes"},
		{"manifest inside the header", func() []byte { b := clone(); binary.LittleEndian.PutUint64(b[8:], 100); return b }(), "manifest: bytes [100,"},
		{"manifest garbage", func() []byte { b := clone(); copy(b[man:], []byte{0xff, 0xff, 0xff}); return b }(), "manifest:"},
		{"truncated", good[:man+10], "manifest: bytes"},
		{"v1 truncated manifest", func() []byte { b := clone()[:16]; b[4] = 1; binary.LittleEndian.PutUint64(b[8:], 99); return b }(), "manifest: length 99"},
		{"tensor past end", reencode(func(m *Manifest) { m.Tensors[0].Data.Offset = 1 << 40 }), "norm: data: bytes"},
		{"unknown dtype", reencode(func(m *Manifest) { m.Tensors[2].Encoding.Dtype = 99 }), "w8: encoding: dtype 99 is unknown"},
		{"unknown granularity", reencode(func(m *Manifest) { m.Tensors[2].Encoding.Granularity = 42 }), "w8: encoding: granularity 42 is unknown"},
		{"wrong size", reencode(func(m *Manifest) { m.Tensors[0].Shape = []int64{5} }), "norm: data: 16 bytes, want 20"},
		{"bad block", reencode(func(m *Manifest) { m.Tensors[4].Encoding.BlockSize = 3 }), "lp: encoding: block size 3"},
		{"negative dim", reencode(func(m *Manifest) { m.Tensors[1].Shape = []int64{-2, 2} }), "h: shape [-2 2]"},
		{"unknown op", reencode(func(m *Manifest) { m.Graph.Nodes[0].Op = "Conv" }), `op "Conv" is not in the QNN vocabulary`},
		{"undefined input", reencode(func(m *Manifest) { m.Graph.Nodes[1].Inputs[0] = "nope" }), "input nope is not defined"},
		{"bad activation", reencode(func(m *Manifest) { m.Graph.Activations[0].Encoding.Scale[0] = 0 }), "activation x: encoding: scale 0"},
		{"zero outside codes", reencode(func(m *Manifest) { m.Graph.Activations[1].Encoding.Offset[0] = 10 }), "offset 10 puts zero outside"},
		{"no config", reencode(func(m *Manifest) { m.Config = nil }), "config: missing"},
	}
	for _, c := range cases {
		_, err := Parse("bad.gqf", c.data)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "bad.gqf: ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line starting with the file and containing %q", c.name, err, c.want)
		}
	}
}

// TestQDQ compares QDQ with a float64 statement of ONNX's QuantizeLinear/DequantizeLinear.
func TestQDQ(t *testing.T) {
	e := &Encoding{Dtype: DataType_UINT16, Bits: 16, Granularity: Granularity_PER_TENSOR, Scale: []float32{0.001}, Offset: []int32{-30000}}
	xs := []float32{0, 1, -1, 0.0005, 0.0015, -30, 36, 1e9, -1e9, 12.3456}
	got := append([]float32(nil), xs...)
	QDQ(e, got)
	for i, x := range xs {
		q := math.RoundToEven(float64(x/0.001)) + 30000
		q = math.Max(0, math.Min(65535, q))
		want := float32(float32(q-30000) * 0.001)
		if got[i] != want {
			t.Errorf("QDQ(%g) = %g, want %g", x, got[i], want)
		}
	}
	if got[0] != 0 {
		t.Errorf("zero is not exact: %g", got[0])
	}
}

// TestRangeEncoding checks QNN's rules: zero representable, range covered, offset ≤ 0.
func TestRangeEncoding(t *testing.T) {
	for _, r := range [][2]float64{{-1, 3}, {0.5, 2}, {-4, -1}, {0, 0}, {-1e-7, 1e-7}} {
		for _, bits := range []int{8, 16} {
			e := RangeEncoding(r[0], r[1], bits)
			if err := CheckActivation(e); err != nil {
				t.Fatalf("%v %d: %v", r, bits, err)
			}
			steps := float64(int(1)<<bits - 1)
			lo := float64(e.Offset[0]) * float64(e.Scale[0])
			hi := (float64(e.Offset[0]) + steps) * float64(e.Scale[0])
			if lo > math.Min(r[0], 0)+float64(e.Scale[0]) || hi < math.Max(r[1], 0)-float64(e.Scale[0]) || hi-lo < 1e-4*(1-1e-6) {
				t.Errorf("%v %d bits: encoded range [%g, %g]", r, bits, lo, hi)
			}
		}
	}
}

func TestMetaRoundTrip(t *testing.T) {
	vals := []any{"llama", uint32(7), int32(-3), float32(1.5), true, uint64(9), int64(-9), 2.5,
		[]string{"a", "b"}, []float32{1, 2}, []int32{3, 4}}
	tok := &Tokenizer{}
	for i, v := range vals {
		e, err := MetaEntryOf(string(rune('a'+i)), v)
		if err != nil {
			t.Fatal(err)
		}
		tok.Metadata = append(tok.Metadata, e)
	}
	get := tok.Getter()
	for i, v := range vals {
		got, ok := get(string(rune('a' + i)))
		if !ok || !equalAny(got, v) {
			t.Errorf("%d: got %v (%T), want %v (%T)", i, got, got, v, v)
		}
	}
	if _, err := MetaEntryOf("x", []int{1}); err == nil {
		t.Error("[]int accepted")
	}
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []string:
		y := b.([]string)
		return strings.Join(x, ",") == strings.Join(y, ",")
	case []float32:
		y := b.([]float32)
		return len(x) == len(y) && x[0] == y[0] && x[1] == y[1]
	case []int32:
		y := b.([]int32)
		return len(x) == len(y) && x[0] == y[0] && x[1] == y[1]
	}
	return a == b
}

// TestLinearInputs: a dynamic per-token encoding of linear inputs is accepted when it is
// signed, symmetric and stores nothing, and refused otherwise; Describe names it.
func TestLinearInputs(t *testing.T) {
	build := func(e *Encoding) error {
		m := &Manifest{Scheme: "w4a8", Config: &ModelConfig{ConfigJson: []byte(`{}`)}, LinearInputs: e}
		_, err := NewBuilder(m).Bytes()
		return err
	}
	ok := &Encoding{Dtype: DataType_INT8, Bits: 8, Granularity: Granularity_PER_TOKEN, Symmetric: true}
	if err := build(ok); err != nil {
		t.Fatal(err)
	}
	if d := ok.Describe(); d != "int8 sym per-token (dynamic)" {
		t.Errorf("Describe: %q", d)
	}
	for _, c := range []struct {
		e    *Encoding
		want string
	}{
		{&Encoding{Dtype: DataType_UINT8, Bits: 8, Granularity: Granularity_PER_TOKEN, Symmetric: true}, "not a signed integer code type"},
		{&Encoding{Dtype: DataType_INT8, Bits: 8, Granularity: Granularity_PER_TENSOR, Symmetric: true}, "want PER_TOKEN"},
		{&Encoding{Dtype: DataType_INT8, Bits: 8, Granularity: Granularity_PER_TOKEN}, "symmetric"},
		{&Encoding{Dtype: DataType_INT8, Bits: 8, Granularity: Granularity_PER_TOKEN, Symmetric: true, Scale: []float32{1}}, "store no scale"},
		{&Encoding{Dtype: DataType_INT8, Bits: 9, Granularity: Granularity_PER_TOKEN, Symmetric: true}, "bits 9"},
	} {
		if err := build(c.e); err == nil || !strings.Contains(err.Error(), "linear_inputs: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.e, err, c.want)
		}
	}
}

// TestInt4SymNegativeScale: symmetric int4 blocks decode as q·s with signed codes, a negative
// fp16 scale included (ggml's Q4_0 convention).
func TestInt4SymNegativeScale(t *testing.T) {
	m := &Manifest{Scheme: "w4a8", Config: &ModelConfig{ConfigJson: []byte(`{}`)}}
	b := NewBuilder(m)
	sc := make([]byte, 4)
	binary.LittleEndian.PutUint16(sc, half.F32ToF16(-0.25))
	binary.LittleEndian.PutUint16(sc[2:], half.F32ToF16(2))
	// codes −8, 7 | 1, −1 (two's complement nibbles, low first)
	b.AddTensor(&Tensor{Name: "w", Shape: []int64{1, 4},
		Encoding: &Encoding{Dtype: DataType_INT4, Bits: 4, Granularity: Granularity_PER_BLOCK, Symmetric: true, BlockSize: 2, ScaleType: DataType_F16}},
		[]byte{0x78, 0xf1}, sc, nil, nil)
	raw, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("x.gqf", raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Decode(f.Manifest.Tensors[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{2, -1.75, 2, -2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("decoded %v, want %v", got, want)
		}
	}
}

// TestQDQRows checks the per-token int8 quantization against a float64 computation.
func TestQDQRows(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	dim := 48
	x := make([]float32, 3*dim)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * float64(1+i/dim*10))
	}
	for i := dim; i < 2*dim; i++ {
		x[i] = 0 // a zero row stays zero
	}
	e := &Encoding{Dtype: DataType_INT8, Bits: 8, Granularity: Granularity_PER_TOKEN, Symmetric: true}
	if err := CheckDynamic(e); err != nil {
		t.Fatal(err)
	}
	y := append([]float32(nil), x...)
	QDQRows(e, y, dim)
	for r := 0; r < 3; r++ {
		var amax float64
		for _, v := range x[r*dim : (r+1)*dim] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		s := amax / 127
		for i := r * dim; i < (r+1)*dim; i++ {
			var want float64
			if s > 0 {
				want = math.RoundToEven(float64(x[i])/s) * s
			}
			if math.Abs(float64(y[i])-want) > 1e-6*amax {
				t.Fatalf("[%d]: %g, want %g", i, y[i], want)
			}
		}
	}
}

// DecodeRows gives the rows of Decode, for every encoding of the test file.
func TestDecodeRows(t *testing.T) {
	raw, _ := sample(t)
	f, err := Parse("s.gqf", raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range f.Manifest.Tensors {
		all, err := f.Decode(tt)
		if err != nil {
			t.Fatal(err)
		}
		cols := int(tt.Shape[len(tt.Shape)-1])
		rows := len(all) / cols
		if len(tt.Shape) == 1 {
			rows, cols = len(all), 1
		}
		for r0 := 0; r0 < rows; r0 += 2 {
			r1 := min(rows, r0+2)
			got := make([]float32, (r1-r0)*cols)
			if err := f.DecodeRows(tt, r0, r1, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				if want := all[r0*cols+i]; v != want && !(v != v && want != want) {
					t.Fatalf("%s rows [%d, %d): element %d %g, Decode %g", tt.Name, r0, r1, i, v, want)
				}
			}
		}
		if err := f.DecodeRows(tt, 0, rows+1, make([]float32, (rows+1)*cols)); err == nil {
			t.Errorf("%s: rows past the end decoded", tt.Name)
		}
	}
}

// A scalar (shape []) decodes as a vector of one element, float or quantized, by Decode and
// DecodeRows.
func TestDecodeScalar(t *testing.T) {
	m := &Manifest{Scheme: "w8a16", Config: &ModelConfig{ConfigJson: []byte(`{}`)}}
	b := NewBuilder(m)
	f32 := make([]byte, 4)
	binary.LittleEndian.PutUint32(f32, math.Float32bits(-1.5))
	b.AddTensor(&Tensor{Name: "f", Shape: []int64{},
		Encoding: &Encoding{Dtype: DataType_F32, Bits: 32, Granularity: Granularity_FLOAT}}, f32, nil, nil, nil)
	e := RangeEncoding(-1, 2, 8)
	b.AddTensor(&Tensor{Name: "q", Shape: []int64{}, Encoding: e}, []byte{200}, nil, nil, nil)
	raw, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("s.gqf", raw)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float32{"f": -1.5, "q": float32(float32(200+e.Offset[0]) * e.Scale[0])}
	for _, tt := range f.Manifest.Tensors {
		all, err := f.Decode(tt)
		if err != nil {
			t.Fatal(err)
		}
		row := make([]float32, 1)
		if err := f.DecodeRows(tt, 0, 1, row); err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || all[0] != want[tt.Name] || row[0] != want[tt.Name] {
			t.Errorf("%s: Decode %v, DecodeRows %v, want %g", tt.Name, all, row, want[tt.Name])
		}
	}
}

// A version 1 file (manifest first, data section at the next page boundary after it) still
// parses, with the same tensors.
func TestVersion1(t *testing.T) {
	good, want := sample(t)
	f, err := Parse("v2.gqf", good)
	if err != nil {
		t.Fatal(err)
	}
	man, err := proto.MarshalOptions{Deterministic: true}.Marshal(f.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	start := (16 + uint64(len(man)) + Alignment - 1) / Alignment * Alignment
	v1 := make([]byte, start+uint64(len(f.data)))
	copy(v1, Magic)
	binary.LittleEndian.PutUint32(v1[4:], 1)
	binary.LittleEndian.PutUint64(v1[8:], uint64(len(man)))
	copy(v1[16:], man)
	copy(v1[start:], f.data)
	old, err := Parse("v1.gqf", v1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range old.Manifest.Tensors {
		got, err := old.Decode(tn)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want[tn.Name] {
			if float64(got[i]) != w {
				t.Fatalf("%s[%d] = %g, want %g", tn.Name, i, got[i], w)
			}
		}
	}
}

// The streaming Writer writes the bytes the Builder renders, whatever the order of its
// writes, its temporary file is a readable gqf file after Flush, and Abort leaves nothing.
func TestWriterMatchesBuilder(t *testing.T) {
	good, _ := sample(t)
	f, err := Parse("s.gqf", good)
	if err != nil {
		t.Fatal(err)
	}
	m := proto.Clone(f.Manifest).(*Manifest)
	tensors := m.Tensors
	m.Tensors = nil
	l := NewLayout(m)
	for _, tn := range tensors {
		l.Place(tn, tn.Data.GetSize(), tn.Scales.GetSize(), tn.Zeros.GetSize(), tn.BlockScales.GetSize())
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "w.gqf")
	w, err := Create(out, l)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(tensors) - 1; i >= 0; i-- { // backwards, and each buffer in two halves
		src := f.Manifest.Tensors[i]
		for k, b := range []*Buffer{tensors[i].Data, tensors[i].Scales, tensors[i].Zeros, tensors[i].BlockScales} {
			if b == nil {
				continue
			}
			data := f.Bytes([]*Buffer{src.Data, src.Scales, src.Zeros, src.BlockScales}[k])
			h := len(data) / 2
			if err := w.WriteAt(b, uint64(h), data[h:]); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteAt(b, 0, data[:h]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.WriteAt(tensors[0].Data, tensors[0].Data.Size, []byte{1}); err == nil {
		t.Error("a write past its buffer was accepted")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if tmp, err := Open(w.TempPath()); err != nil {
		t.Fatalf("flushed temporary file: %v", err)
	} else {
		tmp.Close()
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(good) {
		t.Fatal("the Writer's file differs from the Builder's")
	}
	w2, err := Create(filepath.Join(dir, "aborted.gqf"), NewLayout(&Manifest{}))
	if err != nil {
		t.Fatal(err)
	}
	w2.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("abort left %d entries", len(ents))
	}
}
