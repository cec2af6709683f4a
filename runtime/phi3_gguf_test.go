package runtime_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/convert"
	"github.com/gquant/gquant/formats/gguf"
	. "github.com/gquant/gquant/runtime"
)

// fuseQKV rewrites a Phi-3 GGUF with attn_q, attn_k and attn_v as convert_hf_to_gguf.py lays
// it out: one attn_qkv per layer, q rows, then k, then v.
func fuseQKV(t *testing.T, in, out string) {
	t.Helper()
	f, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := &gguf.Header{KVs: slices.Clone(f.KVs)}
	var data [][]byte
	idx := map[string]int{}
	for i, ti := range f.Tensors {
		idx[ti.Name] = i
	}
	for i, ti := range f.Tensors {
		switch {
		case strings.HasSuffix(ti.Name, ".attn_k.weight"), strings.HasSuffix(ti.Name, ".attn_v.weight"):
			continue
		case strings.HasSuffix(ti.Name, ".attn_q.weight"):
			p := strings.TrimSuffix(ti.Name, "attn_q.weight")
			k, v := f.Tensors[idx[p+"attn_k.weight"]], f.Tensors[idx[p+"attn_v.weight"]]
			rows := ti.Shape[1] + k.Shape[1] + v.Shape[1]
			h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: p + "attn_qkv.weight", Type: ti.Type, Shape: []uint64{ti.Shape[0], rows}})
			data = append(data, slices.Concat(f.TensorData(i), f.TensorData(idx[p+"attn_k.weight"]), f.TensorData(idx[p+"attn_v.weight"])))
		default:
			h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: ti.Name, Type: ti.Type, Shape: ti.Shape})
			data = append(data, f.TensorData(i))
		}
	}
	w, err := gguf.Create(out, h)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range data {
		if err := w.WriteTensorPart(i, 0, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestPhi3FusedQKVGGUF: a Phi-3 GGUF with llama.cpp's fused attn_qkv (as convert_hf_to_gguf.py
// writes it) runs with exactly the logits of gquant's attn_q/k/v file of the same weights
// (f16 and q8_0: the rows of a quantized matrix are whole blocks), and is refused by name for
// requantization.
func TestPhi3FusedQKVGGUF(t *testing.T) {
	dir := presetFolder(t, "tiny-phi3", 5)
	ids := synthIDs(24)
	for _, scheme := range []string{"f16", "q8_0"} {
		split := convertGGUF(t, dir, scheme)
		fused := filepath.Join(t.TempDir(), "fused.gguf")
		fuseQKV(t, split, fused)
		var logits [2][]float32
		for i, path := range []string{split, fused} {
			m := loadModel(t, path, Options{Threads: 1})
			var err error
			if logits[i], err = m.Eval(m.NewState(0), ids, true); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(logits[0], logits[1]) {
			t.Errorf("%s: the fused attn_qkv file's logits differ from the split file's", scheme)
		}
		_, err := convert.Convert(fused, filepath.Join(t.TempDir(), "re.gguf"), convert.Options{Scheme: "q4_0", DryRun: true})
		if want := "blk.0.attn_qkv.weight: a phi3 GGUF with fused q, k and v is not requantized"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("requantizing the fused file: %v, want %q", err, want)
		}
	}
}
