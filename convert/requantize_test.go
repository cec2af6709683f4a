package convert

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/safetensors"
)

// TestRequantizeGGUF: a GGUF of the model's weights (BF16, F32, and BF16 split in parts),
// requantized, gives the same bytes as converting the HF folder: tensors, metadata, the
// quantize.imatrix.* keys with an importance matrix; as llama-quantize takes a GGUF.
func TestRequantizeGGUF(t *testing.T) {
	for _, c := range []struct{ dir, imatrix string }{
		{"../testdata/models/stories260k", "../formats/imatrix/testdata/stories260k.imatrix.gguf"},
		{"../testdata/models/stories3m", "../testdata/llamacpp/stories3m.imatrix.gguf"},
	} {
		tmp := t.TempDir()
		conv := func(src, out string, o Options) []byte {
			t.Helper()
			o.Threads = 2
			if _, err := Convert(src, out, o); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		bf16 := filepath.Join(tmp, "bf16.gguf")
		conv(c.dir, bf16, Options{Scheme: "bf16"})
		f32 := filepath.Join(tmp, "f32.gguf")
		conv(c.dir, f32, Options{Scheme: "f32"})
		split := filepath.Join(tmp, "split.gguf")
		if _, err := Convert(c.dir, split, Options{Scheme: "bf16", SplitMaxSize: 1 << 17, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		ents, _ := filepath.Glob(filepath.Join(tmp, "split-*.gguf"))
		if len(ents) < 2 {
			t.Fatalf("split into %d parts", len(ents))
		}
		first := ents[0]
		for _, o := range []Options{{Scheme: "q8_0"}, {Scheme: "q4_k_m"}, {Scheme: "q6_k", Stats: c.imatrix}, {Scheme: "q4_k_m", Stats: c.imatrix, Name: "renamed"}} {
			want := conv(c.dir, filepath.Join(tmp, "hf.gguf"), o)
			for _, src := range []string{bf16, f32, first} {
				got := conv(src, filepath.Join(tmp, "re.gguf"), o)
				if !bytes.Equal(got, want) {
					t.Errorf("%s %s stats=%q: requantizing %s gives other bytes than the HF folder", filepath.Base(c.dir), o.Scheme, o.Stats, filepath.Base(src))
				}
				os.Remove(filepath.Join(tmp, "re.gguf"))
			}
			os.Remove(filepath.Join(tmp, "hf.gguf"))
		}
		// A quantized GGUF is refused, naming its tensors; gqf output is refused.
		q := filepath.Join(tmp, "q8.gguf")
		conv(c.dir, q, Options{Scheme: "q8_0"})
		if _, err := Convert(q, filepath.Join(tmp, "x.gguf"), Options{Scheme: "q4_0"}); err == nil || !strings.Contains(err.Error(), "are not F32, F16 or BF16: blk.0.attn_k.weight (Q8_0)") {
			t.Errorf("quantized source: %v", err)
		}
		if _, err := MakePlanWith(mustOpen(t, bf16), "gqf", "w4a16", nil); err == nil || !strings.Contains(err.Error(), "a GGUF file converts to GGUF only") {
			t.Errorf("gqf from GGUF: %v", err)
		}
	}
}

func mustOpen(t *testing.T, path string) *Inventory {
	t.Helper()
	inv, err := Open(path, InventoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inv.Close() })
	return inv
}

// TestKVOverride: llama-quantize's --override-kv syntax and semantics (an int is written as
// uint32 |N|; a key is set in place or appended), and its errors.
func TestKVOverride(t *testing.T) {
	for in, want := range map[string]any{"a=int:-7": uint32(7), "a=float:0.25": float32(0.25), "a=bool:false": false, "a=str:x:y": "x:y"} {
		o, err := ParseKVOverride(in)
		if err != nil || o.Key != "a" || o.Value != want {
			t.Errorf("%s: %+v %v, want %v", in, o, err, want)
		}
	}
	for _, in := range []string{"a", "=int:1", "a=1", "a=int:x", "a=bool:yes", "a=char:c", "a=str:" + strings.Repeat("x", 128), strings.Repeat("k", 128) + "=int:1", "a=int:99999999999"} {
		if _, err := ParseKVOverride(in); err == nil {
			t.Errorf("%.40s: accepted", in)
		}
	}
	kvs := []gguf.KV{{Key: "general.name", Value: "m"}, {Key: "x", Value: int32(1)}}
	kvs = applyOverrides(kvs, []KVOverride{{"x", uint32(3)}, {"new", "v"}}, "", nil)
	if len(kvs) != 3 || kvs[1].Value != uint32(3) || kvs[2].Key != "new" {
		t.Errorf("overrides: %v", kvs)
	}
}

// TestSizeLabel: gguf-py's model_weight_count_rounded_notation, min_digits 2, for the values
// convert_hf_to_gguf.py prints (worked by hand from its code).
func TestSizeLabel(t *testing.T) {
	for n, want := range map[uint64]string{260_000: "260K", 999: "1.0K", 3_410_000: "3.4M", 15_000_000: "15M",
		596_049_920: "596M", 8_030_261_248: "8.0B", 70_553_706_496: "71B", 1_500_000_000_000: "1.5T", 2_500_000: "2.5M"} {
		if got := SizeLabel(n); got != want {
			t.Errorf("SizeLabel(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestMoEPlan: a Qwen3-MoE checkpoint's plan stacks each layer's experts into llama.cpp's 3-D
// tensors from the per-expert HF tensors, keeps the router F32, and labels the size as
// gguf-py does for experts: tiny-qwen3moe holds 1,054,464 parameters outside the stacks
// (embedding and lm_head 2 × 131,072, per layer q 131,072, k and v 65,536, o 131,072, router
// 2,048 and norms 768; output_norm 256) and 65,536 per expert of each of its 6 stacks, so
// "8x" + 1,447,680 rounded, "8x1.4M".
func TestMoEPlan(t *testing.T) {
	spec, err := synth.Preset("tiny-qwen3moe")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Generate(dir, spec, synth.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := Convert(dir, "", Options{Scheme: "q4_k_m", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]PlannedTensor{}
	for _, pt := range p.Tensors {
		byName[pt.Name] = pt
	}
	up, router := byName["blk.1.ffn_up_exps.weight"], byName["blk.1.ffn_gate_inp.weight"]
	if up.Source != "model.layers.1.mlp.experts.{0..7}.up_proj.weight" || !slices.Equal(up.Shape, []uint64{256, 256, 8}) || up.Type != "Q4_K" {
		t.Errorf("up stack: %+v", up)
	}
	if router.Type != "F32" || !slices.Equal(router.Shape, []uint64{256, 8}) {
		t.Errorf("router: %+v", router)
	}
	if got := p.sizeLabel(); got != "8x1.4M" {
		t.Errorf("size label %q, want 8x1.4M", got)
	}
}

// TestMoEUnmappedTensor: a tensor the family does not have (a Qwen2-MoE-style shared expert
// beside Qwen3-MoE's experts) stays an error naming it.
func TestMoEUnmappedTensor(t *testing.T) {
	spec, err := synth.Preset("tiny-qwen3moe")
	if err != nil {
		t.Fatal(err)
	}
	spec.Layers = 1
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Generate(dir, spec, synth.Options{Seed: 1, ShardSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, safetensors.IndexName)
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	var idx map[string]any
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	const extra = "model.layers.0.mlp.shared_expert.up_proj.weight"
	zero := func(w io.Writer) error { _, err := w.Write(make([]byte, 2*256*256)); return err }
	if err := safetensors.WriteFile(filepath.Join(dir, "extra.safetensors"), []safetensors.NamedTensor{
		{Name: extra, DType: safetensors.BF16, Shape: []int{256, 256}, Source: zero}}, nil); err != nil {
		t.Fatal(err)
	}
	wm := idx["weight_map"].(map[string]any)
	wm[extra] = "extra.safetensors"
	b, _ = json.Marshal(idx)
	if err := os.WriteFile(index, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Convert(dir, "", Options{Scheme: "q4_k_m", DryRun: true})
	if err == nil || !strings.HasSuffix(err.Error(), "1 unmapped tensors for Qwen3MoeForCausalLM: "+extra) {
		t.Errorf("conversion: %v", err)
	}
}
