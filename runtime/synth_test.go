package runtime_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/formats/hf/synth"
	"github.com/gquant/gquant/formats/safetensors"
	. "github.com/gquant/gquant/runtime"
)

// f64Model is an independent float64 forward pass with HuggingFace semantics, written for the
// tests from the transformers modeling code (LlamaForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM): rotate-half RoPE with the config's rope scaling, repeat_kv GQA, RMSNorm,
// SwiGLU, q/k/v biases when present, q_norm/k_norm when present.
type f64Model struct {
	cfg  map[string]any
	w    map[string][]float64
	shp  map[string][]int
	hid  int
	nl   int
	nh   int
	nkv  int
	hd   int
	eps  float64
	inv  []float64 // RoPE inverse frequencies
	tied bool
}

func num(cfg map[string]any, key string, def float64) float64 {
	if v, ok := cfg[key].(float64); ok {
		return v
	}
	return def
}

func loadF64(t *testing.T, dir string) *f64Model {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := &f64Model{w: map[string][]float64{}, shp: map[string][]int{}}
	if err := json.Unmarshal(b, &m.cfg); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, ti := range ck.Tensors() {
		f, err := ck.ToFloat32(ti.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, len(f))
		for i, x := range f {
			v[i] = float64(x)
		}
		m.w[ti.Name], m.shp[ti.Name] = v, ti.Shape
	}
	c := m.cfg
	m.hid = int(num(c, "hidden_size", 0))
	m.nl = int(num(c, "num_hidden_layers", 0))
	m.nh = int(num(c, "num_attention_heads", 0))
	m.nkv = int(num(c, "num_key_value_heads", float64(m.nh)))
	m.hd = int(num(c, "head_dim", float64(m.hid/m.nh)))
	m.eps = num(c, "rms_norm_eps", 1e-6)
	m.tied, _ = c["tie_word_embeddings"].(bool)
	base := num(c, "rope_theta", 10000)
	for i := 0; i < m.hd; i += 2 {
		m.inv = append(m.inv, 1/math.Pow(base, float64(i)/float64(m.hd)))
	}
	if rs, ok := c["rope_scaling"].(map[string]any); ok {
		factor := num(rs, "factor", 1)
		switch rs["rope_type"] {
		case "linear": // positions / factor
			for i := range m.inv {
				m.inv[i] /= factor
			}
		case "llama3": // transformers' _compute_llama3_parameters
			lo, hi := num(rs, "low_freq_factor", 1), num(rs, "high_freq_factor", 4)
			old := num(rs, "original_max_position_embeddings", 8192)
			loWave, hiWave := old/lo, old/hi
			for i, f := range m.inv {
				wave := 2 * math.Pi / f
				switch {
				case wave > loWave:
					m.inv[i] = f / factor
				case wave < hiWave:
				default:
					smooth := (old/wave - lo) / (hi - lo)
					m.inv[i] = (1-smooth)*f/factor + smooth*f
				}
			}
		}
	}
	return m
}

// linear returns x·Wᵀ (+ bias) for W of shape [out, in].
func (m *f64Model) linear(x []float64, name string) []float64 {
	w, s := m.w[name+".weight"], m.shp[name+".weight"]
	out, in := s[0], s[1]
	y := make([]float64, out)
	for r := 0; r < out; r++ {
		var acc float64
		for k := 0; k < in; k++ {
			acc += w[r*in+k] * x[k]
		}
		y[r] = acc
	}
	if b, ok := m.w[name+".bias"]; ok {
		for r := range y {
			y[r] += b[r]
		}
	}
	return y
}

func (m *f64Model) rms(x, w []float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	sc := 1 / math.Sqrt(ss/float64(len(x))+m.eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = w[i] * v * sc
	}
	return y
}

// rotate applies rotate-half RoPE at position p to each head of x.
func (m *f64Model) rotate(x []float64, p int) {
	h2 := m.hd / 2
	for h := 0; h < len(x)/m.hd; h++ {
		v := x[h*m.hd : (h+1)*m.hd]
		for i := 0; i < h2; i++ {
			c, s := math.Cos(float64(p)*m.inv[i]), math.Sin(float64(p)*m.inv[i])
			a, b := v[i], v[i+h2]
			v[i], v[i+h2] = a*c-b*s, b*c+a*s
		}
	}
}

