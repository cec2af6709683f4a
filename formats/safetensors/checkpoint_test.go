package safetensors

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	st "github.com/nlpodyssey/safetensors"
)

// le16 and le32 build little-endian test data.
func le16(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func le32(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// fixture tensors; the 16-bit encodings are written out by hand:
// bf16 1.5 = 0x3fc0, -2 = 0xc000, 0.25 = 0x3e80, -0 = 0x8000;
// f16 1.5 = 0x3e00, -2 = 0xc000, 65504 = 0x7bff, 2^-24 = 0x0001.
func fixture() ([]NamedTensor, map[string][]float32) {
	tensors := []NamedTensor{
		{Name: "model.norm.weight", DType: BF16, Shape: []int{4}, Data: le16(0x3fc0, 0xc000, 0x3e80, 0x8000)},
		{Name: "model.embed_tokens.weight", DType: F16, Shape: []int{2, 2}, Data: le16(0x3e00, 0xc000, 0x7bff, 0x0001)},
		{Name: "lm_head.weight", DType: F32, Shape: []int{1, 3}, Data: le32(0.1, -7, 3e38)},
		{Name: "scalar", DType: F32, Shape: []int{}, Data: le32(42)},
		{Name: "empty", DType: BF16, Shape: []int{0, 8}, Data: []byte{}},
	}
	want := map[string][]float32{
		"model.norm.weight":         {1.5, -2, 0.25, float32(math.Copysign(0, -1))},
		"model.embed_tokens.weight": {1.5, -2, 65504, 1.0 / (1 << 24)},
		"lm_head.weight":            {0.1, -7, 3e38},
		"scalar":                    {42},
		"empty":                     {},
	}
	return tensors, want
}

// checkFixture opens path and compares every tensor with the fixture.
func checkFixture(t *testing.T, path string) *Checkpoint {
	t.Helper()
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tensors, want := fixture()
	got := c.Tensors()
	if len(got) != len(tensors) {
		t.Fatalf("%d tensors, want %d", len(got), len(tensors))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].Name >= got[i].Name {
			t.Errorf("Tensors not sorted: %s before %s", got[i-1].Name, got[i].Name)
		}
	}
	for _, nt := range tensors {
		info, ok := c.Lookup(nt.Name)
		if !ok {
			t.Fatalf("Lookup(%s) failed", nt.Name)
		}
		if info.DType != nt.DType || !equalInts(info.Shape, nt.Shape) || info.Size != int64(len(nt.Data)) {
			t.Errorf("%s: info %+v", nt.Name, info)
		}
		data, err := c.Data(nt.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, nt.Data) {
			t.Errorf("%s: data %x, want %x", nt.Name, data, nt.Data)
		}
		// the view is the file's bytes at the advertised offset
		raw, _ := os.ReadFile(info.File)
		if !bytes.Equal(raw[info.Offset:info.Offset+info.Size], nt.Data) {
			t.Errorf("%s: Offset %d does not point at the data", nt.Name, info.Offset)
		}
		dst := make([]float32, 0, 16)
		f, err := c.ToFloat32(nt.Name, dst)
		if err != nil {
			t.Fatal(err)
		}
		w := want[nt.Name]
		if len(f) != len(w) {
			t.Fatalf("%s: %d floats, want %d", nt.Name, len(f), len(w))
		}
		for i := range w {
			if math.Float32bits(f[i]) != math.Float32bits(w[i]) {
				t.Errorf("%s[%d] = %g, want %g", nt.Name, i, f[i], w[i])
			}
		}
		if len(f) > 0 && &f[0] != &dst[:1][0] {
			t.Errorf("%s: dst not reused", nt.Name)
		}
		c.Release(nt.Name)
	}
	if _, ok := c.Lookup("nope"); ok {
		t.Error("Lookup of a missing tensor succeeded")
	}
	if _, err := c.Data("nope"); err == nil {
		t.Error("Data of a missing tensor succeeded")
	}
	return c
}

func TestOpenSingle(t *testing.T) {
	dir := t.TempDir()
	tensors, _ := fixture()
	path := filepath.Join(dir, "model.safetensors")
	if err := WriteFile(path, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, dir} { // the file itself, or its directory
		c := checkFixture(t, p)
		if f := c.Files(); len(f) != 1 || f[0] != path {
			t.Errorf("Files = %v", f)
		}
		if m := c.Metadata(path); m["format"] != "pt" {
			t.Errorf("Metadata = %v", m)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wantErr(t, func() error { _, err := c.Data("scalar"); return err }(), "scalar: checkpoint is closed")
	}
}

// TestOpenLibraryWritten reads a file written by the nlpodyssey library, an independent writer
// (it lays tensors out in another order).
func TestOpenLibraryWritten(t *testing.T) {
	tensors, _ := fixture()
	views := map[string]st.TensorView{}
	for _, nt := range tensors {
		if len(nt.Shape) == 0 || len(nt.Data) == 0 {
			continue // the library cannot write scalars; skip the empty tensor too
		}
		shape := make([]uint64, len(nt.Shape))
		for i, d := range nt.Shape {
			shape[i] = uint64(d)
		}
		dt, _ := st.ParseDType(string(nt.DType))
		v, err := st.NewTensorView(dt, shape, nt.Data)
		if err != nil {
			t.Fatal(err)
		}
		views[nt.Name] = v
	}
	b, err := st.Serialize(views, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := writeRaw(t, dir, "lib.safetensors", b)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, nt := range tensors {
		if _, ok := views[nt.Name]; !ok {
			continue
		}
		data, err := c.Data(nt.Name)
		if err != nil || !bytes.Equal(data, nt.Data) {
			t.Errorf("%s: %x %v", nt.Name, data, err)
		}
	}
}

// writeSharded writes the fixture as two shards and an index (JSON written by hand).
func writeSharded(t *testing.T, index string) string {
	t.Helper()
	dir := t.TempDir()
	tensors, _ := fixture()
	if err := WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), tensors[:2], nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), tensors[2:], nil); err != nil {
		t.Fatal(err)
	}
	writeRaw(t, dir, IndexName, []byte(index))
	return dir
}

