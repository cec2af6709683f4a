package convert

import (
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/runtime/arch"
)

// stories3mSpec has the shape of testdata/models/stories3m (4 layers, untied).
func stories3mSpec() *arch.Spec {
	return &arch.Spec{Family: "llama", GGUFArch: "llama", Hidden: 256, Intermediate: 768, Layers: 4,
		Heads: 8, KVHeads: 4, HeadDim: 32, Vocab: 512, Context: 256, RMSEps: 1e-5, RopeTheta: 10000}
}

// typesFor runs the policy over every tensor of a spec, in file order.
func typesFor(t *testing.T, spec *arch.Spec, scheme string, imatrix bool) map[string]Choice {
	t.Helper()
	p, err := PresetByName(scheme)
	if err != nil {
		t.Fatal(err)
	}
	tensors := arch.Families()[0].Tensors(spec)
	st := &policyState{preset: p, spec: spec, tied: spec.Tied, hasImatrix: imatrix}
	for _, x := range tensors {
		if x.Ref.Role == arch.AttnV {
			st.nAttnV++
		}
	}
	out := map[string]Choice{}
	for _, x := range tensors {
		var shape []uint64
		for i := len(x.Shape) - 1; i >= 0; i-- {
			shape = append(shape, uint64(x.Shape[i]))
		}
		out[x.Ref.GGUFName()] = st.choose(x.Ref, shape)
	}
	return out
}

// The expected mixes are the types llama-quantize (llama.cpp 34af94cd) wrote for stories3m,
// as listed in ../shared/reference/baselines.md ("Q6_K for attn_v, ffn_down of layers 2–3").
func TestPolicyMatchesLlamaQuantizeOnStories3m(t *testing.T) {
	spec := stories3mSpec()
	cases := []struct {
		scheme          string
		base, embd, out gguf.Type
		attnV, ffnDown  [4]gguf.Type
		attnQ           gguf.Type
	}{
		{"q4_k_m", gguf.Q4_K, gguf.Q4_K, gguf.Q6_K,
			[4]gguf.Type{gguf.Q4_K, gguf.Q4_K, gguf.Q6_K, gguf.Q6_K}, [4]gguf.Type{gguf.Q4_K, gguf.Q4_K, gguf.Q6_K, gguf.Q6_K}, gguf.Q4_K},
		{"q5_k_m", gguf.Q5_K, gguf.Q5_K, gguf.Q6_K,
			[4]gguf.Type{gguf.Q5_K, gguf.Q5_K, gguf.Q6_K, gguf.Q6_K}, [4]gguf.Type{gguf.Q5_K, gguf.Q5_K, gguf.Q6_K, gguf.Q6_K}, gguf.Q5_K},
		{"q4_k_s", gguf.Q4_K, gguf.Q4_K, gguf.Q6_K,
			[4]gguf.Type{gguf.Q5_K, gguf.Q5_K, gguf.Q5_K, gguf.Q5_K}, [4]gguf.Type{gguf.Q4_K, gguf.Q4_K, gguf.Q4_K, gguf.Q4_K}, gguf.Q4_K},
		{"q4_0", gguf.Q4_0, gguf.Q4_0, gguf.Q6_K,
			[4]gguf.Type{gguf.Q4_0, gguf.Q4_0, gguf.Q4_0, gguf.Q4_0}, [4]gguf.Type{gguf.Q4_0, gguf.Q4_0, gguf.Q4_0, gguf.Q4_0}, gguf.Q4_0},
		{"q8_0", gguf.Q8_0, gguf.Q8_0, gguf.Q8_0,
			[4]gguf.Type{gguf.Q8_0, gguf.Q8_0, gguf.Q8_0, gguf.Q8_0}, [4]gguf.Type{gguf.Q8_0, gguf.Q8_0, gguf.Q8_0, gguf.Q8_0}, gguf.Q8_0},
		{"q6_k", gguf.Q6_K, gguf.Q6_K, gguf.Q6_K,
			[4]gguf.Type{gguf.Q6_K, gguf.Q6_K, gguf.Q6_K, gguf.Q6_K}, [4]gguf.Type{gguf.Q6_K, gguf.Q6_K, gguf.Q6_K, gguf.Q6_K}, gguf.Q6_K},
	}
	for _, c := range cases {
		got := typesFor(t, spec, c.scheme, false)
		check := func(name string, want gguf.Type) {
			if g := got[name].Type; g != want {
				t.Errorf("%s: %s: got %s, want %s (%s)", c.scheme, name, g, want, got[name].Reason)
			}
		}
		check("token_embd.weight", c.embd)
		check("output.weight", c.out)
		check("output_norm.weight", gguf.F32)
		for l := 0; l < 4; l++ {
			check(arch.TensorRef{Role: arch.AttnV, Layer: l}.GGUFName(), c.attnV[l])
			check(arch.TensorRef{Role: arch.FFNDown, Layer: l}.GGUFName(), c.ffnDown[l])
			check(arch.TensorRef{Role: arch.AttnQ, Layer: l}.GGUFName(), c.attnQ)
			check(arch.TensorRef{Role: arch.AttnNorm, Layer: l}.GGUFName(), gguf.F32)
		}
	}
}