// logits returns the logits of every position of ids.
func (m *f64Model) logits(ids []int) [][]float64 {
	n := len(ids)
	emb := m.w["model.embed_tokens.weight"]
	xs := make([][]float64, n)
	for t, id := range ids {
		xs[t] = append([]float64(nil), emb[id*m.hid:(id+1)*m.hid]...)
	}
	group := m.nh / m.nkv
	for l := 0; l < m.nl; l++ {
		p := "model.layers." + itoa(l) + "."
		ks, vs := make([][]float64, n), make([][]float64, n)
		qs := make([][]float64, n)
		for t := range xs {
			h := m.rms(xs[t], m.w[p+"input_layernorm.weight"])
			q, k := m.linear(h, p+"self_attn.q_proj"), m.linear(h, p+"self_attn.k_proj")
			vs[t] = m.linear(h, p+"self_attn.v_proj")
			if qn, ok := m.w[p+"self_attn.q_norm.weight"]; ok {
				kn := m.w[p+"self_attn.k_norm.weight"]
				for hh := 0; hh < m.nh; hh++ {
					copy(q[hh*m.hd:], m.rms(q[hh*m.hd:(hh+1)*m.hd], qn))
				}
				for hh := 0; hh < m.nkv; hh++ {
					copy(k[hh*m.hd:], m.rms(k[hh*m.hd:(hh+1)*m.hd], kn))
				}
			}
			m.rotate(q, t)
			m.rotate(k, t)
			qs[t], ks[t] = q, k
		}
		for t := range xs {
			ctx := make([]float64, m.nh*m.hd)
			for hh := 0; hh < m.nh; hh++ {
				g := hh / group
				q := qs[t][hh*m.hd : (hh+1)*m.hd]
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for j := 0; j <= t; j++ {
					var d float64
					for i := 0; i < m.hd; i++ {
						d += q[i] * ks[j][g*m.hd+i]
					}
					sc[j] = d / math.Sqrt(float64(m.hd))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for i := 0; i < m.hd; i++ {
						ctx[hh*m.hd+i] += sc[j] / sum * vs[j][g*m.hd+i]
					}
				}
			}
			o := m.linear(ctx, p+"self_attn.o_proj")
			for i := range o {
				xs[t][i] += o[i]
			}
			h := m.rms(xs[t], m.w[p+"post_attention_layernorm.weight"])
			g, u := m.linear(h, p+"mlp.gate_proj"), m.linear(h, p+"mlp.up_proj")
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			d := m.linear(g, p+"mlp.down_proj")
			for i := range d {
				xs[t][i] += d[i]
			}
		}
	}
	head := "lm_head"
	if m.tied {
		head = "model.embed_tokens"
	}
	out := make([][]float64, n)
	for t := range xs {
		out[t] = m.linear(m.rms(xs[t], m.w["model.norm.weight"]), head)
	}
	return out
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// synthCases are small synthetic models covering what the real test models do not: Qwen2
// biases, Qwen3 q/k norms and head_dim ≠ hidden/heads, tied output, llama3 and linear RoPE
// scaling with a short original context (so that the scaled frequencies matter within a few
// dozen positions).
func synthCases(t *testing.T) map[string]synth.Spec {
	t.Helper()
	base := func(name string) synth.Spec {
		s, err := synth.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	llama3 := base("tiny-llama3")
	llama3.RopeTheta = 10000
	llama3.RopeScaling = &synth.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 64}
	linear := base("tiny-mistral")
	linear.RopeTheta = 10000
	linear.RopeScaling = &synth.RopeScaling{Type: "linear", Factor: 4}
	return map[string]synth.Spec{
		"qwen2": base("tiny-qwen2"), "qwen3": base("tiny-qwen3"), "mistral": base("tiny-mistral"),
		"llama3": llama3, "linear": linear, "llama": base("tiny-llama"),
	}
}

// synthIDs is a fixed token sequence of n ids below 512.
func synthIDs(n int) []int {
	ids := []int{1}
	x := uint32(12345)
	for len(ids) < n {
		x = x*1664525 + 1013904223
		ids = append(ids, int(3+(x>>16)%500))
	}
	return ids
}

// TestSynthAgainstFloat64 compares every position's logits of HF folders and of F32 and F16
// GGUFs made from them with the float64 forward pass.
func TestSynthAgainstFloat64(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ids := synthIDs(40)
	for name, spec := range synthCases(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			if err := synth.Generate(dir, spec, synth.Options{Seed: 7}); err != nil {
				t.Fatal(err)
			}
			want := loadF64(t, dir).logits(ids)
			paths := map[string]string{"hf": dir}
			for _, scheme := range []string{"f32", "f16"} {
				paths[scheme] = convertGGUF(t, dir, scheme)
			}
			for what, path := range paths {
				m := loadModel(t, path, Options{Threads: 2})
				// Prefill all but the last 8, then decode those one by one.
				st := m.NewState(len(ids))
				head, err := m.Eval(st, ids[:32], true)
				if err != nil {
					t.Fatal(err)
				}
				got := head
				for _, id := range ids[32:] {
					l, err := m.Eval(st, []int{id}, true)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, l...)
				}
				V := m.Vocab()
				var worst, amax float64
				for p := range ids {
					for i, w := range want[p] {
						amax = math.Max(amax, math.Abs(w))
						worst = math.Max(worst, math.Abs(float64(got[p*V+i])-w))
					}
				}
				t.Logf("%s: max |Δlogit| %.3g of max |logit| %.3g", what, worst, amax)
				tol := 1e-4
				if what == "f16" {
					tol = 2e-3 // bf16 → f16 is exact only for values in f16's range
				}
				if worst > tol*amax {
					t.Errorf("%s: max |Δlogit| %g exceeds %g·%g", what, worst, tol, amax)
				}
			}
		})
	}
}
