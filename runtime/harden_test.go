package runtime_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/gquant/gquant/convert/gqfconv"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	. "github.com/gquant/gquant/runtime"
)

// editedHF copies stories260k into a temporary folder with config.json's keys set to the
// given JSON values, and returns the folder.
func editedHF(t *testing.T, set map[string]string) string {
	t.Helper()
	src := modelDir(t, stories260k)
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "config.json" {
			b = editJSON(t, b, set)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editJSON sets keys of a JSON object to raw JSON values.
func editJSON(t *testing.T, b []byte, set map[string]string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		m[k] = json.RawMessage(v)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// loadFails loads path, which must fail in one short line starting with prefix and holding
// every text of want, without allocating more than maxAlloc bytes on the way.
func loadFails(t *testing.T, path, prefix string, want ...string) {
	t.Helper()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	m, err := Load(path, Options{Threads: 1})
	goruntime.ReadMemStats(&after)
	if err == nil {
		m.Close()
		t.Errorf("%s: loaded, want an error containing %q", path, want)
		return
	}
	msg := err.Error()
	short := msg
	if len(short) > 300 {
		short = short[:300] + "…"
	}
	if !strings.HasPrefix(msg, prefix+": ") || strings.Contains(msg, "\n") || len(msg) > 400 {
		t.Errorf("error %q: want one short line starting with %q", short, prefix+": ")
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", short, w)
		}
	}
	const maxAlloc = 64 << 20
	if grown := after.TotalAlloc - before.TotalAlloc; grown > maxAlloc {
		t.Errorf("%s: %d MB allocated before the error, want at most %d", path, grown>>20, maxAlloc>>20)
	}
}

// TestConfigDimensionsCheckedAgainstTensors: the dimensions of config.json are checked against
// the tensors the checkpoint holds before anything is sized by them, in one line naming the
// key and the tensor or file (a config claiming 1e9 layers or a 2^40 vocabulary used to run
// out of memory).
func TestConfigDimensionsCheckedAgainstTensors(t *testing.T) {
	cases := []struct {
		key, value string
		want       []string
	}{
		// Moderate values first: a runtime that allocates before checking fails these
		// within bounded memory; the huge ones run only when these pass.
		{"num_hidden_layers", "1000", []string{"num_hidden_layers: 1000, but model.safetensors holds 5 layers"}},
		{"num_hidden_layers", "3", []string{"num_hidden_layers: 3, but model.safetensors holds 5 layers"}},
		{"vocab_size", "600", []string{"vocab_size: 600, but model.embed_tokens.weight has 512 rows"}},
		{"hidden_size", "96", []string{"hidden_size: 96, but model.embed_tokens.weight has 64 columns"}},
		{"intermediate_size", "200", []string{"intermediate_size: 200, but model.layers.0.mlp.gate_proj.weight has 172 rows"}},
		{"num_attention_heads", "16", []string{"num_attention_heads × head_dim: 16 × 8, but model.layers.0.self_attn.q_proj.weight has 64 rows"}},
		{"num_key_value_heads", "8", []string{"num_key_value_heads × head_dim: 8 × 8, but model.layers.0.self_attn.k_proj.weight has 32 rows"}},
		{"head_dim", "16", []string{"num_attention_heads × head_dim: 8 × 16", "num_key_value_heads × head_dim: 4 × 16"}},
		{"num_hidden_layers", "10000000", []string{"num_hidden_layers: 10000000, but model.safetensors holds 5 layers"}},
		{"num_hidden_layers", "1000000000", []string{"num_hidden_layers: 1000000000, but model.safetensors holds 5 layers"}},
		{"vocab_size", "1099511627776", []string{"vocab_size: 1099511627776, but model.embed_tokens.weight has 512 rows"}},
		{"hidden_size", "1099511627776", []string{"hidden_size: 1099511627776, but model.embed_tokens.weight has 64 columns"}},
		{"intermediate_size", "1000000000000", []string{"intermediate_size: 1000000000000, but"}},
		{"num_attention_heads", "1000000000", []string{"num_attention_heads × head_dim: 1000000000 × 8, but"}},
		{"head_dim", "1000000000", []string{"num_attention_heads × head_dim: 8 × 1000000000, but"}},
	}
	for i, c := range cases {
		if i == 8 && t.Failed() {
			t.Skip("moderate dimensions not refused: skipping the huge ones, which would exhaust memory")
		}
		dir := editedHF(t, map[string]string{c.key: c.value})
		loadFails(t, dir, filepath.Join(dir, "config.json"), c.want...)
	}
}

// TestConfigValuesInRange: floats that do not survive float32 (1e300 is +Inf in GGUF), and
// non-positive or out-of-range values, are refused naming the key.
func TestConfigValuesInRange(t *testing.T) {
	for _, c := range []struct {
		key, value, want string
	}{
		{"rope_theta", "1e300", "rope_theta: 1e+300 is out of float32's range"},
		{"rope_theta", "0", "rope_theta: must be greater than 0, got 0"},
		{"rope_theta", "-5", "rope_theta: must be greater than 0"},
		{"rms_norm_eps", "1e300", "rms_norm_eps: 1e+300 is out of float32's range"},
		{"rms_norm_eps", "1e-60", "rms_norm_eps: 1e-60 rounds to 0 in float32"},
		{"rms_norm_eps", "2", "rms_norm_eps: must be below 1, got 2"},
		{"rms_norm_eps", "0", "rms_norm_eps: must be greater than 0"},
		{"max_position_embeddings", "0", "max_position_embeddings: must be in [1, 2147483647], got 0"},
		{"max_position_embeddings", "4294967296", "max_position_embeddings: must be in [1, 2147483647], got 4294967296"},
		{"rope_scaling", `{"rope_type": "linear", "factor": -2}`, "rope_scaling.factor: must be greater than 0, got -2"},
		{"rope_scaling", `{"rope_type": "linear", "factor": 1e300}`, "rope_scaling.factor: 1e+300 is out of float32's range"},
		{"rope_scaling", `{"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4, "original_max_position_embeddings": 64}`,
			"rope_scaling.high_freq_factor: 4 must be greater than the low frequency factor 4"},
		{"rope_scaling", `{"rope_type": "llama3", "factor": 0, "original_max_position_embeddings": 64}`, "rope_scaling.factor: must be greater than 0, got 0"},
		{"rope_scaling", `{"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 0}`,
			"rope_scaling.original_max_position_embeddings: must be in [1, 2147483647], got 0"},
	} {
		dir := editedHF(t, map[string]string{c.key: c.value})
		loadFails(t, dir, filepath.Join(dir, "config.json"), c.want)
	}
}

// ggufEdit is how rewriteGGUF changes a file: set gives a value per key (nil deletes the
// key); drop removes tensors; add adds copies of tensors (new name -> existing name); retype
// changes the type of tensors, keeping their bytes.
type ggufEdit struct {
	set    map[string]any
	drop   map[string]bool
	add    map[string]string
	retype map[string]gguf.Type
}

// rewriteGGUF copies a GGUF file with its metadata and tensors edited.
func rewriteGGUF(t *testing.T, in, out string, e ggufEdit) {
	t.Helper()
	f, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := &gguf.Header{Alignment: f.Alignment}
	done := map[string]bool{}
	for _, kv := range f.KVs {
		if v, ok := e.set[kv.Key]; ok {
			done[kv.Key] = true
			if v == nil {
				continue
			}
			kv.Value = v
		}
		h.KVs = append(h.KVs, kv)
	}
	for k, v := range e.set {
		if !done[k] && v != nil {
			h.KVs = append(h.KVs, gguf.KV{Key: k, Value: v})
		}
	}
	var from []int
	for i, ti := range f.Tensors {
		if !e.drop[ti.Name] {
			typ := ti.Type
			if r, ok := e.retype[ti.Name]; ok {
				typ = r
			}
			h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: ti.Name, Type: typ, Shape: ti.Shape})
			from = append(from, i)
		}
	}
	for name, of := range e.add {
		i, ok := f.TensorIndex(of)
		if !ok {
			t.Fatalf("%s: no tensor %s", in, of)
		}
		ti := f.Tensors[i]
		h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: name, Type: ti.Type, Shape: ti.Shape})
		from = append(from, i)
	}
	w, err := gguf.Create(out, h)
	if err != nil {
		t.Fatal(err)
	}
	for j, i := range from {
		if err := w.WriteTensor(j, f.TensorData(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestGGUFMetadataCheckedAgainstTensors: a GGUF file whose block count, tensor set, token
// count, rope dimension or value types disagree is refused in one line naming the file and
// the key or tensor (a block count of 2 used to run 2 of the 5 stored layers; 0xFFFFFFFF ran
// out of memory).
func TestGGUFMetadataCheckedAgainstTensors(t *testing.T) {
	base := convertGGUF(t, modelDir(t, stories260k), "f32")
	dir := t.TempDir()
	type kvs = map[string]any
	cases := []struct {
		name string
		edit ggufEdit
		want []string
	}{
		{"fewer blocks", ggufEdit{set: kvs{"llama.block_count": uint32(2)}},
			[]string{"llama.block_count: 2, but the file holds 5 layers"}},
		{"more blocks", ggufEdit{set: kvs{"llama.block_count": uint32(1000)}},
			[]string{"llama.block_count: 1000, but the file holds 5 layers"}},
		{"layer beyond", ggufEdit{add: map[string]string{"blk.7.attn_norm.weight": "blk.0.attn_norm.weight"}},
			[]string{"llama.block_count: 5, but the file holds 6 layers (numbered up to 7)"}},
		{"unexpected tensor", ggufEdit{add: map[string]string{"blk.0.attn_q_norm.weight": "blk.0.attn_norm.weight"}},
			[]string{"blk.0.attn_q_norm.weight: unexpected tensor"}},
		{"missing tensor", ggufEdit{drop: map[string]bool{"blk.3.ffn_up.weight": true}},
			[]string{"blk.3.ffn_up.weight: missing"}},
		{"tokens vs rows", ggufEdit{set: kvs{"llama.vocab_size": nil}}, nil}, // filled below
		{"vocab_size vs tokens", ggufEdit{set: kvs{"llama.vocab_size": uint32(600)}},
			[]string{"llama.vocab_size: 600, but tokenizer.ggml.tokens has 512 tokens"}},
		{"rope dimension", ggufEdit{set: kvs{"llama.rope.dimension_count": uint32(12)}},
			[]string{"llama.rope.dimension_count: 12, but the head dimension is 8"}},
		{"value length", ggufEdit{set: kvs{"llama.attention.value_length": uint32(16)}},
			[]string{"llama.attention.value_length: 16, but the key length is 8"}},
		{"float block count", ggufEdit{set: kvs{"llama.block_count": float32(5.5)}},
			[]string{"llama.block_count: has type float32, want an unsigned integer"}},
		{"negative heads", ggufEdit{set: kvs{"llama.attention.head_count": int32(-8)}},
			[]string{"llama.attention.head_count: must not be negative, got -8"}},
		{"huge context", ggufEdit{set: kvs{"llama.context_length": uint64(1) << 40}},
			[]string{"llama.context_length: 1099511627776 is too large"}},
		{"context 0", ggufEdit{set: kvs{"llama.context_length": uint32(0)}},
			[]string{"llama.context_length: must be in [1, 2147483647], got 0"}},
		{"infinite theta", ggufEdit{set: kvs{"llama.rope.freq_base": float32(math.Inf(1))}},
			[]string{"llama.rope.freq_base: must be finite, got +Inf"}},
		{"infinite eps", ggufEdit{set: kvs{"llama.attention.layer_norm_rms_epsilon": float32(math.Inf(1))}},
			[]string{"llama.attention.layer_norm_rms_epsilon: must be finite, got +Inf"}},
		{"zero eps", ggufEdit{set: kvs{"llama.attention.layer_norm_rms_epsilon": float32(0)}},
			[]string{"llama.attention.layer_norm_rms_epsilon: must be greater than 0, got 0"}},
		{"negative rope factor", ggufEdit{set: kvs{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float32(-2)}},
			[]string{"llama.rope.scaling.factor: must be greater than 0, got -2"}},
		{"unknown rope scaling", ggufEdit{set: kvs{"llama.rope.scaling.type": "spiral"}},
			[]string{`llama.rope.scaling.type: unsupported rope scaling type "spiral"`}},
		{"embedding width", ggufEdit{set: kvs{"llama.embedding_length": uint32(4000000000)}},
			[]string{"llama.embedding_length: 4000000000, but token_embd.weight has 64 columns"}},
		{"integer norm", ggufEdit{retype: map[string]gguf.Type{"blk.0.attn_norm.weight": gguf.I32}},
			[]string{"blk.0.attn_norm.weight: no codec for tensor type I32"}},
		{"integer matrix", ggufEdit{retype: map[string]gguf.Type{"blk.0.attn_q.weight": gguf.I32}},
			[]string{"blk.0.attn_q.weight: type I32 is not supported by the runtime"}},
		{"block count max", ggufEdit{set: kvs{"llama.block_count": uint32(math.MaxUint32)}},
			[]string{"llama.block_count: 4294967295, but the file holds 5 layers"}},
	}
	// tokens vs rows: 500 tokens (their scores and types too) for a 512-row embedding.
	{
		f, err := gguf.Open(base)
		if err != nil {
			t.Fatal(err)
		}
		toks, _ := f.Strings("tokenizer.ggml.tokens")
		scores, _ := f.Float32s("tokenizer.ggml.scores")
		types, _ := f.Int32s("tokenizer.ggml.token_type")
		f.Close()
		if len(toks) != 512 || len(scores) != 512 || len(types) != 512 {
			t.Fatalf("%s: %d tokens, %d scores, %d types, want 512", base, len(toks), len(scores), len(types))
		}
		c := &cases[5]
		c.edit.set["tokenizer.ggml.tokens"] = toks[:500]
		c.edit.set["tokenizer.ggml.scores"] = scores[:500]
		c.edit.set["tokenizer.ggml.token_type"] = types[:500]
		c.want = []string{"tokenizer.ggml.tokens: 500 tokens, but token_embd.weight has 512 rows"}
	}
	for i, c := range cases {
		if c.name == "block count max" && t.Failed() {
			t.Skip("smaller block counts not refused: skipping 0xFFFFFFFF, which would exhaust memory")
		}
		path := filepath.Join(dir, fmt.Sprintf("case%d.gguf", i))
		rewriteGGUF(t, base, path, c.edit)
		t.Run(c.name, func(t *testing.T) { loadFails(t, path, path, c.want...) })
	}
}

// TestGQFConfigCheckedAgainstTensors: a gqf file whose config claims more layers than it
// holds is refused before anything is sized by the claim (1e9 layers ran out of memory).
func TestGQFConfigCheckedAgainstTensors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gqf")
	if _, err := gqfconv.Convert(modelDir(t, stories260k), path, gqfconv.Options{Scheme: "w8a16", MaxLen: 16,
		Corpus: filepath.Join("..", "testdata", "corpora", "tinystories-calib.txt"), CalibWindows: 2}); err != nil {
		t.Fatal(err)
	}
	for i, layers := range []string{"1000", "1000000000"} {
		if i > 0 && t.Failed() {
			t.Skip("1000 layers not refused: skipping 1e9, which would exhaust memory")
		}
		bad := filepath.Join(dir, "bad"+layers+".gqf")
		rewriteGQF(t, path, bad, func(m *gqf.Manifest) {
			m.Config.ConfigJson = editJSON(t, m.Config.ConfigJson, map[string]string{"num_hidden_layers": layers})
		})
		loadFails(t, bad, bad, "config: num_hidden_layers: "+layers+", but the file holds 5 layers")
	}
}

// TestContextLengthEnforced: a state never holds more than the model's context length, and
// positions at or beyond it are refused with an error naming it, before anything is
// allocated for them (a 120 KB prompt or -n 100000 used to run on a 256-context model).
func TestContextLengthEnforced(t *testing.T) {
	dir := editedHF(t, map[string]string{"max_position_embeddings": "16"})
	m := loadModel(t, dir, Options{Threads: 1})
	if m.Context() != 16 {
		t.Fatalf("Context() = %d, want 16", m.Context())
	}
	for _, req := range []int{0, 16, 17, 1 << 40, math.MaxInt} {
		if c := m.NewState(req).Cap(); c != 16 {
			t.Errorf("NewState(%d).Cap() = %d, want the context length 16", req, c)
		}
	}
	if c := m.NewState(8).Cap(); c != 8 {
		t.Errorf("NewState(8).Cap() = %d", c)
	}
	ids := synthIDs(17)
	st := m.NewState(1 << 40)
	if _, err := m.Eval(st, ids, false); err == nil || !strings.Contains(err.Error(), "17 tokens exceed the model's context length 16") {
		t.Errorf("17 tokens in a 16-token context: %v", err)
	}
	if _, err := m.Eval(st, ids[:16], false); err != nil {
		t.Fatalf("16 tokens in a 16-token context: %v", err)
	}
	if _, err := m.Eval(st, ids[16:], false); err == nil || !strings.Contains(err.Error(), "1 token at position 16 exceeds the model's context length 16") {
		t.Errorf("token at position 16: %v", err)
	}
	if err := m.CheckContext(0, 16); err != nil {
		t.Errorf("CheckContext(0, 16): %v", err)
	}
	if err := m.CheckContext(10, math.MaxInt); err == nil {
		t.Error("CheckContext(10, MaxInt) accepted")
	}

	emit := func(int) bool { return true }
	greedy := Sampler{IgnoreEOS: true}
	if err := m.Generate(synthIDs(17), 1, greedy, emit); err == nil || !strings.HasPrefix(err.Error(), dir+": prompt of 17 tokens exceeds the model's context length 16") {
		t.Errorf("17-token prompt: %v", err)
	}
	var got int
	if err := m.Generate(synthIDs(10), 7, greedy, func(int) bool { got++; return true }); err == nil ||
		!strings.Contains(err.Error(), "prompt of 10 tokens and 7 new tokens exceed the model's context length 16 (at most 6 new tokens fit)") {
		t.Errorf("10 + 7 tokens: %v", err)
	}
	if got != 0 {
		t.Errorf("refused generation emitted %d tokens", got)
	}
	if err := m.Generate(synthIDs(10), math.MaxInt, greedy, emit); err == nil || !strings.Contains(err.Error(), "context length 16") {
		t.Errorf("n = MaxInt: %v", err)
	}
	got = 0
	if err := m.Generate(synthIDs(10), 6, greedy, func(int) bool { got++; return true }); err != nil || got != 6 {
		t.Errorf("10 + 6 tokens: %d emitted, %v", got, err)
	}
}
