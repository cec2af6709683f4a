package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// rawBytes is the test pattern of the golden files: byte i is (7*i + 3) mod 256.
func rawBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(7*i + 3)
	}
	return b
}

// f32Bytes encodes float32 values little-endian.
func f32Bytes(xs ...float32) []byte {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// TestReadGGUFPy reads a file written by llama.cpp's gguf-py (see testdata/README.md) and
// compares every value with the literals of the script that wrote it.
func TestReadGGUFPy(t *testing.T) {
	f, err := Open("testdata/gguf-py.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Alignment != 32 {
		t.Errorf("version %d alignment %d, want 3 and 32", f.Version, f.Alignment)
	}
	want := []KV{
		{"general.architecture", "llama"},
		{"test.uint8", uint8(200)},
		{"test.int8", int8(-100)},
		{"test.uint16", uint16(60000)},
		{"test.int16", int16(-30000)},
		{"test.uint32", uint32(4000000000)},
		{"test.int32", int32(-2000000000)},
		{"test.float32", float32(0.1)},
		{"test.bool_true", true},
		{"test.bool_false", false},
		{"test.string", "héllo wörld ✓"},
		{"test.empty_string", ""},
		{"test.uint64", uint64(math.MaxUint64)},
		{"test.int64", int64(math.MinInt64)},
		{"test.float64", 3.141592653589793},
		{"test.arr.uint8", []uint8{0, 1, 255}},
		{"test.arr.int8", []int8{-128, 0, 127}},
		{"test.arr.uint16", []uint16{0, 65535}},
		{"test.arr.int16", []int16{-32768, 32767}},
		{"test.arr.uint32", []uint32{0, 4294967295}},
		{"test.arr.int32", []int32{-2147483648, 0, 2147483647}},
		{"test.arr.float32", []float32{0.5, -1.25, 1e-5}},
		{"test.arr.bool", []bool{true, false, true}},
		{"test.arr.string", []string{"a", "", "ü"}},
		{"test.arr.uint64", []uint64{0, math.MaxUint64}},
		{"test.arr.int64", []int64{math.MinInt64, math.MaxInt64}},
		{"test.arr.float64", []float64{2.5, -0.1}},
		{"test.arr.nested", []any{[]int32{1, 2}, []int32{3}}},
		{"llama.context_length", uint32(128)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "\u2581a"}},
		{"tokenizer.ggml.scores", []float32{0, 0, 0, -1.5}},
		{"tokenizer.ggml.token_type", []int32{2, 3, 3, 1}},
	}
	if !reflect.DeepEqual(f.KVs, want) {
		for i := range max(len(f.KVs), len(want)) {
			var g, w KV
			if i < len(f.KVs) {
				g = f.KVs[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("KV %d: got %#v, want %#v", i, g, w)
			}
		}
	}

	f16 := []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38} // IEEE half 1, -2, 0.5
	i32 := []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0x80, 7, 0, 0, 0}
	var arange24 []float32
	for i := range 24 {
		arange24 = append(arange24, float32(i))
	}
	tensors := []struct {
		name  string
		typ   Type
		shape []uint64
		data  []byte
	}{
		{"f32.tensor", F32, []uint64{8, 2}, f32Bytes(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)},
		{"f16.tensor", F16, []uint64{3}, f16},
		{"q8_0.tensor", Q8_0, []uint64{32, 2}, rawBytes(68)},
		{"q4_k.tensor", Q4_K, []uint64{256, 1}, rawBytes(144)},
		{"i32.tensor", I32, []uint64{5}, i32},
		{"bf16.tensor", BF16, []uint64{3, 2}, rawBytes(12)},
		{"f32.4d", F32, []uint64{4, 3, 1, 2}, f32Bytes(arange24...)},
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tensors))
	}
	for i, w := range tensors {
		g := f.Tensors[i]
		if g.Name != w.name || g.Type != w.typ || !reflect.DeepEqual(g.Shape, w.shape) {
			t.Errorf("tensor %d: got %s %s %v, want %s %s %v", i, g.Name, g.Type, g.Shape, w.name, w.typ, w.shape)
		}
		if d := f.TensorData(i); !bytes.Equal(d, w.data) {
			t.Errorf("%s: data % x, want % x", w.name, d, w.data)
		}
		if j, ok := f.TensorIndex(w.name); !ok || j != i {
			t.Errorf("TensorIndex(%q) = %d, %v", w.name, j, ok)
		}
	}
	if (f.DataOffset+f.Tensors[1].Offset)%32 != 0 || f.Tensors[2].Offset != 96 {
		t.Errorf("data offset %d, tensor 2 offset %d", f.DataOffset, f.Tensors[2].Offset)
	}
}