// stories260k: no row length is a multiple of 256 and ffn_down's (172) not even of 32. The
// baselines.md notes say llama-quantize aborts on ffn_down for Q4_0/Q8_0 (gquant: F16) and that
// Q4_K_M falls back to Q5_0 / Q8_0 / F16.
func TestPolicyFallbacksOnStories260k(t *testing.T) {
	spec := &arch.Spec{Family: "llama", GGUFArch: "llama", Hidden: 64, Intermediate: 172, Layers: 5,
		Heads: 8, KVHeads: 4, HeadDim: 8, Vocab: 512, Context: 512, RMSEps: 1e-5, RopeTheta: 10000, Tied: true}
	q40 := typesFor(t, spec, "q4_0", false)
	if c := q40["blk.0.ffn_down.weight"]; c.Type != gguf.F16 || c.Fallback == "" {
		t.Errorf("q4_0 ffn_down: %+v, want F16 with a fallback note", c)
	}
	// tied token_embd gets the output rule: Q6_K, which falls back to Q8_0 (64 % 256 != 0)
	if c := q40["token_embd.weight"]; c.Type != gguf.Q8_0 {
		t.Errorf("q4_0 tied token_embd: %+v, want Q8_0", c)
	}
	km := typesFor(t, spec, "q4_k_m", false)
	want := map[string]gguf.Type{
		"token_embd.weight":      gguf.Q8_0, // output rule: 64 % 256 → Q8_0 directly
		"blk.0.attn_q.weight":    gguf.Q5_0, // Q4_K → Q5_0
		"blk.2.attn_v.weight":    gguf.Q8_0, // use_more_bits(2, 5) → Q6_K → Q8_0
		"blk.4.attn_v.weight":    gguf.Q8_0, // use_more_bits(4, 5): i ≥ 7n/8
		"blk.0.attn_v.weight":    gguf.Q5_0,
		"blk.2.ffn_down.weight":  gguf.F16, // Q6_K → Q8_0 → 172 % 32 → F16
		"blk.1.ffn_down.weight":  gguf.F16, // Q4_K → Q5_0 → F16
		"blk.0.ffn_gate.weight":  gguf.Q5_0,
		"blk.0.attn_norm.weight": gguf.F32,
	}
	for name, w := range want {
		if g := km[name]; g.Type != w {
			t.Errorf("q4_k_m %s: got %s (%s; %s), want %s", name, g.Type, g.Reason, g.Fallback, w)
		}
	}
}

func TestPolicyOverridesWin(t *testing.T) {
	spec := stories3mSpec()
	p, _ := PresetByName("q4_k_m")
	ov, err := ParseOverride(`attn_q=q8_0`)
	if err != nil {
		t.Fatal(err)
	}
	st := &policyState{preset: p, spec: spec, overrides: []Override{ov}}
	c := st.choose(arch.TensorRef{Role: arch.AttnQ, Layer: 0}, []uint64{256, 256})
	if c.Type != gguf.Q8_0 {
		t.Fatalf("override: got %s", c.Type)
	}
	if _, err := ParseOverride("noequals"); err == nil {
		t.Fatal("ParseOverride accepted a rule without =")
	}
	if _, err := ParseOverride("x=q9_9"); err == nil {
		t.Fatal("ParseOverride accepted an unknown type")
	}
}
