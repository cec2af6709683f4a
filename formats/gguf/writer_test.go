package gguf

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestRoundTrip writes every value type (scalars, arrays, empty arrays and strings, nested
// arrays) and tensors of several types, reads the file back and compares.
func TestRoundTrip(t *testing.T) {
	h := goldenHeader()
	h.KVs = append(h.KVs,
		KV{"test.float32.nan", float32(math.Inf(-1))},
		KV{"test.arr.empty_float64", []float64{}},
		KV{"test.arr.empty_nested", []any{}},
		KV{"test.arr.deep", []any{[]any{[]any{[]uint16{7}}}}},
	)
	path := filepath.Join(t.TempDir(), "rt.gguf")
	if err := WriteFile(path, h, goldenData); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	want := slices.Clone(h.KVs)
	slices.SortFunc(want, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	if !reflect.DeepEqual(f.KVs, want) {
		t.Errorf("metadata differ:\n got %#v\nwant %#v", f.KVs, want)
	}
	for i, w := range h.Tensors {
		g := f.Tensors[i]
		if g.Name != w.Name || g.Type != w.Type || !reflect.DeepEqual(g.Shape, w.Shape) ||
			g.Offset != w.Offset || g.Size != w.Size {
			t.Errorf("tensor %d: got %+v, want %+v", i, g, w)
		}
		d, _ := goldenData(i)
		if !bytes.Equal(f.TensorData(i), d) {
			t.Errorf("%s: data differ", w.Name)
		}
	}
	// Sizes are computed from the block tables, offsets padded to 32.
	if h.Tensors[0].Size != 102 || h.Tensors[1].Offset != 128 || h.Tensors[1].Size != 20 ||
		h.Tensors[2].Offset != 160 || h.Tensors[2].Size != 144 {
		t.Errorf("layout %+v", h.Tensors)
	}
	if st, _ := os.Stat(path); uint64(st.Size()) != f.DataOffset+160+160 {
		t.Errorf("file size %d, want data offset %d + 320 (last tensor padded)", st.Size(), f.DataOffset)
	}
	if s, err := f.String("general.architecture"); err != nil || s != "llama" {
		t.Errorf("String: %q, %v", s, err)
	}
	if toks, err := f.Strings("tokenizer.ggml.tokens"); err != nil || len(toks) != 3 || toks[1] != "" {
		t.Errorf("Strings: %q, %v", toks, err)
	}
}

// TestGetters checks the typed getters' values and errors.
func TestGetters(t *testing.T) {
	f, err := Open("testdata/gguf-py.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, err := f.Uint32("llama.context_length"); err != nil || v != 128 {
		t.Errorf("Uint32: %d, %v", v, err)
	}
	if v, err := f.Float32("llama.attention.layer_norm_rms_epsilon"); err != nil || v != 1e-5 {
		t.Errorf("Float32: %g, %v", v, err)
	}
	_, err = f.Uint32("test.int32")
	if err == nil || err.Error() != "testdata/gguf-py.gguf: test.int32: has type INT32, want UINT32" {
		t.Errorf("wrong-type error: %v", err)
	}
	_, err = f.Float32s("tokenizer.ggml.token_type")
	if err == nil || !strings.HasSuffix(err.Error(), "has type ARRAY[INT32], want ARRAY[FLOAT32]") {
		t.Errorf("wrong-array-type error: %v", err)
	}
	_, err = f.String("no.such.key")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no.such.key") {
		t.Errorf("missing-key error: %v", err)
	}
	if v, err := f.Bool("test.bool_true"); err != nil || !v {
		t.Errorf("Bool: %v, %v", v, err)
	}
	if v, err := f.Uint64("test.uint64"); err != nil || v != math.MaxUint64 {
		t.Errorf("Uint64: %v, %v", v, err)
	}
	if v, err := f.Float64("test.float64"); err != nil || v != 3.141592653589793 {
		t.Errorf("Float64: %v, %v", v, err)
	}
	if v, err := f.Int32s("tokenizer.ggml.token_type"); err != nil || !slices.Equal(v, []int32{2, 3, 3, 1}) {
		t.Errorf("Int32s: %v, %v", v, err)
	}
	if v, err := f.Uint32s("test.arr.uint32"); err != nil || !slices.Equal(v, []uint32{0, 4294967295}) {
		t.Errorf("Uint32s: %v, %v", v, err)
	}
	if f.Size() != 2368 {
		t.Errorf("Size %d", f.Size())
	}
	if v, err := Lookup[[]any](f, "test.arr.nested"); err != nil || len(v) != 2 {
		t.Errorf("Lookup nested: %v, %v", v, err)
	}
}

// TestWriterDeterministic: the same header gives the same bytes whatever the KV order.
func TestWriterDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b := goldenHeader(), goldenHeader()
	slices.Reverse(b.KVs)
	pa, pb := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	if err := WriteFile(pa, a, goldenData); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(pb, b, goldenData); err != nil {
		t.Fatal(err)
	}
	da, _ := os.ReadFile(pa)
	db, _ := os.ReadFile(pb)
	if !bytes.Equal(da, db) {
		t.Error("KV order changed the output")
	}
}

