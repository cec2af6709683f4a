package arch

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func loadConfig(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSpecFromStories260k(t *testing.T) {
	cfg := loadConfig(t, "../../testdata/models/stories260k/config.json")
	f, err := ForHF("LlamaForCausalLM")
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.SpecFromHF(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Hidden != 64 || s.Intermediate != 172 || s.Layers != 5 || s.Heads != 8 || s.KVHeads != 4 ||
		s.HeadDim != 8 || s.Vocab != 512 || !s.Tied || s.RMSEps != 1e-5 || s.RopeTheta != 10000 {
		t.Fatalf("spec %+v", s)
	}
	ts := f.Tensors(s)
	// 2 global + 9 per layer + output_norm; no output (tied)
	if len(ts) != 1+5*9+1 {
		t.Fatalf("%d tensors", len(ts))
	}
	if ts[1].HFName != "model.layers.0.input_layernorm.weight" || ts[2].Transform != PermuteQ || ts[3].Transform != PermuteK {
		t.Fatalf("layer 0 order: %+v %+v %+v", ts[1], ts[2], ts[3])
	}
}

func TestSpecErrorsNameKeys(t *testing.T) {
	f, _ := ForHF("Qwen3ForCausalLM")
	_, err := f.SpecFromHF(map[string]any{"hidden_size": 64.0})
	if err == nil {
		t.Fatal("accepted a config without dimensions")
	}
	for _, key := range []string{"intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
	if _, err := ForHF("GPTNeoXForCausalLM"); err == nil || !strings.Contains(err.Error(), "GPTNeoXForCausalLM") {
		t.Errorf("unknown architecture: %v", err)
	}
}

// The permutation must equal transformers' permute inverse as written in convert_hf_to_gguf.py:
// w.reshape(n_head, 2, hd/2, in).swapaxes(1, 2).reshape(out, in), computed here by index
// arithmetic on a reshaped array, independently of SourceRow's formula.
func TestPermuteMatchesReshapeSwapaxes(t *testing.T) {
	s := &Spec{HeadDim: 8}
	nHead := 3
	// reshape to [n_head][2][hd/2], swapaxes(1,2) -> [n_head][hd/2][2]; element (h, j, p) of the
	// result is element (h, p, j) of the source, and lands at flat row h*hd + j*2 + p.
	for h := 0; h < nHead; h++ {
		for j := 0; j < s.HeadDim/2; j++ {
			for p := 0; p < 2; p++ {
				dst := h*s.HeadDim + j*2 + p
				src := h*s.HeadDim + p*(s.HeadDim/2) + j
				if got := SourceRow(PermuteQ, s, dst); got != src {
					t.Fatalf("SourceRow(%d) = %d, want %d", dst, got, src)
				}
				if got := DestRow(PermuteQ, s, src); got != dst {
					t.Fatalf("DestRow(%d) = %d, want %d", src, got, dst)
				}
			}
		}
	}
}

// MaskFor keeps −50 while the scores' spread allows and otherwise puts every masked score 20
// below every visible one.
func TestMaskFor(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   float32
	}{{-12.5, 15.8, MaskValue}, {-10, 20, MaskValue}, {-316.5, 133.8, -471}, {-1, 100, -121}} {
		if got := MaskFor(c.lo, c.hi); got != c.want {
			t.Errorf("MaskFor(%g, %g) = %g, want %g", c.lo, c.hi, got, c.want)
		}
		if m := float64(MaskFor(c.lo, c.hi)); c.hi+m > c.lo-maskMargin+1e-9 {
			t.Errorf("[%g, %g]: a masked score %g is not %d below the lowest visible %g", c.lo, c.hi, c.hi+m, maskMargin, c.lo)
		}
	}
}
