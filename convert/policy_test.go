package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/internal/problems"
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

// The low-bit mixes on stories260k, as llama-quantize 34af94cd wrote them (its warnings:
// "ncols 64 not divisible by 256 (required for type q3_K) -> falling back to q4_0", "ncols 172
// not divisible by 256 (required for type q4_K) (WARNING: must use F16 due to unusual shape)
// -> falling back to f16"): K types fall back to Q4_0/Q5_0/Q5_1, IQ4_XS to IQ4_NL, and
// ffn_down (172 % 32 != 0) to F16; none of these aborts.
func TestPolicyLowBitFallbacksOnStories260k(t *testing.T) {
	spec := &arch.Spec{Family: "llama", GGUFArch: "llama", Hidden: 64, Intermediate: 172, Layers: 5,
		Heads: 8, KVHeads: 4, HeadDim: 8, Vocab: 512, Context: 512, RMSEps: 1e-5, RopeTheta: 10000, Tied: true}
	want := map[string]map[string]gguf.Type{
		"q2_k": {"token_embd.weight": gguf.Q8_0, "blk.0.attn_q.weight": gguf.Q4_0, "blk.0.attn_v.weight": gguf.Q4_0,
			"blk.0.attn_output.weight": gguf.Q4_0, "blk.0.ffn_down.weight": gguf.F16},
		"q3_k_m": {"blk.0.attn_q.weight": gguf.Q4_0, "blk.0.attn_v.weight": gguf.Q5_1, "blk.2.attn_v.weight": gguf.Q5_0,
			"blk.0.attn_output.weight": gguf.Q5_0, "blk.0.ffn_down.weight": gguf.F16},
		"q3_k_l": {"blk.3.attn_v.weight": gguf.Q5_1, "blk.0.attn_output.weight": gguf.Q5_1, "blk.4.ffn_down.weight": gguf.F16},
		"iq4_xs": {"token_embd.weight": gguf.Q8_0, "blk.0.attn_k.weight": gguf.IQ4_NL, "blk.0.ffn_down.weight": gguf.F16},
	}
	for scheme, w := range want {
		got := typesFor(t, spec, scheme, false)
		for name, typ := range w {
			if g := got[name]; g.Type != typ || (typ != gguf.Q8_0 && g.Fallback == "") {
				t.Errorf("%s %s: got %s (%s; %s), want %s after a fallback", scheme, name, g.Type, g.Reason, g.Fallback, typ)
			}
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

// The low-bit K-quant mixes (q2_k, q2_k_s, q3_k_*, iq4_xs) on a Llama-3-8B-shaped spec (32
// layers, GQA 4), where every branch of llama-quant.cpp's llama_tensor_get_type_impl that
// these ftypes have is taken: attn_v (GQA ≥ 4; Q3_K_M's first two), attn_output, ffn_down
// (n/8, n/16) and IQ4_XS's imatrix-dependent ffn_down rule. The types were read off
// llama-quant.cpp at 34af94cd; the byte-identity tests check stories260k and stories3m.
func TestPolicyLowBitMixes(t *testing.T) {
	spec := &arch.Spec{Family: "llama", GGUFArch: "llama", Hidden: 4096, Intermediate: 14336, Layers: 32,
		Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 1024, Context: 256, RMSEps: 1e-5, RopeTheta: 500000}
	type mix struct {
		base, embd, out, attnOut gguf.Type
		attnV, ffnDown           func(l int) gguf.Type
	}
	all := func(x gguf.Type) func(int) gguf.Type { return func(int) gguf.Type { return x } }
	first := func(n int, a, b gguf.Type) func(int) gguf.Type {
		return func(l int) gguf.Type {
			if l < n {
				return a
			}
			return b
		}
	}
	cases := []struct {
		scheme  string
		imatrix bool
		want    mix
	}{
		{"q2_k", false, mix{gguf.Q2_K, gguf.Q2_K, gguf.Q6_K, gguf.Q3_K, all(gguf.Q4_K), all(gguf.Q3_K)}},
		{"q2_k_s", true, mix{gguf.Q2_K, gguf.Q2_K, gguf.Q6_K, gguf.Q2_K, all(gguf.Q4_K), first(4, gguf.Q4_K, gguf.Q2_K)}},
		{"q3_k_s", false, mix{gguf.Q3_K, gguf.Q3_K, gguf.Q6_K, gguf.Q3_K, all(gguf.Q3_K), all(gguf.Q3_K)}},
		{"q3_k_m", false, mix{gguf.Q3_K, gguf.Q3_K, gguf.Q6_K, gguf.Q4_K, first(2, gguf.Q5_K, gguf.Q4_K), first(2, gguf.Q5_K, gguf.Q4_K)}},
		{"q3_k", false, mix{gguf.Q3_K, gguf.Q3_K, gguf.Q6_K, gguf.Q4_K, first(2, gguf.Q5_K, gguf.Q4_K), first(2, gguf.Q5_K, gguf.Q4_K)}},
		{"q3_k_l", false, mix{gguf.Q3_K, gguf.Q3_K, gguf.Q6_K, gguf.Q5_K, all(gguf.Q5_K), all(gguf.Q5_K)}},
		{"iq4_xs", false, mix{gguf.IQ4_XS, gguf.IQ4_XS, gguf.Q6_K, gguf.IQ4_XS, all(gguf.Q5_K), first(4, gguf.Q5_K, gguf.IQ4_XS)}},
		{"iq4_xs", true, mix{gguf.IQ4_XS, gguf.IQ4_XS, gguf.Q6_K, gguf.IQ4_XS, all(gguf.Q5_K), all(gguf.IQ4_XS)}},
	}
	for _, c := range cases {
		got := typesFor(t, spec, c.scheme, c.imatrix)
		check := func(name string, want gguf.Type) {
			t.Helper()
			if g := got[name]; g.Type != want {
				t.Errorf("%s (imatrix %v): %s: got %s (%s), want %s", c.scheme, c.imatrix, name, g.Type, g.Reason, want)
			}
		}
		check("token_embd.weight", c.want.embd)
		check("output.weight", c.want.out)
		for l := 0; l < spec.Layers; l++ {
			check(arch.TensorRef{Role: arch.AttnQ, Layer: l}.GGUFName(), c.want.base)
			check(arch.TensorRef{Role: arch.AttnK, Layer: l}.GGUFName(), c.want.base)
			check(arch.TensorRef{Role: arch.FFNUp, Layer: l}.GGUFName(), c.want.base)
			check(arch.TensorRef{Role: arch.FFNGate, Layer: l}.GGUFName(), c.want.base)
			check(arch.TensorRef{Role: arch.AttnOut, Layer: l}.GGUFName(), c.want.attnOut)
			check(arch.TensorRef{Role: arch.AttnV, Layer: l}.GGUFName(), c.want.attnV(l))
			check(arch.TensorRef{Role: arch.FFNDown, Layer: l}.GGUFName(), c.want.ffnDown(l))
		}
	}
	// The aliases are the same ftype as their targets, so the same file.
	for alias, target := range map[string]string{"q3_k": "q3_k_m", "q4_k": "q4_k_m", "q5_k": "q5_k_m"} {
		a, _ := PresetByName(alias)
		b, _ := PresetByName(target)
		if a.Base != b.Base || a.FileType != b.FileType {
			t.Errorf("%s = %+v, %s = %+v", alias, a, target, b)
		}
		ga, gb := typesFor(t, spec, alias, false), typesFor(t, spec, target, false)
		for name, c := range gb {
			if ga[name].Type != c.Type {
				t.Errorf("%s %s: %s, %s: %s", alias, name, ga[name].Type, target, c.Type)
			}
		}
	}
	// general.file_type is llama.h's enum llama_ftype.
	for s, ft := range map[string]uint32{"q2_k": 10, "q3_k_s": 11, "q3_k_m": 12, "q3_k_l": 13, "q2_k_s": 21, "iq4_xs": 30, "q4_k": 15, "q5_k": 17, "q3_k": 12} {
		if p, err := PresetByName(s); err != nil || p.FileType != ft {
			t.Errorf("%s: file_type %d (%v), want %d", s, p.FileType, err, ft)
		}
	}
}

// Q2_K_S: llama-quantize refuses a Q2_K tensor other than token_embd and output without an
// importance matrix (tensor_requires_imatrix); after the fallback, stories260k has none.
func TestPolicyQ2KSNeedsImatrix(t *testing.T) {
	got := typesFor(t, stories3mSpec(), "q2_k_s", false)
	for name, c := range got {
		want := c.Type == gguf.Q2_K && name != "token_embd.weight" && name != "output.weight"
		if c.NeedsImatrix != want {
			t.Errorf("q2_k_s %s (%s): NeedsImatrix %v, want %v", name, c.Type, c.NeedsImatrix, want)
		}
	}
	if !got["blk.0.attn_q.weight"].NeedsImatrix || got["token_embd.weight"].NeedsImatrix {
		t.Errorf("q2_k_s on stories3m: attn_q %+v, token_embd %+v", got["blk.0.attn_q.weight"], got["token_embd.weight"])
	}
	for _, s := range []string{"q2_k", "q3_k_s", "q4_k_m", "iq4_xs"} {
		for name, c := range typesFor(t, stories3mSpec(), s, false) {
			if c.NeedsImatrix {
				t.Errorf("%s %s: NeedsImatrix", s, name)
			}
		}
	}
	spec := &arch.Spec{Family: "llama", GGUFArch: "llama", Hidden: 64, Intermediate: 172, Layers: 5,
		Heads: 8, KVHeads: 4, HeadDim: 8, Vocab: 512, Context: 512, RMSEps: 1e-5, RopeTheta: 10000, Tied: true}
	for name, c := range typesFor(t, spec, "q2_k_s", false) {
		if c.NeedsImatrix {
			t.Errorf("stories260k q2_k_s %s (%s): NeedsImatrix", name, c.Type)
		}
	}
}

// Q2_K_S without an importance matrix is refused before anything is written, naming the first
// tensor llama-quantize would refuse (it aborts on blk.0.attn_k.weight of stories3m); with one
// it converts (TestMatchesLlamaQuantizeImatrix checks those bytes); a dry run reports it.
func TestQ2KSRefusedWithoutImatrix(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gguf")
	_, err := Convert("../testdata/models/stories3m", out, Options{Scheme: "q2_k_s"})
	if err == nil || !strings.Contains(err.Error(), "blk.0.attn_") || !strings.Contains(err.Error(), "Q2_K needs an importance matrix") || !errors.As(err, new(*problems.UsageError)) {
		t.Fatalf("q2_k_s without stats: %v", err)
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Fatal("output written")
	}
	// A dry run plans it and says which tensors need one, as llama-quantize --dry-run does.
	p, err := Convert("../testdata/models/stories3m", out, Options{Scheme: "q2_k_s", DryRun: true})
	if err != nil {
		t.Fatalf("--dry-run q2_k_s without stats: %v", err)
	}
	if !strings.Contains(p.Text(), "needs an importance matrix") {
		t.Fatalf("--dry-run q2_k_s does not say an importance matrix is needed:\n%s", p.Text())
	}
	// stories260k: every Q2_K tensor falls back (rows of 64), so nothing needs one.
	if _, err := Convert("../testdata/models/stories260k", out, Options{Scheme: "q2_k_s", DryRun: true}); err != nil {
		t.Fatalf("stories260k q2_k_s: %v", err)
	}
}
