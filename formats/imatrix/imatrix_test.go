package imatrix

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// Files written by llama-imatrix (see testdata/README.md): the same run in both formats.
const (
	llamaGGUF = "testdata/stories260k.imatrix.gguf"
	llamaDat  = "testdata/stories260k.imatrix.dat"
)

// The weights llama-imatrix collects for stories260k: 5 layers × 7 linear weights
// (output.weight is not collected without --process-output).
func wantNames() []string {
	var names []string
	for l := 0; l < 5; l++ {
		for _, w := range []string{"attn_k", "attn_output", "attn_q", "attn_v", "ffn_down", "ffn_gate", "ffn_up"} {
			names = append(names, "blk."+string(rune('0'+l))+"."+w+".weight")
		}
	}
	return names
}

func names(m *Matrix) []string {
	var s []string
	for _, e := range m.Entries {
		s = append(s, e.Name)
	}
	return s
}

func TestReadLlamaGGUF(t *testing.T) {
	m, err := Read(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(names(m), wantNames()) {
		t.Fatalf("entries %v", names(m))
	}
	if m.Legacy || m.ChunkCount != 4 || m.ChunkSize != 128 || !reflect.DeepEqual(m.Datasets, []string{"tinystories-calib.txt"}) {
		t.Fatalf("metadata: legacy %v, chunks %d × %d, datasets %q", m.Legacy, m.ChunkCount, m.ChunkSize, m.Datasets)
	}
	for _, e := range m.Entries {
		// Every dense weight saw every token of the 4 chunks of 128.
		if !reflect.DeepEqual(e.Counts, []int64{4 * 128}) {
			t.Errorf("%s: counts %v, want [512]", e.Name, e.Counts)
		}
		want := 64 // stories260k: hidden 64, ffn 172
		if strings.Contains(e.Name, "ffn_down") {
			want = 172
		}
		if e.RowLen() != want || e.Sum != nil {
			t.Errorf("%s: row length %d (want %d), in_sum %v", e.Name, e.RowLen(), want, e.Sum != nil)
		}
	}
}

// TestImportanceFromRawTensors checks Importance against the raw file read with the gguf
// package alone: Σx² / count per column computed in float64 (exact for float32 operands after
// rounding back to float32).
func TestImportanceFromRawTensors(t *testing.T) {
	m, err := Read(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range wantNames() {
		is, _ := f.TensorIndex(name + ".in_sum2")
		ic, _ := f.TensorIndex(name + ".counts")
		sum2, cnt := rawFloats(f.TensorData(is)), rawFloats(f.TensorData(ic))
		got := m.Importance(name)
		if len(got) != len(sum2) || len(cnt) != 1 {
			t.Fatalf("%s: %d importances for %d sums, %d counts", name, len(got), len(sum2), len(cnt))
		}
		for i := range got {
			want := float32(float64(sum2[i]) / float64(cnt[0]))
			if got[i] != want || !(want > 0) {
				t.Fatalf("%s[%d]: %g, want %g", name, i, got[i], want)
			}
		}
	}
	if m.Importance("output.weight") != nil {
		t.Error("importance of a weight with no entry should be nil")
	}
}

func rawFloats(b []byte) []float64 {
	v := make([]float64, len(b)/4)
	for i := range v {
		v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return v
}

// TestReadLlamaDatAgrees reads the legacy file of the same run and checks it against the GGUF
// one: same entries and trailer, and importances equal up to the float32 rounding of
// (Σ/count)·ncall / ncall.
func TestReadLlamaDatAgrees(t *testing.T) {
	g, err := Read(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Read(llamaDat)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Legacy || d.ChunkCount != 4 || d.ChunkSize != 0 || !reflect.DeepEqual(d.Datasets, g.Datasets) {
		t.Fatalf("legacy metadata: legacy %v, chunks %d × %d, datasets %q", d.Legacy, d.ChunkCount, d.ChunkSize, d.Datasets)
	}
	if !reflect.DeepEqual(names(d), names(g)) {
		t.Fatalf("entries differ: %v vs %v", names(d), names(g))
	}
	for _, e := range d.Entries {
		if !reflect.DeepEqual(e.Counts, []int64{4}) { // ncall = ⌈512/128⌉
			t.Errorf("%s: ncall %v, want [4]", e.Name, e.Counts)
		}
		a, b := g.Importance(e.Name), d.Importance(e.Name)
		for i := range a {
			if math.Abs(float64(a[i]-b[i])) > 2e-7*math.Abs(float64(a[i])) {
				t.Fatalf("%s[%d]: gguf %g, dat %g", e.Name, i, a[i], b[i])
			}
		}
	}
}

// TestWriteDatMatchesLlama: converting llama-imatrix's GGUF output to the legacy format must
// give the bytes llama-imatrix wrote for --output-format dat in the same run.
func TestWriteDatMatchesLlama(t *testing.T) {
	m, err := Read(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.dat")
	if err := WriteDat(out, m); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, out, llamaDat)

	// A legacy matrix is written back unchanged.
	d, err := Read(llamaDat)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteDat(out, d); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, out, llamaDat)
}

func sameBytes(t *testing.T, got, want string) {
	t.Helper()
	a, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s (%d bytes) differs from %s (%d bytes)", got, len(a), want, len(b))
	}
}

// TestWriteGGUFRoundTrip: our GGUF holds the same tensors, with the same bytes, shapes and
// order, and the same metadata values as llama-imatrix's, and reads back equal.
func TestWriteGGUFRoundTrip(t *testing.T) {
	m, err := Read(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.gguf")
	if err := WriteGGUF(out, m); err != nil {
		t.Fatal(err)
	}
	back, err := Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Fatal("GGUF round trip changed the matrix")
	}
	ours, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	theirs, err := gguf.Open(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	if len(ours.Tensors) != len(theirs.Tensors) {
		t.Fatalf("%d tensors, llama.cpp wrote %d", len(ours.Tensors), len(theirs.Tensors))
	}
	for i, ti := range theirs.Tensors {
		oi := ours.Tensors[i]
		if oi.Name != ti.Name || oi.Type != ti.Type || !reflect.DeepEqual(oi.Shape, ti.Shape) || !bytes.Equal(ours.TensorData(i), theirs.TensorData(i)) {
			t.Fatalf("tensor %d: ours %s %v, llama.cpp %s %v (or data differs)", i, oi.Name, oi.Shape, ti.Name, ti.Shape)
		}
	}
	for _, kv := range theirs.KVs {
		o, ok := ours.Get(kv.Key)
		if !ok || !reflect.DeepEqual(o.Value, kv.Value) {
			t.Errorf("%s: ours %#v, llama.cpp %#v", kv.Key, o.Value, kv.Value)
		}
	}
}

// moeMatrix is a synthetic two-entry matrix: a stack of 3 experts (one never routed to) with
// Σx, and a dense weight.
func moeMatrix() *Matrix {
	return &Matrix{
		Entries: []Entry{
			{Name: "blk.0.ffn_up_exps.weight", Sum2: []float32{1, 2, 3, 4, 5, 6}, Sum: []float32{-1, 0, 1, 2, 3, 4}, Counts: []int64{10, 0, 300}},
			{Name: "blk.0.attn_q.weight", Sum2: []float32{0.5, 7, 9}, Counts: []int64{3}},
		},
		Datasets: []string{"a.txt", "b.txt"}, ChunkCount: 2, ChunkSize: 256,
	}
}

func TestMoEAndSum(t *testing.T) {
	m := moeMatrix()
	imp := m.Importance("blk.0.ffn_up_exps.weight")
	// Σ/count per expert; the expert with count 0 gets 1 (llama-quantize load_imatrix).
	want := []float32{float32(1.0 / 10), float32(2.0 / 10), 1, 1, float32(5.0 / 300), float32(6.0 / 300)}
	if !reflect.DeepEqual(imp, want) {
		t.Fatalf("importance %v, want %v", imp, want)
	}
	dir := t.TempDir()
	g := filepath.Join(dir, "m.gguf")
	if err := WriteGGUF(g, m); err != nil {
		t.Fatal(err)
	}
	back, err := Read(g)
	if err != nil {
		t.Fatal(err)
	}
	m.Sort()
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip: %+v, want %+v", back, m)
	}
	f, err := gguf.Open(g)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	i, ok := f.TensorIndex("blk.0.ffn_up_exps.weight.in_sum2")
	if !ok || !reflect.DeepEqual(f.Tensors[i].Shape, []uint64{2, 3}) {
		t.Fatalf("in_sum2 shape %v", f.Tensors[i].Shape)
	}

	// Legacy: ncall = ⌈300/256⌉ = 2, values (Σ/count)·2, an unrouted expert stores 1·2.
	dat := filepath.Join(dir, "m.dat")
	if err := WriteDat(dat, m); err != nil {
		t.Fatal(err)
	}
	d, err := Read(dat)
	if err != nil {
		t.Fatal(err)
	}
	e := d.Entry("blk.0.ffn_up_exps.weight")
	wantSum := []float32{float32(1.0 / 10 * 2), float32(2.0 / 10 * 2), 2, 2, float32(5.0 / 300 * 2), float32(6.0 / 300 * 2)}
	if e == nil || !reflect.DeepEqual(e.Counts, []int64{2}) || !reflect.DeepEqual(e.Sum2, wantSum) || e.Sum != nil {
		t.Fatalf("legacy entry %+v, want sums %v ncall 2", e, wantSum)
	}
	if d.ChunkCount != 2 || !reflect.DeepEqual(d.Datasets, []string{"b.txt"}) {
		t.Fatalf("legacy trailer: %d %q", d.ChunkCount, d.Datasets)
	}
}

// TestRejects lists malformed inputs and the error each must give (file and tensor named).
func TestRejects(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	goodDat, err := os.ReadFile(llamaDat)
	if err != nil {
		t.Fatal(err)
	}
	writeG := func(name string, edit func(m *Matrix)) string {
		m := moeMatrix()
		edit(m)
		p := filepath.Join(dir, name)
		if err := writeUnchecked(p, m); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withHeader := func(name string, h *gguf.Header, data [][]byte) string {
		p := filepath.Join(dir, name)
		if err := gguf.WriteFile(p, h, func(i int) ([]byte, error) { return data[i], nil }); err != nil {
			t.Fatal(err)
		}
		return p
	}
	meta := []gguf.KV{{Key: KeyType, Value: TypeImatrix}, {Key: KeyDatasets, Value: []string{"x"}},
		{Key: KeyChunkCount, Value: uint32(1)}, {Key: KeyChunkSize, Value: uint32(8)}}
	f32 := func(n uint64) gguf.TensorInfo { return gguf.TensorInfo{Type: gguf.F32, Shape: []uint64{n, 1}} }
	named := func(ti gguf.TensorInfo, name string) gguf.TensorInfo { ti.Name = name; return ti }

	cases := []struct {
		name, path, want string
	}{
		{"nan", writeG("nan.gguf", func(m *Matrix) { m.Entries[1].Sum2[1] = float32(math.NaN()) }),
			"nan.gguf: blk.0.attn_q.weight: in_sum2[1] = NaN"},
		{"negative", writeG("neg.gguf", func(m *Matrix) { m.Entries[1].Sum2[0] = -1 }),
			"neg.gguf: blk.0.attn_q.weight: in_sum2[0] = -1"},
		{"missing counts", withHeader("nocounts.gguf", &gguf.Header{KVs: meta, Tensors: []gguf.TensorInfo{named(f32(4), "w.in_sum2")}}, [][]byte{make([]byte, 16)}),
			"nocounts.gguf: w.counts: missing"},
		{"missing sums", withHeader("nosums.gguf", &gguf.Header{KVs: meta, Tensors: []gguf.TensorInfo{named(f32(1), "w.counts")}}, [][]byte{make([]byte, 4)}),
			"nosums.gguf: w.in_sum2: missing"},
		{"counts shape", withHeader("cshape.gguf", &gguf.Header{KVs: meta, Tensors: []gguf.TensorInfo{named(f32(4), "w.in_sum2"), named(f32(2), "w.counts")}}, [][]byte{make([]byte, 16), make([]byte, 8)}),
			"cshape.gguf: w.counts: shape [2 1], want [1 1]"},
		{"nan count", withHeader("ncount.gguf", &gguf.Header{KVs: meta, Tensors: []gguf.TensorInfo{named(f32(1), "w.in_sum2"), named(f32(1), "w.counts")}}, [][]byte{make([]byte, 4), floatBytes([]float32{float32(math.Inf(1))})}),
			"ncount.gguf: w.counts: count 0 is +Inf"},
		{"stray tensor", withHeader("stray.gguf", &gguf.Header{KVs: meta, Tensors: []gguf.TensorInfo{named(f32(1), "token_embd.weight")}}, [][]byte{make([]byte, 4)}),
			"stray.gguf: token_embd.weight: unexpected tensor"},
		{"f16", withHeader("f16.gguf", &gguf.Header{KVs: meta, Tensors: []gguf.TensorInfo{{Name: "w.in_sum2", Type: gguf.F16, Shape: []uint64{2}}}}, [][]byte{make([]byte, 4)}),
			"f16.gguf: w.in_sum2: type F16, want F32"},
		{"no metadata", withHeader("nometa.gguf", &gguf.Header{KVs: meta[:1], Tensors: []gguf.TensorInfo{named(f32(1), "w.in_sum2"), named(f32(1), "w.counts")}}, [][]byte{make([]byte, 4), make([]byte, 4)}),
			"nometa.gguf: imatrix.chunk_count: missing (llama-quantize requires it); imatrix.chunk_size: missing"},
		{"model file", withHeader("model.gguf", &gguf.Header{KVs: append([]gguf.KV{{Key: KeyType, Value: "model"}}, meta[1:]...)}, nil),
			`model.gguf: general.type: is model, want "imatrix"`},
		{"wrong key type", withHeader("ktype.gguf", &gguf.Header{KVs: append(append([]gguf.KV{}, meta[:3]...), gguf.KV{Key: KeyChunkSize, Value: int32(8)}), Tensors: []gguf.TensorInfo{named(f32(1), "w.in_sum2"), named(f32(1), "w.counts")}}, [][]byte{make([]byte, 4), make([]byte, 4)}),
			"ktype.gguf: imatrix.chunk_size: has type INT32, want UINT32"},
		{"empty file", writeRaw(t, dir, "empty.dat", nil), "empty.dat: entries: no entries"},
		{"truncated dat", writeRaw(t, dir, "trunc.dat", goodDat[:500]), "trunc.dat: blk.0.attn_output.weight: 64 values out of range"},
		{"trailer garbage", writeRaw(t, dir, "tail.dat", append(append([]byte{}, goodDat...), 1, 2)), "tail.dat: trailer: 2 unexpected bytes"},
		{"truncated gguf", writeRaw(t, dir, "trunc.gguf", good[:len(good)-40]), "trunc.gguf"},
	}
	for _, c := range cases {
		_, err := Read(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}

	// The writers validate too.
	m := moeMatrix()
	m.Entries[0].Counts = []int64{1, 2, 3, 4}
	if err := WriteGGUF(filepath.Join(dir, "bad.gguf"), m); err == nil || !strings.Contains(err.Error(), "bad.gguf: blk.0.ffn_up_exps.weight: 6 in_sum2 values do not divide into 4 matrices") {
		t.Errorf("WriteGGUF: %v", err)
	}
	m = moeMatrix()
	m.ChunkSize = 0
	if err := WriteDat(filepath.Join(dir, "bad.dat"), m); err == nil || !strings.Contains(err.Error(), "bad.dat: imatrix.chunk_size: is 0") {
		t.Errorf("WriteDat: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.dat")); !os.IsNotExist(err) {
		t.Error("a failed write left a file behind")
	}
}

func writeRaw(t *testing.T, dir, name string, b []byte) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeUnchecked writes m as WriteGGUF would, without validating it first, to build bad files.
func writeUnchecked(path string, m *Matrix) error {
	h := &gguf.Header{KVs: []gguf.KV{{Key: KeyType, Value: TypeImatrix}, {Key: KeyDatasets, Value: m.Datasets},
		{Key: KeyChunkCount, Value: uint32(m.ChunkCount)}, {Key: KeyChunkSize, Value: uint32(m.ChunkSize)}}}
	var data [][]byte
	for _, e := range m.Entries {
		counts := make([]float32, len(e.Counts))
		for j, c := range e.Counts {
			counts[j] = float32(c)
		}
		h.Tensors = append(h.Tensors,
			gguf.TensorInfo{Name: e.Name + SuffixSum2, Type: gguf.F32, Shape: []uint64{uint64(e.RowLen()), uint64(len(e.Counts))}},
			gguf.TensorInfo{Name: e.Name + SuffixCounts, Type: gguf.F32, Shape: []uint64{1, uint64(len(e.Counts))}})
		data = append(data, floatBytes(e.Sum2), floatBytes(counts))
	}
	return gguf.WriteFile(path, h, func(i int) ([]byte, error) { return data[i], nil })
}

// TestLlamaQuantizeReadsOurFiles runs llama-quantize --imatrix on a file we wrote (skipped
// unless GQUANT_LLAMA_QUANTIZE names the binary and GQUANT_IMATRIX_MODEL an F32 stories260k
// GGUF). Quantizing with our GGUF rewrite of llama-imatrix's output must give the same bytes as
// with the original (same relative imatrix name, so the recorded metadata matches too), and
// different bytes from quantizing without an imatrix.
func TestLlamaQuantizeReadsOurFiles(t *testing.T) {
	bin, model := os.Getenv("GQUANT_LLAMA_QUANTIZE"), os.Getenv("GQUANT_IMATRIX_MODEL")
	if bin == "" || model == "" {
		t.Skip("set GQUANT_LLAMA_QUANTIZE and GQUANT_IMATRIX_MODEL to run llama-quantize")
	}
	model, _ = filepath.Abs(model)
	m, err := Read(llamaGGUF)
	if err != nil {
		t.Fatal(err)
	}
	quantize := func(imatrix func(dir string) error) []byte {
		dir := t.TempDir()
		args := []string{model, "out.gguf", "Q4_K_M", "1"}
		if imatrix != nil {
			if err := imatrix(dir); err != nil {
				t.Fatal(err)
			}
			args = append([]string{"--imatrix", "imatrix.gguf"}, args...)
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("llama-quantize: %v\n%s", err, out)
		}
		if imatrix != nil && !strings.Contains(string(out), "loaded 35 importance matrix entries") {
			t.Fatalf("llama-quantize did not load 35 entries:\n%s", out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "out.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	theirs := quantize(func(dir string) error {
		b, err := os.ReadFile(llamaGGUF)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "imatrix.gguf"), b, 0o644)
		}
		return err
	})
	ours := quantize(func(dir string) error { return WriteGGUF(filepath.Join(dir, "imatrix.gguf"), m) })
	plain := quantize(nil)
	if !bytes.Equal(ours, theirs) {
		t.Error("llama-quantize output with our imatrix GGUF differs from that with llama-imatrix's")
	}
	if bytes.Equal(ours, plain) {
		t.Error("llama-quantize output does not depend on the imatrix")
	}
}
