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
// Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM): rotate-half RoPE
// with the config's rope scaling, repeat_kv GQA, RMSNorm, SwiGLU, q/k/v biases when present,
// q_norm/k_norm when present; for Gemma (modeling_gemma2.py, modeling_gemma3.py) the
// embedding times √hidden, RMSNorm times (1 + w), the post-attention and post-feedforward
// norms, gelu_pytorch_tanh, scores times query_pre_attn_scalar^−½ and soft-capped, sliding
// windows on the layers layer_types (Gemma 2 without it: the even ones) names, Gemma 3's
// local RoPE (rope_local_base_freq, no scaling) on its sliding layers, soft-capped logits;
// for Phi-3 (modeling_phi3.py) the fused qkv_proj and gate_up_proj and partial rotary; for
// Mixtral and Qwen3-MoE (modeling_mixtral.py, modeling_qwen3_moe.py) the sparse MoE block:
// softmax over the router's logits, the top num_experts_per_tok experts, their weights
// renormalized (Mixtral; Qwen3-MoE with norm_topk_prob), Σ weight·expert(x).
type f64Model struct {
	typ      string // model_type
	gemma    bool
	scaling  float64   // attention score factor
	attnCap  float64   // 0: none
	finalCap float64   // 0: none
	window   int       // sliding window (0: none)
	sliding  []bool    // per layer
	localInv []float64 // Gemma 3's sliding layers' RoPE
	rot      int       // rotated dimensions per head
	// longrope (Phi-3): the short and long divisors of the frequencies, the original context
	// and the factor of cos and sin (transformers' _compute_longrope_parameters).
	short, long []float64
	orig        int
	ropeAttn    float64
	cfg         map[string]any
	w           map[string][]float64
	shp         map[string][]int
	hid         int
	nl          int
	nh          int
	nkv         int
	hd          int
	eps         float64
	inv         []float64 // RoPE inverse frequencies
	tied        bool
	// experts and topK of a sparse MoE block (0: a dense MLP), normTopK its renormalization.
	experts, topK int
	normTopK      bool
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
	m.typ, _ = c["model_type"].(string)
	m.gemma = m.typ == "gemma2" || m.typ == "gemma3_text"
	m.scaling = 1 / math.Sqrt(float64(m.hd))
	m.rot = int(float64(m.hd) * num(c, "partial_rotary_factor", 1))
	m.experts = int(num(c, "num_local_experts", num(c, "num_experts", 0)))
	m.topK = int(num(c, "num_experts_per_tok", 0))
	m.normTopK, _ = c["norm_topk_prob"].(bool)
	m.normTopK = m.normTopK || m.typ == "mixtral"
	m.sliding = make([]bool, m.nl)
	if m.gemma {
		m.scaling = 1 / math.Sqrt(num(c, "query_pre_attn_scalar", float64(m.hd)))
		m.attnCap, m.finalCap = num(c, "attn_logit_softcapping", 0), num(c, "final_logit_softcapping", 0)
		m.window = int(num(c, "sliding_window", 0))
		types, _ := c["layer_types"].([]any)
		for l := range m.sliding {
			if types != nil {
				m.sliding[l] = types[l] == "sliding_attention"
			} else {
				m.sliding[l] = l%2 == 0 // modeling_gemma2: not bool(layer_idx % 2)
			}
		}
	}
	base := num(c, "rope_theta", 10000)
	for i := 0; i < m.rot; i += 2 {
		m.inv = append(m.inv, 1/math.Pow(base, float64(i)/float64(m.rot)))
	}
	if m.typ == "gemma3_text" {
		lb := num(c, "rope_local_base_freq", 10000)
		for i := 0; i < m.rot; i += 2 {
			m.localInv = append(m.localInv, 1/math.Pow(lb, float64(i)/float64(m.rot)))
		}
	}
	m.ropeAttn = 1
	if rs, ok := c["rope_scaling"].(map[string]any); ok {
		factor := num(rs, "factor", 1)
		if rs["type"] == "longrope" {
			for _, k := range []struct {
				key string
				dst *[]float64
			}{{"short_factor", &m.short}, {"long_factor", &m.long}} {
				for _, v := range rs[k.key].([]any) {
					*k.dst = append(*k.dst, v.(float64))
				}
			}
			m.orig = int(num(c, "original_max_position_embeddings", 0))
			if f := num(c, "max_position_embeddings", 0) / float64(m.orig); f > 1 {
				m.ropeAttn = math.Sqrt(1 + math.Log(f)/math.Log(float64(m.orig)))
			}
		}
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
		g := w[i]
		if m.gemma {
			g = 1 + w[i] // Gemma2RMSNorm, Gemma3RMSNorm: output * (1.0 + weight)
		}
		y[i] = g * v * sc
	}
	return y
}

