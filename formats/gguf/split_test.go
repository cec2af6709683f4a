package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSplitName(t *testing.T) {
	for _, c := range []struct {
		path string
		i, n int
		want string
	}{
		{"dir/model.gguf", 0, 3, "dir/model-00001-of-00003.gguf"},
		{"model", 2, 3, "model-00003-of-00003.gguf"},
		{"m.gguf", 11, 100000, "m-00012-of-100000.gguf"},
	} {
		if got := SplitName(c.path, c.i, c.n); got != c.want {
			t.Errorf("SplitName(%q, %d, %d) = %q, want %q", c.path, c.i, c.n, got, c.want)
		}
	}
}

// splitTestHeader has five F32 tensors of 40, 400, 40, 40 and 40 bytes (padded: 64, 416, 64,
// 64, 64) and existing split keys that must be dropped.
func splitTestHeader() *Header {
	h := &Header{KVs: []KV{
		{"general.architecture", "llama"},
		{"llama.block_count", uint32(2)},
		{KeySplitNo, uint16(7)},
		{KeySplitCount, uint16(9)},
	}}
	for i, n := range []uint64{10, 100, 10, 10, 10} {
		h.Tensors = append(h.Tensors, TensorInfo{Name: "t" + string(rune('0'+i)), Type: F32, Shape: []uint64{n}})
	}
	return h
}

func splitTestData(i int) []byte {
	n := []int{10, 100, 10, 10, 10}[i] * 4
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	return b
}

func TestSplitHeaders(t *testing.T) {
	// 128 bytes per part: [t0] [t1 alone, larger than the limit] [t2 t3] [t4]
	parts, err := SplitHeaders(splitTestHeader(), 128)
	if err != nil {
		t.Fatal(err)
	}
	var groups [][]string
	for _, p := range parts {
		var names []string
		for _, ti := range p.Tensors {
			names = append(names, ti.Name)
		}
		groups = append(groups, names)
	}
	want := [][]string{{"t0"}, {"t1"}, {"t2", "t3"}, {"t4"}}
	if !reflect.DeepEqual(groups, want) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	wantKVs0 := []KV{
		{"general.architecture", "llama"},
		{"llama.block_count", uint32(2)},
		{KeySplitNo, uint16(0)},
		{KeySplitCount, uint16(4)},
		{KeySplitTensorsCount, int32(5)},
	}
	if !reflect.DeepEqual(parts[0].KVs, wantKVs0) {
		t.Errorf("part 0 KVs %v", parts[0].KVs)
	}
	wantKVs2 := []KV{{KeySplitNo, uint16(2)}, {KeySplitCount, uint16(4)}, {KeySplitTensorsCount, int32(5)}}
	if !reflect.DeepEqual(parts[2].KVs, wantKVs2) {
		t.Errorf("part 2 KVs %v", parts[2].KVs)
	}
	if parts[2].Tensors[1].Offset != 64 || parts[2].Tensors[1].Size != 40 {
		t.Errorf("part 2 layout %+v", parts[2].Tensors)
	}

	// Everything fits: one header, the split keys dropped.
	one, err := SplitHeaders(splitTestHeader(), 1<<20)
	if err != nil || len(one) != 1 || len(one[0].KVs) != 2 || len(one[0].Tensors) != 5 {
		t.Errorf("single part: %v, %+v", err, one)
	}
	if _, err := SplitHeaders(splitTestHeader(), 0); err == nil {
		t.Error("maxBytes 0 accepted")
	}
}

// writeSplit writes the parts of h and returns the first part's path.
func writeSplit(t *testing.T, dir string, h *Header, maxBytes int64, data func(name string) []byte) string {
	t.Helper()
	parts, err := SplitHeaders(h, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.gguf")
	for i, p := range parts {
		name := path
		if len(parts) > 1 {
			name = SplitName(path, i, len(parts))
		}
		err := WriteFile(name, p, func(j int) ([]byte, error) { return data(p.Tensors[j].Name), nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(parts) > 1 {
		return SplitName(path, 0, len(parts))
	}
	return path
}

func TestSplitRoundTrip(t *testing.T) {
	dataByName := func(name string) []byte { return splitTestData(int(name[1] - '0')) }
	for _, maxBytes := range []int64{128, 1 << 20} {
		dir := t.TempDir()
		first := writeSplit(t, dir, splitTestHeader(), maxBytes, dataByName)
		s, err := OpenSplit(first)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.Uint32("llama.block_count"); err != nil || n != 2 {
			t.Errorf("metadata: %d, %v", n, err)
		}
		if len(s.Tensors) != 5 {
			t.Fatalf("%d tensors", len(s.Tensors))
		}
		for i, st := range s.Tensors {
			if !bytes.Equal(s.TensorData(i), splitTestData(i)) || st.Name != "t"+string(rune('0'+i)) {
				t.Errorf("tensor %d (%s, part %d) differs", i, st.Name, st.Part)
			}
		}
		if maxBytes == 128 && len(s.Parts) != 4 {
			t.Errorf("%d parts", len(s.Parts))
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestOpenSplitErrors(t *testing.T) {
	dataByName := func(name string) []byte { return splitTestData(int(name[1] - '0')) }
	dir := t.TempDir()
	first := writeSplit(t, dir, splitTestHeader(), 128, dataByName)

	third := SplitName(filepath.Join(dir, "model.gguf"), 2, 4)
	if _, err := OpenSplit(third); err == nil || !strings.Contains(err.Error(), "split.no: is 2: open the first part") {
		t.Errorf("opening part 3: %v", err)
	}
	renamed := filepath.Join(dir, "renamed.gguf")
	copyFile(t, first, renamed)
	if _, err := OpenSplit(renamed); err == nil || !strings.Contains(err.Error(), `must end in "-00001-of-00004.gguf"`) {
		t.Errorf("renamed first part: %v", err)
	}
	os.Remove(third)
	if _, err := OpenSplit(first); err == nil || !strings.Contains(err.Error(), "model-00003-of-00004.gguf") {
		t.Errorf("missing part: %v", err)
	}

	// A part from another split (right name, wrong split.no) is refused.
	other := t.TempDir()
	h := splitTestHeader()
	h.Tensors = h.Tensors[:4]
	writeSplit(t, other, h, 128, dataByName) // parts t0 | t1 | t2 t3
	copyFile(t, SplitName(filepath.Join(other, "model.gguf"), 1, 3), SplitName(filepath.Join(dir, "model.gguf"), 2, 4))
	if _, err := OpenSplit(first); err == nil || !strings.Contains(err.Error(), "split.no: is 1, want 2") {
		t.Errorf("wrong part: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