// TestReadGGUFPyAlign64 reads a gguf-py file with general.alignment = 64.
func TestReadGGUFPyAlign64(t *testing.T) {
	f, err := Open("testdata/gguf-py-align64.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 {
		t.Errorf("alignment %d, data offset %d, tensor b offset %d", f.Alignment, f.DataOffset, f.Tensors[1].Offset)
	}
	if !bytes.Equal(f.TensorData(0), f32Bytes(0, 1, 2)) || !bytes.Equal(f.TensorData(1), rawBytes(34)) {
		t.Error("tensor data differ")
	}
}

// TestOpenSplitGGUFPy opens the two parts gguf-py wrote with split_max_tensors=2.
func TestOpenSplitGGUFPy(t *testing.T) {
	s, err := OpenSplit("testdata/gguf-py-split-00001-of-00002.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Parts) != 2 || len(s.Tensors) != 3 {
		t.Fatalf("%d parts, %d tensors; want 2 and 3", len(s.Parts), len(s.Tensors))
	}
	if n, err := s.Uint32("llama.block_count"); err != nil || n != 1 {
		t.Errorf("block_count %d, %v", n, err)
	}
	if _, ok := s.Parts[1].Get("llama.block_count"); ok {
		t.Error("metadata in the second part")
	}
	for i, st := range s.Tensors {
		wantPart := i / 2
		if st.Part != wantPart || st.Index != i%2 {
			t.Errorf("%s: part %d index %d", st.Name, st.Part, st.Index)
		}
		v := float32(i)
		if !bytes.Equal(s.TensorData(i), f32Bytes(v, v, v, v)) {
			t.Errorf("%s: wrong data", st.Name)
		}
	}
	if i, ok := s.TensorIndex("t2"); !ok || i != 2 {
		t.Errorf("TensorIndex(t2) = %d, %v", i, ok)
	}
	// The second part alone is not a model.
	if _, err := OpenSplit("testdata/gguf-py-split-00002-of-00002.gguf"); err == nil {
		t.Error("opening the second part succeeded")
	}
}

// goldenHeader is the header of testdata/gquant.gguf, whose bytes gguf-py has read back (see
// testdata/README.md and gquant.gguf.txt).
func goldenHeader() *Header {
	return &Header{
		KVs: []KV{
			{"tokenizer.ggml.tokens", []string{"<unk>", "", "▁a"}},
			{"general.architecture", "llama"},
			{"test.uint8", uint8(200)},
			{"test.int8", int8(-100)},
			{"test.uint16", uint16(60000)},
			{"test.int16", int16(-30000)},
			{"test.uint32", uint32(4000000000)},
			{"test.int32", int32(-2000000000)},
			{"test.float32", float32(0.1)},
			{"test.bool", true},
			{"test.string", "héllo ✓"},
			{"test.empty_string", ""},
			{"test.uint64", uint64(math.MaxUint64)},
			{"test.int64", int64(math.MinInt64)},
			{"test.float64", math.Pi},
			{"test.arr.uint8", []uint8{0, 255}},
			{"test.arr.int8", []int8{-128, 127}},
			{"test.arr.uint16", []uint16{65535}},
			{"test.arr.int16", []int16{-32768}},
			{"test.arr.uint32", []uint32{4294967295}},
			{"test.arr.int32", []int32{-1, 2}},
			{"test.arr.float32", []float32{0.5, -1e-5}},
			{"test.arr.bool", []bool{false, true}},
			{"test.arr.uint64", []uint64{math.MaxUint64}},
			{"test.arr.int64", []int64{math.MinInt64}},
			{"test.arr.float64", []float64{-0.1}},
			{"test.arr.empty_int32", []int32{}},
			{"test.arr.empty_string", []string{}},
			{"test.arr.nested", []any{[]string{"x"}, []float32{1}, []any{}}},
		},
		Tensors: []TensorInfo{
			{Name: "token_embd.weight", Type: Q8_0, Shape: []uint64{32, 3}},
			{Name: "output_norm.weight", Type: F32, Shape: []uint64{5}},
			{Name: "blk.0.attn_q.weight", Type: Q4_K, Shape: []uint64{256, 1, 1}},
		},
	}
}