// rotate applies rotate-half RoPE at position p to the first m.rot dimensions of each head
// of x, with the frequencies inv (cos and sin times the longrope attention factor).
func (m *f64Model) rotate(x []float64, p int, inv []float64) {
	h2 := m.rot / 2
	for h := 0; h < len(x)/m.hd; h++ {
		v := x[h*m.hd : (h+1)*m.hd]
		for i := 0; i < h2; i++ {
			c, s := math.Cos(float64(p)*inv[i])*m.ropeAttn, math.Sin(float64(p)*inv[i])*m.ropeAttn
			a, b := v[i], v[i+h2]
			v[i], v[i+h2] = a*c-b*s, b*c+a*s
		}
	}
}

// capped is c·tanh(x/c), or x for c = 0.
func capped(x, c float64) float64 {
	if c == 0 {
		return x
	}
	return c * math.Tanh(x/c)
}

// add adds y to x in place.
func add(x, y []float64) {
	for i := range x {
		x[i] += y[i]
	}
}

// logits returns the logits of every position of ids.
func (m *f64Model) logits(ids []int) [][]float64 {
	n := len(ids)
	emb := m.w["model.embed_tokens.weight"]
	xs := make([][]float64, n)
	for t, id := range ids {
		xs[t] = append([]float64(nil), emb[id*m.hid:(id+1)*m.hid]...)
		if m.gemma { // the normalizer, hidden_size**0.5 in the weights' dtype: float32 here
			sc := float64(float32(math.Sqrt(float64(m.hid))))
			for i := range xs[t] {
				xs[t][i] *= sc
			}
		}
	}
	group := m.nh / m.nkv
	for l := 0; l < m.nl; l++ {
		p := "model.layers." + itoa(l) + "."
		ks, vs := make([][]float64, n), make([][]float64, n)
		qs := make([][]float64, n)
		inv := m.inv
		if m.localInv != nil && m.sliding[l] {
			inv = m.localInv
		}
		if m.short != nil { // longrope: the long divisors for a sequence beyond the original context
			ext := m.short
			if n > m.orig {
				ext = m.long
			}
			inv = make([]float64, len(m.inv))
			for i := range inv {
				inv[i] = m.inv[i] / ext[i]
			}
		}
		for t := range xs {
			h := m.rms(xs[t], m.w[p+"input_layernorm.weight"])
			var q, k []float64
			if m.typ == "phi3" { // qkv_proj: q, then k, then v
				qkv := m.linear(h, p+"self_attn.qkv_proj")
				qd, kd := m.nh*m.hd, m.nkv*m.hd
				q, k, vs[t] = qkv[:qd], qkv[qd:qd+kd], qkv[qd+kd:]
			} else {
				q, k = m.linear(h, p+"self_attn.q_proj"), m.linear(h, p+"self_attn.k_proj")
				vs[t] = m.linear(h, p+"self_attn.v_proj")
			}
			if qn, ok := m.w[p+"self_attn.q_norm.weight"]; ok {
				kn := m.w[p+"self_attn.k_norm.weight"]
				for hh := 0; hh < m.nh; hh++ {
					copy(q[hh*m.hd:], m.rms(q[hh*m.hd:(hh+1)*m.hd], qn))
				}
				for hh := 0; hh < m.nkv; hh++ {
					copy(k[hh*m.hd:], m.rms(k[hh*m.hd:(hh+1)*m.hd], kn))
				}
			}
			m.rotate(q, t, inv)
			m.rotate(k, t, inv)
			qs[t], ks[t] = q, k
		}
		for t := range xs {
			ctx := make([]float64, m.nh*m.hd)
			first := 0
			if m.sliding[l] && m.window > 0 { // the mask keeps t − j < sliding_window
				first = max(0, t-m.window+1)
			}
			for hh := 0; hh < m.nh; hh++ {
				g := hh / group
				q := qs[t][hh*m.hd : (hh+1)*m.hd]
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for j := first; j <= t; j++ {
					var d float64
					for i := 0; i < m.hd; i++ {
						d += q[i] * ks[j][g*m.hd+i]
					}
					sc[j] = capped(d*m.scaling, m.attnCap)
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := first; j <= t; j++ {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := first; j <= t; j++ {
					for i := 0; i < m.hd; i++ {
						ctx[hh*m.hd+i] += sc[j] / sum * vs[j][g*m.hd+i]
					}
				}
			}
			o := m.linear(ctx, p+"self_attn.o_proj")
			if m.gemma {
				o = m.rms(o, m.w[p+"post_attention_layernorm.weight"])
			}
			add(xs[t], o)
			if m.experts > 0 {
				add(xs[t], m.sparseMoE(m.rms(xs[t], m.w[p+"post_attention_layernorm.weight"]), p))
				continue
			}
			var g, u []float64
			switch {
			case m.gemma:
				h := m.rms(xs[t], m.w[p+"pre_feedforward_layernorm.weight"])
				g, u = m.linear(h, p+"mlp.gate_proj"), m.linear(h, p+"mlp.up_proj")
				for i, x := range g { // gelu_pytorch_tanh
					g[i] = 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * u[i]
				}
			case m.typ == "phi3": // gate_up_proj: gate, up = chunk(2)
				h := m.rms(xs[t], m.w[p+"post_attention_layernorm.weight"])
				gu := m.linear(h, p+"mlp.gate_up_proj")
				g, u = gu[:len(gu)/2], gu[len(gu)/2:]
				for i, x := range g {
					g[i] = x / (1 + math.Exp(-x)) * u[i]
				}
			default:
				h := m.rms(xs[t], m.w[p+"post_attention_layernorm.weight"])
				g, u = m.linear(h, p+"mlp.gate_proj"), m.linear(h, p+"mlp.up_proj")
				for i, x := range g {
					g[i] = x / (1 + math.Exp(-x)) * u[i]
				}
			}
			d := m.linear(g, p+"mlp.down_proj")
			if m.gemma {
				d = m.rms(d, m.w[p+"post_feedforward_layernorm.weight"])
			}
			add(xs[t], d)
		}
	}
	head := "lm_head"
	if m.tied {
		head = "model.embed_tokens"
	}
	out := make([][]float64, n)
	for t := range xs {
		out[t] = m.linear(m.rms(xs[t], m.w["model.norm.weight"]), head)
		for i, v := range out[t] {
			out[t][i] = capped(v, m.finalCap)
		}
	}
	return out
}

// sparseMoE is MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock on one token's normed x (p:
// the layer's prefix).
func (m *f64Model) sparseMoE(x []float64, p string) []float64 {
	router, expert, names := p+"mlp.gate", p+"mlp.experts.", [3]string{"gate_proj", "up_proj", "down_proj"}
	if m.typ == "mixtral" {
		router, expert, names = p+"block_sparse_moe.gate", p+"block_sparse_moe.experts.", [3]string{"w1", "w3", "w2"}
	}
	logits := m.linear(x, router)
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, v)
	}
	probs := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		probs[i] = math.Exp(v - mx)
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	var sel []int
	var wsum float64
	for len(sel) < m.topK { // torch.topk
		best := -1
		for i, v := range probs {
			taken := false
			for _, e := range sel {
				taken = taken || e == i
			}
			if !taken && (best < 0 || v > probs[best]) {
				best = i
			}
		}
		sel = append(sel, best)
		wsum += probs[best]
	}
	y := make([]float64, len(x))
	for _, e := range sel {
		w := probs[e]
		if m.normTopK {
			w /= wsum
		}
		ep := expert + itoa(e) + "."
		g, u := m.linear(x, ep+names[0]), m.linear(x, ep+names[1])
		for i, v := range g {
			g[i] = v / (1 + math.Exp(-v)) * u[i]
		}
		for i, v := range m.linear(g, ep+names[2]) {
			y[i] += w * v
		}
	}
	return y
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
	// Gemma with windows shorter than the sequence and caps the synthetic scores and logits
	// reach (50 and 30 leave them untouched); Gemma 3 with a pattern of 3 (two sliding
	// layers, then a global one) and a short scaled global context.
	gemma2 := base("tiny-gemma2")
	gemma2.SlidingWindow, gemma2.AttnSoftcap, gemma2.FinalSoftcap = 8, 0.1, 0.3
	gemma2.Layers = 3
	gemma3 := base("tiny-gemma3")
	gemma3.SlidingWindow, gemma3.SlidingPattern, gemma3.Layers = 8, 3, 3
	gemma3.RopeTheta, gemma3.RopeScaling = 100, &synth.RopeScaling{Type: "linear", Factor: 2}
	gemma3mha := base("tiny-gemma3")
	gemma3mha.Layers, gemma3mha.KVHeads, gemma3mha.HeadDim, gemma3mha.FinalSoftcap = 2, 4, 0, 0.3
	// Phi-3: partial rotary, GQA, and longrope with an original context below the sequence
	// (its long factors) and above it (its short ones).
	phi3 := base("tiny-phi3")
	phi3long := phi3
	phi3long.Layers, phi3long.KVHeads, phi3long.OriginalContext, phi3long.RopeScaling = 3, 4, 16, phiLongRope(24)
	phi3short := phi3long
	phi3short.OriginalContext, phi3short.PartialRotary, phi3short.RopeScaling = 64, 0, phiLongRope(32)
	// Mixtral and Qwen3-MoE: GQA and MHA, head_dim ≠ hidden/heads, top-1 to top-3 of 4 to 8
	// experts, Qwen3-MoE with and without renormalized weights (the runtime's case: GGUF
	// cannot say it), tied.
	mixtral := base("tiny-mixtral")
	mixtral.Layers, mixtral.Intermediate = 3, 256
	mixtralMHA := mixtral
	mixtralMHA.KVHeads, mixtralMHA.HeadDim, mixtralMHA.Experts, mixtralMHA.ExpertsUsed, mixtralMHA.Tied = 4, 32, 4, 1, true
	qwen3moe := base("tiny-qwen3moe")
	qwen3moe.ExpertsUsed = 3
	qwen3moeRaw := base("tiny-qwen3moe")
	qwen3moeRaw.NormTopK, qwen3moeRaw.KVHeads, qwen3moeRaw.HeadDim, qwen3moeRaw.Experts = false, 1, 32, 4
	return map[string]synth.Spec{
		"mixtral": mixtral, "mixtral-mha": mixtralMHA, "qwen3moe": qwen3moe, "qwen3moe-unnormed": qwen3moeRaw,
		"qwen2": base("tiny-qwen2"), "qwen3": base("tiny-qwen3"), "mistral": base("tiny-mistral"),
		"llama3": llama3, "linear": linear, "llama": base("tiny-llama"),
		"gemma2": gemma2, "gemma3": gemma3, "gemma3-mha": gemma3mha,
		"phi3": phi3, "phi3-longrope": phi3long, "phi3-shortrope": phi3short,
	}
}

// phiLongRope is a longrope rope_scaling of n pairs: short divisors from 1 to 1.5, long ones
// from 1 to 40 (Phi-3-mini-128k's span).
func phiLongRope(n int) *synth.RopeScaling {
	rs := &synth.RopeScaling{Type: "longrope"}
	for i := range n {
		x := float64(i) / float64(n-1)
		rs.ShortFactor = append(rs.ShortFactor, 1+0.5*x*x)
		rs.LongFactor = append(rs.LongFactor, 1+39*x*x*x)
	}
	return rs
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

// presetFolder writes synth's preset as a HuggingFace folder (weights from seed) in a
// temporary directory and returns its path.
func presetFolder(t testing.TB, preset string, seed uint64) string {
	t.Helper()
	spec, err := synth.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), preset)
	if err := synth.Generate(dir, spec, synth.Options{Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return dir
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
				if spec.Arch == synth.Qwen3MoE && !spec.NormTopK {
					break // llama.cpp's GGUF always renormalizes: convert refuses it
				}
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
