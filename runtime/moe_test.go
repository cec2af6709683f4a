package runtime_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf/synth"
	. "github.com/gquant/gquant/runtime"
)

// TestMoEDecodeReadsRoutedExperts: decoding tiny-qwen3moe (q4_k_m), every token reads the
// dense weights and the matrices of its 2 experts of 8 in each layer, and no other expert's:
// State.BytesRead grows per token by exactly what the file's tensors say (each stack's bytes
// × 2/8, every other matrix whole, the vectors as float32, one embedding row), well below the
// model's weights; a prefill reads each expert some token is routed to once.
func TestMoEDecodeReadsRoutedExperts(t *testing.T) {
	spec, err := synth.Preset("tiny-qwen3moe")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny-qwen3moe")
	if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	path := convertGGUF(t, dir, "q4_k_m")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var perToken, all, experts int64
	for i, ti := range f.Tensors {
		n := int64(len(f.TensorData(i)))
		switch {
		case strings.Contains(ti.Name, "_exps."):
			perToken += n / int64(spec.Experts) * int64(spec.ExpertsUsed)
			experts += n
			all += n
		case ti.Name == "token_embd.weight":
			perToken += n / int64(ti.Shape[1])
			all += n
		case len(ti.Shape) == 1:
			perToken += 4 * int64(ti.Shape[0])
			all += 4 * int64(ti.Shape[0])
		default:
			perToken += n
			all += n
		}
	}
	f.Close()
	m := loadModel(t, path, Options{Threads: 2})
	if m.WeightBytes() != perToken || m.Bytes() != all {
		t.Errorf("WeightBytes %d, Bytes %d; the file says %d and %d", m.WeightBytes(), m.Bytes(), perToken, all)
	}
	ids := synthIDs(24)
	st := m.NewState(len(ids))
	for i, id := range ids {
		before := st.BytesRead()
		if _, err := m.Eval(st, []int{id}, false); err != nil {
			t.Fatal(err)
		}
		if got := st.BytesRead() - before; got != perToken {
			t.Fatalf("token %d read %d weight bytes, want %d (2 of 8 experts a layer)", i, got, perToken)
		}
	}
	t.Logf("decode: %d bytes a token of %d (experts %d)", perToken, all, experts)
	if 2*perToken > all {
		t.Errorf("a token reads %d of %d weight bytes", perToken, all)
	}
	st.Reset()
	before := st.BytesRead()
	if _, err := m.Eval(st, ids, false); err != nil {
		t.Fatal(err)
	}
	dense := perToken - experts/int64(spec.Experts)*int64(spec.ExpertsUsed)
	if got := st.BytesRead() - before; got <= perToken || got > dense+experts {
		t.Errorf("a prefill of %d tokens read %d bytes (a token %d, the dense weights and every expert %d)", len(ids), got, perToken, dense+experts)
	}
}