// goldenData is the tensor data of testdata/gquant.gguf.
func goldenData(i int) ([]byte, error) {
	switch i {
	case 0:
		return rawBytes(3 * 34), nil
	case 1:
		return f32Bytes(1, 2, 3, 4, 5), nil
	}
	return rawBytes(144), nil
}

// TestWriterGolden writes testdata/gquant.gguf again and requires the same bytes, so the
// gguf-py check recorded in testdata stays valid for the current writer. With -update it
// rewrites the file (then redo the gguf-py check).
func TestWriterGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gquant.gguf")
	if err := WriteFile(path, goldenHeader(), goldenData); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/gquant.gguf", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/gquant.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("writer output (%d bytes) differs from testdata/gquant.gguf (%d bytes)", len(got), len(want))
	}
}

// TestGGUFPyDump compares our reading of testdata/gquant.gguf with gguf-py's, recorded in
// testdata/gquant.gguf.txt by the dump script in testdata/README.md: the alignment, the data
// offset, every key with its type and (for scalars and flat arrays) value, and every tensor's
// type, shape, size, absolute offset and a hash of its data.
func TestGGUFPyDump(t *testing.T) {
	dump, err := os.ReadFile("testdata/gquant.gguf.txt")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open("testdata/gquant.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kvs, tensors int
	for _, line := range strings.Split(strings.TrimSpace(string(dump)), "\n") {
		fields := strings.Fields(line)
		switch fields[0] {
		case "alignment":
			if want := fmt.Sprintf("alignment %d data_offset %d", f.Alignment, f.DataOffset); line != want {
				t.Errorf("gguf-py: %q, we: %q", line, want)
			}
		case "kv":
			if strings.HasPrefix(fields[1], "GGUF.") {
				continue
			}
			if kvs >= len(f.KVs) {
				t.Fatalf("gguf-py has more keys: %s", line)
			}
			kv := f.KVs[kvs]
			kvs++
			typ := strings.NewReplacer("[", "/", "]", "").Replace(describe(kv.Value))
			if fields[1] != kv.Key {
				t.Errorf("key %d: gguf-py %s, we %s", kvs-1, fields[1], kv.Key)
			}
			if fields[2] == "ARRAY" || strings.HasPrefix(fields[2], "ARRAY/ARRAY") {
				continue // empty or nested arrays: gguf-py records no element type / raw parts
			}
			if fields[2] != typ {
				t.Errorf("%s: gguf-py type %s, we %s", kv.Key, fields[2], typ)
			}
			value := strings.SplitN(line, " ", 4)[3]
			if got := pyRepr(kv.Value); got != value {
				t.Errorf("%s: gguf-py %s, we %s", kv.Key, value, got)
			}
		case "tensor":
			if tensors >= len(f.Tensors) {
				t.Fatalf("gguf-py has more tensors: %s", line)
			}
			ti := f.Tensors[tensors]
			sum := sha256.Sum256(f.TensorData(tensors))
			shape := strings.ReplaceAll(fmt.Sprint(ti.Shape), " ", ", ")
			want := fmt.Sprintf("tensor %s %s shape=%s n_bytes=%d offset=%d sha256=%x",
				ti.Name, ti.Type, shape, ti.Size, f.DataOffset+ti.Offset, sum[:8])
			if line != want {
				t.Errorf("gguf-py: %s\n     we: %s", line, want)
			}
			tensors++
		}
	}
	if kvs != len(f.KVs) || tensors != len(f.Tensors) {
		t.Errorf("gguf-py saw %d keys and %d tensors, we %d and %d", kvs, tensors, len(f.KVs), len(f.Tensors))
	}
}

// pyRepr formats a scalar or flat array as the dump script prints it (Python repr; floats
// widened to float64 and printed shortest; scalar floats quoted).
func pyRepr(v any) string {
	float := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	list := func(n int, item func(i int) string) string {
		s := make([]string, n)
		for i := range s {
			s[i] = item(i)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	switch x := v.(type) {
	case bool:
		return map[bool]string{true: "True", false: "False"}[x]
	case string:
		return "'" + x + "'"
	case float32:
		return "'" + float(float64(x)) + "'"
	case float64:
		return "'" + float(x) + "'"
	case []bool:
		return list(len(x), func(i int) string { return pyRepr(x[i]) })
	case []string:
		return list(len(x), func(i int) string { return pyRepr(x[i]) })
	case []float32:
		return list(len(x), func(i int) string { return float(float64(x[i])) })
	case []float64:
		return list(len(x), func(i int) string { return float(x[i]) })
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice {
		return list(rv.Len(), func(i int) string { return fmt.Sprint(rv.Index(i).Interface()) })
	}
	return fmt.Sprint(v)
}

// TestReadLlamaCpp reads files written by llama.cpp's own C++ writer (gguf_write_to_file, via
// llama-gguf-split; see testdata/README.md): testdata/gquant.gguf without its nested array,
// split into two parts and merged back from our own three-part split.
func TestReadLlamaCpp(t *testing.T) {
	h := goldenHeader()
	want := map[string]any{}
	for _, kv := range h.KVs[:len(h.KVs)-1] { // the nested array is last
		want[kv.Key] = kv.Value
	}
	check := func(kvs []KV, split map[string]any) {
		t.Helper()
		got := map[string]any{}
		for _, kv := range kvs {
			got[kv.Key] = kv.Value
		}
		all := maps.Clone(want)
		maps.Copy(all, split)
		if !reflect.DeepEqual(got, all) {
			t.Errorf("metadata differ:\n got %v\nwant %v", got, all)
		}
	}
	checkTensor := func(i int, ti TensorInfo, data []byte) {
		t.Helper()
		w := h.Tensors[i]
		// llama.cpp writes ggml_n_dims dimensions: trailing 1s are dropped.
		shape := w.Shape
		for len(shape) > 1 && shape[len(shape)-1] == 1 {
			shape = shape[:len(shape)-1]
		}
		d, _ := goldenData(i)
		if ti.Name != w.Name || ti.Type != w.Type || !reflect.DeepEqual(ti.Shape, shape) || !bytes.Equal(data, d) {
			t.Errorf("tensor %d: got %s %s %v", i, ti.Name, ti.Type, ti.Shape)
		}
	}

	s, err := OpenSplit("testdata/llama-split-00001-of-00002.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s.KVs, map[string]any{KeySplitNo: uint16(0), KeySplitCount: uint16(2), KeySplitTensorsCount: int32(3)})
	if len(s.Tensors) != 3 || s.Tensors[2].Part != 1 {
		t.Fatalf("tensors %+v", s.Tensors)
	}
	for i, st := range s.Tensors {
		checkTensor(i, st.TensorInfo, s.TensorData(i))
	}

	m, err := OpenSplit("testdata/llama-merged.gguf") // split.count 0: a single file
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	check(m.KVs, map[string]any{KeySplitNo: uint16(0), KeySplitCount: uint16(0), KeySplitTensorsCount: int32(3)})
	if len(m.Parts) != 1 || len(m.Tensors) != 3 {
		t.Fatalf("%d parts, %d tensors", len(m.Parts), len(m.Tensors))
	}
	for i, st := range m.Tensors {
		checkTensor(i, st.TensorInfo, m.TensorData(i))
	}
}