const goodIndex = `{"metadata":{"total_size":42},"weight_map":{
 "model.norm.weight":"model-00001-of-00002.safetensors",
 "model.embed_tokens.weight":"model-00001-of-00002.safetensors",
 "lm_head.weight":"model-00002-of-00002.safetensors",
 "scalar":"model-00002-of-00002.safetensors",
 "empty":"model-00002-of-00002.safetensors"}}`

func TestOpenSharded(t *testing.T) {
	dir := writeSharded(t, goodIndex)
	for _, p := range []string{dir, filepath.Join(dir, IndexName)} {
		c := checkFixture(t, p)
		if f := c.Files(); len(f) != 2 || filepath.Base(f[0]) != "model-00001-of-00002.safetensors" {
			t.Errorf("Files = %v", f)
		}
		info, _ := c.Lookup("scalar")
		if filepath.Base(info.File) != "model-00002-of-00002.safetensors" {
			t.Errorf("scalar in %s", info.File)
		}
		c.Close()
	}
	// Without an index, every *.safetensors of the directory is opened.
	os.Remove(filepath.Join(dir, IndexName))
	checkFixture(t, dir).Close()
}

func TestOpenShardedMalformed(t *testing.T) {
	const s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	cases := []struct {
		name  string
		index string
		setup func(dir string)
		want  []string
	}{
		{"missing shard", goodIndex, func(dir string) { os.Remove(filepath.Join(dir, s2)) },
			[]string{IndexName + ": " + s2 + ": shard file not found (the index places 3 tensors in it, e.g. lm_head.weight)"}},
		{"listed twice", `{"weight_map":{"model.norm.weight":"` + s1 + `","model.embed_tokens.weight":"` + s1 + `","lm_head.weight":"` + s2 + `","scalar":"` + s2 + `","empty":"` + s2 + `","scalar":"` + s2 + `"}}`, nil,
			[]string{IndexName + ": scalar: listed twice in weight_map"}},
		{"missing from index", `{"weight_map":{"model.norm.weight":"` + s1 + `","model.embed_tokens.weight":"` + s1 + `","lm_head.weight":"` + s2 + `","empty":"` + s2 + `"}}`, nil,
			[]string{s2 + ": scalar: tensor is in the shard but missing from the index " + IndexName}},
		{"wrong shard", `{"weight_map":{"model.norm.weight":"` + s2 + `","model.embed_tokens.weight":"` + s1 + `","lm_head.weight":"` + s2 + `","scalar":"` + s2 + `","empty":"` + s2 + `"}}`, nil,
			[]string{IndexName + ": model.norm.weight: the index places it in " + s2 + ", which does not hold it", s1 + ": model.norm.weight: tensor is in the shard but the index places it in " + s2}},
		{"not json", `{"weight_map":`, nil, []string{IndexName + ": not valid JSON"}},
		{"no weight_map", `{"metadata":{}}`, nil, []string{IndexName + ": weight_map: missing"}},
		{"escaping shard", `{"weight_map":{"a":"../x.safetensors"}}`, nil, []string{IndexName + ": ../x.safetensors: shard path leaves the checkpoint directory"}},
		{"bad shard too", goodIndex, func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, s1))
			os.WriteFile(filepath.Join(dir, s1), b[:len(b)-1], 0o644)
		}, []string{s1 + ": model.norm.weight: data_offsets", "run past the end of the data section"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeSharded(t, tc.index)
			if tc.setup != nil {
				tc.setup(dir)
			}
			c, err := Open(dir)
			if err == nil {
				c.Close()
			}
			wantErr(t, err, tc.want...)
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "absent.safetensors"))
	wantErr(t, err, "absent.safetensors: no such file or directory")
	_, err = Open(dir)
	wantErr(t, err, dir+": no *.safetensors files")
	// Two plain files holding the same tensor.
	tensors, _ := fixture()
	WriteFile(filepath.Join(dir, "a.safetensors"), tensors[:1], nil)
	WriteFile(filepath.Join(dir, "b.safetensors"), tensors[:2], nil)
	_, err = Open(dir)
	wantErr(t, err, "b.safetensors: model.norm.weight: also in "+filepath.Join(dir, "a.safetensors"))
	// Problems of several files are reported together.
	writeRaw(t, dir, "c.safetensors", rawFile(`{"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8))
	writeRaw(t, dir, "d.safetensors", []byte{1})
	_, err = Open(dir)
	wantErr(t, err, "c.safetensors: x: unsupported dtype I64", "; "+filepath.Join(dir, "d.safetensors")+": file is 1 bytes")
}

func TestWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	err := WriteFile(path, []NamedTensor{
		{Name: "a", DType: "I64", Shape: []int{1}, Data: make([]byte, 8)},
		{Name: "b", DType: F32, Shape: []int{2}, Data: make([]byte, 4)},
		{Name: "b", DType: F32, Shape: []int{1}, Data: make([]byte, 4)},
	}, nil)
	wantErr(t, err, path+": a: unsupported dtype", "b: 4 bytes of data, shape [2] of F32 needs 8", "b: tensor given twice")
	short := func(w io.Writer) error { _, err := w.Write([]byte{1, 2}); return err }
	err = WriteFile(path, []NamedTensor{{Name: "s", DType: F32, Shape: []int{1}, Source: short}}, nil)
	wantErr(t, err, path+": s: source wrote 2 bytes, want 4")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left files: %v", entries)
	}
}