// TestWriterConcurrent writes many tensors from several goroutines in reverse order.
func TestWriterConcurrent(t *testing.T) {
	h := &Header{KVs: []KV{{"general.architecture", "test"}}, Alignment: 64}
	for i := range 64 {
		h.Tensors = append(h.Tensors, TensorInfo{Name: "t" + string(rune('A'+i%26)) + string(rune('a'+i/26)), Type: F32, Shape: []uint64{uint64(i + 1)}})
	}
	path := filepath.Join(t.TempDir(), "c.gguf")
	w, err := Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	data := func(i int) []byte {
		b := make([]byte, 4*(i+1))
		for j := range b {
			b[j] = byte(i)
		}
		return b
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(h.Tensors))
	for i := len(h.Tensors) - 1; i >= 0; i-- {
		wg.Go(func() {
			if err := w.WriteTensor(i, data(i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Alignment != 64 {
		t.Errorf("alignment %d", f.Alignment)
	}
	if v, err := f.Uint32(KeyAlignment); err != nil || v != 64 {
		t.Errorf("general.alignment %d, %v", v, err)
	}
	for i := range h.Tensors {
		if !bytes.Equal(f.TensorData(i), data(i)) {
			t.Errorf("tensor %d differs", i)
		}
	}
	assertNoTemp(t, filepath.Dir(path), 1)
}

// assertNoTemp checks that a directory holds only want entries and no temporary file.
func assertNoTemp(t *testing.T, dir string, want int) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if len(ents) != want {
		t.Errorf("%d entries in %s, want %d", len(ents), dir, want)
	}
}

// TestWriterErrors checks misuse of a Writer and that nothing is left behind.
func TestWriterErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "e.gguf")
	w, err := Create(path, goldenHeader())
	if err != nil {
		t.Fatal(err)
	}
	check := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %v, want one line containing %q", err, want)
		}
	}
	check(w.WriteTensor(0, make([]byte, 101)), path+": token_embd.weight: got 101 bytes of data, want 102")
	check(w.WriteTensor(3, nil), "tensor index 3 out of range")
	d, _ := goldenData(1)
	if err := w.WriteTensor(1, d); err != nil {
		t.Fatal(err)
	}
	check(w.WriteTensor(1, d), "output_norm.weight: written twice")
	check(w.Commit(), path+": token_embd.weight: not written; blk.0.attn_q.weight: not written")
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	check(w.WriteTensor(0, nil), "write after Commit or Abort")
	if err := w.Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	assertNoTemp(t, dir, 0)

	// A data callback error names the file and tensor; nothing is left.
	err = WriteFile(path, goldenHeader(), func(i int) ([]byte, error) {
		if i == 2 {
			return nil, os.ErrInvalid
		}
		return goldenData(i)
	})
	check(err, path+": blk.0.attn_q.weight: invalid argument")
	assertNoTemp(t, dir, 0)
}

// TestLayoutErrors lists header problems, all in one line.
func TestLayoutErrors(t *testing.T) {
	long := strings.Repeat("x", 64)
	h := &Header{
		KVs: []KV{
			{"a", 1}, // Go int: the writer must be told the GGUF type
			{"b", uint32(1)},
			{"b", uint32(2)},
			{"", "x"},
			{"c", []any{int32(1)}},
			{KeyAlignment, int32(32)},
		},
		Tensors: []TensorInfo{
			{Name: long, Type: F32, Shape: []uint64{1}},
			{Name: "dup", Type: F32, Shape: []uint64{1}},
			{Name: "dup", Type: F32, Shape: []uint64{1}},
			{Name: "q4", Type: Q4_K, Shape: []uint64{100, 2}},
			{Name: "unknown", Type: Type(99), Shape: []uint64{1}},
			{Name: "5d", Type: F32, Shape: []uint64{1, 1, 1, 1, 1}},
			{Name: "0d", Type: F32},
			{Name: "", Type: F32, Shape: []uint64{1}},
		},
	}
	err := h.Layout()
	want := []string{
		"general.alignment: has type INT32, want UINT32",
		"a: unsupported value of Go type int",
		"b: duplicate key",
		"key #3: empty key",
		"c: element 0 of a nested array is INT32, not an array",
		long + ": name of 64 bytes is longer than 63",
		"dup: duplicate tensor name",
		"q4: row length 100 is not a multiple of the Q4_K block size 256",
		"unknown: unknown tensor type 99",
	}
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q", w)
		}
	}
	if !strings.Contains(err.Error(), "; and 2 more problems") {
		t.Errorf("error not capped: %v", err)
	}
	// Create reports the same problems, prefixed by the path, and creates nothing.
	dir := t.TempDir()
	if _, err := Create(filepath.Join(dir, "x.gguf"), h); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, "x.gguf")+": ") {
		t.Errorf("Create: %v", err)
	}
	assertNoTemp(t, dir, 0)

	for _, c := range []struct {
		h    Header
		want string
	}{
		{Header{Alignment: 48}, "Header.Alignment 48 is not a power of two"},
		{Header{KVs: []KV{{KeyAlignment, uint32(0)}}}, "alignment 0 is not a power of two"},
		{Header{KVs: []KV{{KeyAlignment, uint32(64)}}, Alignment: 32}, "is 64 but Header.Alignment is 32"},
	} {
		if err := c.h.Layout(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Layout: %v, want %q", err, c.want)
		}
	}
	h2 := &Header{KVs: []KV{{KeyAlignment, uint32(128)}}}
	if err := h2.Layout(); err != nil || h2.Alignment != 128 {
		t.Errorf("alignment from KV: %d, %v", h2.Alignment, err)
	}
}
