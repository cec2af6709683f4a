package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/hf/synth"
)

// The CLI-level catalogue of malformed inputs (DESIGN.md, Tests): every verb, every kind of
// input (config.json, safetensors, index, tokenizer, GGUF, gqf, statistics and imatrix files,
// corpora, AIMET encodings, reference log-probabilities, flags), each with the one-line error
// it must give. No input here may give a stack trace, a hang past 60 s, an output left behind,
// or an exit code other than 1 (bad input) or 2 (usage).
//
// Each case builds its input in its own folder from a copy of a bundled model or of a valid
// artifact made once (catFixtures), and writes its outputs into its own empty folder. A case
// whose current behaviour is wrong keeps its right expectation and is marked known, with what
// happens instead; it is skipped until fixed (GQUANT_CATALOGUE_KNOWN=1 runs the known cases too).

// catCase is one malformed input.
type catCase struct {
	name string
	// args builds the input under e.in and returns the command line; outputs go under e.out.
	args func(e *catEnv) []string
	code int // exitError (bad input) or exitUsage
	// want is a fragment of the one-line error: it names the file, tensor, key or flag. An
	// ellipsis (…) stands for any text, where the error holds a size or offset of a fixture.
	want string
	// known, when set, says how the current behaviour is wrong; the case is skipped.
	known string
}

// catFixtures are the valid inputs the cases start from, made once.
type catFixtures struct {
	dir      string
	q8       string // stories260k as Q8_0 GGUF
	gqf      string // stories260k as gqf f16
	stats    string // calibrate -o of stories260k
	imatrix  string // calibrate --imatrix of stories260k
	enc      string // AIMET encodings (w8a16) of stories260k
	ref      string // verify --save-ref of stories260k
	other    string // another model (a synthetic llama of other shapes)
	oStats   string // its statistics
	oImatrix string // its imatrix
	oEnc     string // its encodings
	sharded  string // a synthetic sharded model (model.safetensors.index.json)
	wide     string // a synthetic model with a vocabulary of 1024
	wideQ8   string // it as Q8_0 GGUF
	split    string // a folder with stories3m as Q8_0 GGUF in 4 parts, m-0000N-of-00004.gguf
	shard0   string // calibrate --shard 0/2 of stories260k (4 chunks of 32 tokens)
	shard1   string // calibrate --shard 1/2 of the same
}

func newCatFixtures(t *testing.T) *catFixtures {
	t.Helper()
	dir := t.TempDir()
	fx := &catFixtures{
		dir: dir, q8: filepath.Join(dir, "q8.gguf"), gqf: filepath.Join(dir, "f16.gqf"),
		stats: filepath.Join(dir, "stats.gguf"), imatrix: filepath.Join(dir, "imatrix.gguf"),
		enc: filepath.Join(dir, "enc.json"), ref: filepath.Join(dir, "ref.kld"),
		other: filepath.Join(dir, "other"), oStats: filepath.Join(dir, "other-stats.gguf"),
		oImatrix: filepath.Join(dir, "other-imatrix.gguf"), oEnc: filepath.Join(dir, "other-enc.json"),
		sharded: filepath.Join(dir, "sharded"), wide: filepath.Join(dir, "wide"), wideQ8: filepath.Join(dir, "wide.gguf"),
		split:  filepath.Join(dir, "split"),
		shard0: filepath.Join(dir, "shard0.stats"), shard1: filepath.Join(dir, "shard1.stats"),
	}
	if err := os.Mkdir(fx.split, 0o755); err != nil {
		t.Fatal(err)
	}
	other := synth.Spec{Arch: synth.Llama, Hidden: 64, Intermediate: 128, Layers: 2, Heads: 4, KVHeads: 2,
		RopeTheta: 10000, RMSNormEps: 1e-5, MaxPositions: 256}
	if err := synth.Generate(fx.other, other, synth.Options{Seed: 1, TokenizerDir: stories260k}); err != nil {
		t.Fatal(err)
	}
	micro := synth.Spec{Arch: synth.Llama, Hidden: 32, Intermediate: 64, Layers: 2, Heads: 2, KVHeads: 1,
		RopeTheta: 10000, RMSNormEps: 1e-5, MaxPositions: 128}
	if err := synth.Generate(fx.sharded, micro, synth.Options{Seed: 1, TokenizerDir: stories260k, ShardSize: 16 << 10}); err != nil {
		t.Fatal(err)
	}
	wide := micro
	wide.Hidden, wide.Heads, wide.KVHeads, wide.Vocab = 64, 4, 2, 1024
	if err := synth.Generate(fx.wide, wide, synth.Options{Seed: 2, TokenizerDir: stories260k}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"convert", stories260k, "--scheme", "q8_0", "-o", fx.q8},
		{"convert", fx.wide, "--scheme", "q8_0", "-o", fx.wideQ8},
		{"convert", stories3m, "--scheme", "q8_0", "--split-max-size", "1M", "-o", filepath.Join(fx.split, "m.gguf")},
		{"convert", stories260k, "--format", "gqf", "--scheme", "f16", "-o", fx.gqf},
		{"calibrate", stories260k, "--corpus", calibCorpus, "--tokens", "256", "--ctx", "64", "-o", fx.stats, "--imatrix", fx.imatrix},
		{"calibrate", stories260k, "--stats", fx.stats, "--w8a16", "--encodings", fx.enc},
		{"calibrate", fx.other, "--corpus", calibCorpus, "--tokens", "128", "--ctx", "32", "-o", fx.oStats, "--imatrix", fx.oImatrix,
			"--w8a16", "--encodings", fx.oEnc},
		{"verify", fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--ctx", "64", "--chunks", "2", "--gen", "2", "--save-ref", fx.ref},
		catArgs([]string{"calibrate", stories260k, "--corpus", calibCorpus, "--shard", "0/2", "-o", fx.shard0}, catCalibShort),
		catArgs([]string{"calibrate", stories260k, "--corpus", calibCorpus, "--shard", "1/2", "-o", fx.shard1}, catCalibShort),
	} {
		if code, _, e := run(append(args, "-q")...); code != exitOK {
			t.Fatalf("fixture %v: exit %d: %s", args, code, e)
		}
	}
	return fx
}

// catEnv is one case's world: its input folder, its empty output folder, the fixtures.
type catEnv struct {
	t   *testing.T
	fx  *catFixtures
	in  string
	out string
}

// o names an output file in the case's output folder.
func (e *catEnv) o(name string) string { return filepath.Join(e.out, name) }

// p names an input file in the case's input folder.
func (e *catEnv) p(name string) string { return filepath.Join(e.in, name) }

// write writes an input file and returns its path.
func (e *catEnv) write(name string, b []byte) string {
	e.t.Helper()
	p := e.p(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// read reads a file or fails the case.
func (e *catEnv) read(path string) []byte {
	e.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// patch writes a copy of src named name, changed by edit.
func (e *catEnv) patch(src, name string, edit func(b []byte) []byte) string {
	e.t.Helper()
	return e.write(name, edit(e.read(src)))
}

// model copies a model folder (stories260k by default) into the input folder.
func (e *catEnv) model(src ...string) string {
	e.t.Helper()
	from := stories260k
	if len(src) > 0 {
		from = src[0]
	}
	dst := filepath.Join(e.in, filepath.Base(from))
	if err := os.CopyFS(dst, os.DirFS(from)); err != nil {
		e.t.Fatal(err)
	}
	return dst
}

// config copies stories260k and sets config.json's key to v (a Go value), or deletes it when v
// is nil.
func (e *catEnv) config(key string, v any) string {
	e.t.Helper()
	return e.editConfig(func(cfg map[string]any) {
		if v == nil {
			delete(cfg, key)
		} else {
			cfg[key] = v
		}
	})
}

// configRaw copies stories260k and sets config.json's key to raw JSON-like text (NaN,
// Infinity: what Python's json writes), so that the file is what a tool wrote, not valid JSON.
func (e *catEnv) configRaw(key, raw string) string {
	e.t.Helper()
	dir := e.config(key, "@@raw@@")
	p := filepath.Join(dir, "config.json")
	b := bytes.Replace(e.read(p), []byte(`"@@raw@@"`), []byte(raw), 1)
	e.write(filepath.Join(filepath.Base(dir), "config.json"), b)
	return dir
}

// editConfig copies stories260k and edits its config.json.
func (e *catEnv) editConfig(edit func(cfg map[string]any)) string {
	e.t.Helper()
	dir := e.model()
	p := filepath.Join(dir, "config.json")
	var cfg map[string]any
	if err := json.Unmarshal(e.read(p), &cfg); err != nil {
		e.t.Fatal(err)
	}
	edit(cfg)
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	e.write(filepath.Join(filepath.Base(dir), "config.json"), b)
	return dir
}

// editJSON copies a model and edits one of its JSON files, decoded into a generic value.
func (e *catEnv) editJSON(src, file string, edit func(v map[string]any)) string {
	e.t.Helper()
	dir := e.model(src)
	p := filepath.Join(dir, file)
	var v map[string]any
	if err := json.Unmarshal(e.read(p), &v); err != nil {
		e.t.Fatal(err)
	}
	edit(v)
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// modelFile copies stories260k and replaces (or, with nil, removes) one of its files.
func (e *catEnv) modelFile(file string, b []byte) string {
	e.t.Helper()
	dir := e.model()
	p := filepath.Join(dir, file)
	if b == nil {
		if err := os.Remove(p); err != nil {
			e.t.Fatal(err)
		}
		return dir
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// modelPatch copies a model and rewrites one of its files through edit.
func (e *catEnv) modelPatch(src, file string, edit func(b []byte) []byte) string {
	e.t.Helper()
	dir := e.model(src)
	p := filepath.Join(dir, file)
	if err := os.WriteFile(p, edit(e.read(p)), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// splitParts copies the split GGUF fixture into the input folder, lets edit change its files
// (part names "m-0000N-of-00004.gguf", full paths), and returns the first part.
func (e *catEnv) splitParts(edit func(part func(n int) string)) string {
	e.t.Helper()
	dir := filepath.Join(e.in, "split")
	if err := os.CopyFS(dir, os.DirFS(e.fx.split)); err != nil {
		e.t.Fatal(err)
	}
	part := func(n int) string { return filepath.Join(dir, fmt.Sprintf("m-%05d-of-00004.gguf", n)) }
	edit(part)
	return part(1)
}

// catGGUF holds a GGUF file's header and tensor data for an edit.
type catGGUF struct {
	h    *gguf.Header
	data map[string][]byte
}

func (g *catGGUF) set(key string, v any) {
	for i := range g.h.KVs {
		if g.h.KVs[i].Key == key {
			g.h.KVs[i].Value = v
			return
		}
	}
	g.h.KVs = append(g.h.KVs, gguf.KV{Key: key, Value: v})
}

func (g *catGGUF) del(key string) {
	for i := range g.h.KVs {
		if g.h.KVs[i].Key == key {
			g.h.KVs = append(g.h.KVs[:i], g.h.KVs[i+1:]...)
			return
		}
	}
}

func (g *catGGUF) get(key string) any {
	for _, kv := range g.h.KVs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// drop removes a tensor.
func (g *catGGUF) drop(name string) {
	for i := range g.h.Tensors {
		if g.h.Tensors[i].Name == name {
			g.h.Tensors = append(g.h.Tensors[:i], g.h.Tensors[i+1:]...)
			return
		}
	}
}

// tensor returns a tensor's info to edit (its data is resized to fit when written).
func (g *catGGUF) tensor(name string) *gguf.TensorInfo {
	for i := range g.h.Tensors {
		if g.h.Tensors[i].Name == name {
			return &g.h.Tensors[i]
		}
	}
	panic("no tensor " + name)
}

// rewrite writes a copy of the GGUF file src named name, its header and data changed by edit,
// with gquant's GGUF writer (so that the file is well formed and only the edit is wrong).
// Tensor data of a changed size is cut or padded with zeros.
func (e *catEnv) rewrite(src, name string, edit func(g *catGGUF)) string {
	e.t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	g := &catGGUF{h: &gguf.Header{Alignment: f.Alignment}, data: map[string][]byte{}}
	g.h.KVs = append(g.h.KVs, f.KVs...)
	for i, ti := range f.Tensors {
		g.h.Tensors = append(g.h.Tensors, gguf.TensorInfo{Name: ti.Name, Type: ti.Type, Shape: append([]uint64(nil), ti.Shape...)})
		g.data[ti.Name] = append([]byte(nil), f.TensorData(i)...)
	}
	edit(g)
	path := e.p(name)
	w, err := gguf.Create(path, g.h)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, ti := range g.h.Tensors {
		d := g.data[ti.Name]
		buf := make([]byte, ti.Size)
		copy(buf, d)
		if err := w.WriteTensor(i, buf); err != nil {
			w.Abort()
			e.t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// catTypeOffset returns where the type id of a named tensor's info lies in a GGUF file.
func catTypeOffset(t *testing.T, b []byte, name string) int {
	t.Helper()
	key := binary.LittleEndian.AppendUint64(nil, uint64(len(name)))
	key = append(key, name...)
	i := bytes.Index(b, key)
	if i < 0 {
		t.Fatalf("tensor %s not found", name)
	}
	off := i + len(key)
	nd := int(binary.LittleEndian.Uint32(b[off:]))
	return off + 4 + 8*nd
}

// catGarbage is n deterministic random bytes.
func catGarbage(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// catTruncate cuts a file to n bytes, catHalf to half its length.
func catTruncate(n int) func(b []byte) []byte { return func(b []byte) []byte { return b[:n] } }
func catHalf(b []byte) []byte                 { return b[:len(b)/2] }

// catPutU32 and catPutU64 overwrite a little-endian field at off.
func catPutU32(off int, v uint32) func(b []byte) []byte {
	return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
}

func catPutU64(off int, v uint64) func(b []byte) []byte {
	return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], v); return b }
}

// catReplace replaces the first old by new in a text file's bytes, which must contain it.
func catReplace(old, new string) func(b []byte) []byte {
	return func(b []byte) []byte {
		if !bytes.Contains(b, []byte(old)) {
			panic(fmt.Sprintf("%q not found", old))
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
}

// Arguments that keep the runs of the verbs short.
var (
	catCalibShort  = []string{"--tokens", "128", "--ctx", "32"}
	catVerifyShort = []string{"--ctx", "64", "--chunks", "2", "--gen", "2"}
)

// catArgs joins argument lists.
func catArgs(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// catConvertQ8 is the command line of a conversion of dir into the case's output folder.
func catConvertQ8(e *catEnv, dir string) []string {
	return []string{"convert", dir, "--scheme", "q8_0", "-o", e.o("m.gguf")}
}

// catalogue lists the cases, by verb and input kind.
func catalogue() []catCase {
	conv := func(name, want string, build func(e *catEnv) string, known ...string) catCase {
		c := catCase{name: "convert/" + name, code: exitError, want: want,
			args: func(e *catEnv) []string { return catConvertQ8(e, build(e)) }}
		if len(known) > 0 {
			c.known = known[0]
		}
		return c
	}
	cs := []catCase{
		// config.json: dimensions
		conv("config/num_hidden_layers-huge", "config.json: num_hidden_layers: 10000000, but model.safetensors holds 5 layers",
			func(e *catEnv) string { return e.config("num_hidden_layers", 10000000) }),
		conv("config/num_hidden_layers-negative", "config.json: num_hidden_layers: want a non-negative integer, got -1",
			func(e *catEnv) string { return e.config("num_hidden_layers", -1) }),
		conv("config/num_hidden_layers-zero", "config.json: num_hidden_layers: must be positive, got 0",
			func(e *catEnv) string { return e.config("num_hidden_layers", 0) }),
		conv("config/num_hidden_layers-fewer", "config.json: num_hidden_layers: 4, but model.safetensors holds 5 layers",
			func(e *catEnv) string { return e.config("num_hidden_layers", 4) }),
		conv("config/num_hidden_layers-NaN", "config.json: not valid JSON: invalid character 'N' looking for beginning of value",
			func(e *catEnv) string { return e.configRaw("num_hidden_layers", "NaN") }),
		conv("config/num_hidden_layers-string", "config.json: num_hidden_layers",
			func(e *catEnv) string { return e.config("num_hidden_layers", "5") }),
		conv("config/num_hidden_layers-fraction", "config.json: num_hidden_layers",
			func(e *catEnv) string { return e.config("num_hidden_layers", 5.5) }),
		conv("config/num_hidden_layers-missing", "config.json: num_hidden_layers",
			func(e *catEnv) string { return e.config("num_hidden_layers", nil) }),
		conv("config/vocab_size-huge", "config.json: vocab_size: 1099511627776, but model.embed_tokens.weight has 512 rows",
			func(e *catEnv) string { return e.config("vocab_size", 1<<40) }),
		conv("config/vocab_size-negative", "config.json: vocab_size: want a non-negative integer, got -512",
			func(e *catEnv) string { return e.config("vocab_size", -512) }),
		conv("config/vocab_size-string", "config.json: vocab_size",
			func(e *catEnv) string { return e.config("vocab_size", "512") }),
		conv("config/vocab_size-smaller", "config.json: vocab_size: 256, but model.embed_tokens.weight has 512 rows",
			func(e *catEnv) string { return e.config("vocab_size", 256) }),
		conv("config/hidden_size-zero", "config.json: hidden_size: must be positive, got 0",
			func(e *catEnv) string { return e.config("hidden_size", 0) }),
		conv("config/hidden_size-huge", "config.json: hidden_size: 1073741824, but model.embed_tokens.weight has 64 columns",
			func(e *catEnv) string { return e.config("hidden_size", 1<<30) }),
		conv("config/hidden_size-1e300", "config.json: hidden_size",
			func(e *catEnv) string { return e.config("hidden_size", 1e300) }),
		conv("config/num_attention_heads-zero", "config.json: num_attention_heads: must be positive, got 0",
			func(e *catEnv) string { return e.config("num_attention_heads", 0) }),
		conv("config/num_attention_heads-not-multiple", "config.json: num_attention_heads: 6 is not a multiple of num_key_value_heads 4",
			func(e *catEnv) string { return e.config("num_attention_heads", 6) }),
		conv("config/num_attention_heads-huge", "config.json: num_attention_heads",
			func(e *catEnv) string { return e.config("num_attention_heads", 1<<40) }),
		conv("config/num_key_value_heads-negative", "config.json: num_key_value_heads: want a non-negative integer, got -4",
			func(e *catEnv) string { return e.config("num_key_value_heads", -4) }),
		conv("config/num_key_value_heads-wrong", "config.json: num_key_value_heads × head_dim: 2 × 8, but model.layers.0.self_attn.k_proj.weight has 32 rows",
			func(e *catEnv) string { return e.config("num_key_value_heads", 2) }),
		conv("config/head_dim-odd", "config.json: head_dim: 7 is odd",
			func(e *catEnv) string { return e.config("head_dim", 7) }),
		conv("config/head_dim-huge", "config.json: num_attention_heads × head_dim",
			func(e *catEnv) string { return e.config("head_dim", 1<<40) }),
		conv("config/intermediate_size-wrong", "config.json: intermediate_size: 100, but model.layers.0.mlp.gate_proj.weight has 172 rows",
			func(e *catEnv) string { return e.config("intermediate_size", 100) }),
		// config.json: floats
		conv("config/rope_theta-zero", "config.json: rope_theta: must be greater than 0, got 0",
			func(e *catEnv) string { return e.config("rope_theta", 0) }),
		conv("config/rope_theta-negative", "config.json: rope_theta: must be greater than 0, got -10000",
			func(e *catEnv) string { return e.config("rope_theta", -10000) }),
		conv("config/rope_theta-1e300", "config.json: rope_theta: 1e+300 is out of float32's range",
			func(e *catEnv) string { return e.config("rope_theta", 1e300) }),
		conv("config/rope_theta-string", "config.json: rope_theta",
			func(e *catEnv) string { return e.config("rope_theta", "10000") }),
		conv("config/rope_theta-NaN", "config.json: not valid JSON: invalid character 'N' looking for beginning of value",
			func(e *catEnv) string { return e.configRaw("rope_theta", "NaN") }),
		conv("config/rms_norm_eps-zero", "config.json: rms_norm_eps: must be greater than 0, got 0",
			func(e *catEnv) string { return e.config("rms_norm_eps", 0) }),
		conv("config/rms_norm_eps-one", "config.json: rms_norm_eps: must be below 1, got 2",
			func(e *catEnv) string { return e.config("rms_norm_eps", 2) }),
		conv("config/rms_norm_eps-underflow", "config.json: rms_norm_eps: 1e-50 rounds to 0 in float32",
			func(e *catEnv) string { return e.config("rms_norm_eps", 1e-50) }),
		conv("config/rms_norm_eps-Infinity", "config.json: not valid JSON: invalid character 'I' looking for beginning of value",
			func(e *catEnv) string { return e.configRaw("rms_norm_eps", "Infinity") }),
		conv("config/rms_norm_eps-string", "config.json: rms_norm_eps: want a number, got string",
			func(e *catEnv) string { return e.config("rms_norm_eps", "1e-5") }),
		conv("config/max_position_embeddings-zero", "config.json: max_position_embeddings: must be in [1, 2147483647], got 0",
			func(e *catEnv) string { return e.config("max_position_embeddings", 0) }),
		conv("config/max_position_embeddings-huge", "config.json: max_position_embeddings: must be in [1, 2147483647], got 1099511627776",
			func(e *catEnv) string { return e.config("max_position_embeddings", 1<<40) }),
		conv("config/max_position_embeddings-negative", "config.json: max_position_embeddings: want a non-negative integer, got -5",
			func(e *catEnv) string { return e.config("max_position_embeddings", -5) }),
		// config.json: rope_scaling
		conv("config/rope_scaling-string", "config.json: rope_scaling: want an object, got linear",
			func(e *catEnv) string { return e.config("rope_scaling", "linear") }),
		conv("config/rope_scaling-no-type", "config.json: rope_scaling: a factor without rope_type (or type)",
			func(e *catEnv) string { return e.config("rope_scaling", map[string]any{"factor": 8.0}) }),
		conv("config/rope_scaling-unknown-type", "config.json: rope_scaling",
			func(e *catEnv) string {
				return e.config("rope_scaling", map[string]any{"rope_type": "ntk-by-parts-v9", "factor": 2.0})
			}),
		conv("config/rope_scaling-factor-zero", "config.json: rope_scaling.factor: must be greater than 0, got 0",
			func(e *catEnv) string {
				return e.config("rope_scaling", map[string]any{"rope_type": "llama3", "factor": 0.0, "low_freq_factor": 1.0,
					"high_freq_factor": 4.0, "original_max_position_embeddings": 256})
			}),
		conv("config/rope_scaling-factor-negative", "config.json: rope_scaling.factor: must be greater than 0, got -8",
			func(e *catEnv) string {
				return e.config("rope_scaling", map[string]any{"rope_type": "linear", "factor": -8.0})
			}),
		conv("config/rope_scaling-high-below-low", "config.json: rope_scaling.high_freq_factor: 1 must be greater than the low frequency factor 4",
			func(e *catEnv) string {
				return e.config("rope_scaling", map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
					"high_freq_factor": 1.0, "original_max_position_embeddings": 256})
			}),
		conv("config/rope_scaling-original-context-zero", "config.json: rope_scaling.original_max_position_embeddings: must be in [1, 2147483647], got 0",
			func(e *catEnv) string {
				return e.config("rope_scaling", map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
					"high_freq_factor": 4.0, "original_max_position_embeddings": 0})
			}),
		conv("config/rope_scaling-yarn-beta-zero", "config.json: rope_scaling.beta_fast: must be greater than 0, got 0",
			func(e *catEnv) string {
				return e.config("rope_scaling", map[string]any{"rope_type": "yarn", "factor": 4.0, "beta_fast": 0.0, "beta_slow": 1.0,
					"original_max_position_embeddings": 128})
			}),
		conv("config/rope_scaling-NaN-factor", "config.json: not valid JSON: invalid character 'N' looking for beginning of value",
			func(e *catEnv) string {
				return e.configRaw("rope_scaling", `{"rope_type": "linear", "factor": NaN}`)
			}),
		// config.json: the file itself
		conv("config/architectures-string", "config.json: architectures",
			func(e *catEnv) string { return e.config("architectures", "LlamaForCausalLM") }),
		conv("config/empty-file", "config.json: not valid JSON: EOF",
			func(e *catEnv) string { return e.modelFile("config.json", []byte{}) }),
		conv("config/json-array", "config.json: is a list, want a JSON object",
			func(e *catEnv) string { return e.modelFile("config.json", []byte(`[1, 2, 3]`)) }),
		conv("config/binary", "config.json: not valid JSON: invalid character",
			func(e *catEnv) string { return e.modelFile("config.json", catGarbage(600)) }),
		conv("config/hidden_act-gelu", "config.json: hidden_act: gelu is not supported (the llama family runs silu)",
			func(e *catEnv) string { return e.config("hidden_act", "gelu") }),
		conv("config/attention_bias-true", "config.json: attention_bias: true is not supported for llama",
			func(e *catEnv) string { return e.config("attention_bias", true) }),
		conv("config/mlp_bias-true", "config.json: mlp_bias: true is not supported for llama",
			func(e *catEnv) string { return e.config("mlp_bias", true) }),
		conv("config/architectures-number-entry", "config.json: architectures: entry 1 is a number, want a class name",
			func(e *catEnv) string { return e.config("architectures", []any{"LlamaForCausalLM", 5}) }),
		conv("config/architectures-unknown", `config.json: architectures: unsupported architecture "BertForMaskedLM"`,
			func(e *catEnv) string { return e.config("architectures", []any{"BertForMaskedLM"}) }),
		conv("generation_config/binary", "generation_config.json: not valid JSON",
			func(e *catEnv) string { return e.modelFile("generation_config.json", catGarbage(100)) }),
		conv("tokenizer_config/not-json", "tokenizer_config.json: invalid character 'n' looking for beginning of object key string",
			func(e *catEnv) string { return e.modelFile("tokenizer_config.json", []byte("{not json")) }),
		conv("config/tie_word_embeddings-string", "config.json: tie_word_embeddings",
			func(e *catEnv) string { return e.config("tie_word_embeddings", "yes") }),
		conv("config/missing", "config.json: missing",
			func(e *catEnv) string { return e.modelFile("config.json", nil) }),

		// model.safetensors
		conv("safetensors/truncated", "model.safetensors: model.layers.2.mlp.gate_proj.weight: data_offsets [271872, 293888] run past the end of the data section",
			func(e *catEnv) string { return e.modelPatch(stories260k, "model.safetensors", catHalf) }),
		conv("safetensors/truncated-in-header", "model.safetensors: header length 4968 runs past the end of the file (100 bytes)",
			func(e *catEnv) string { return e.modelPatch(stories260k, "model.safetensors", catTruncate(100)) }),
		conv("safetensors/garbage", "model.safetensors: header length 7097813307239017862 runs past the end of the file (4096 bytes)",
			func(e *catEnv) string { return e.modelFile("model.safetensors", catGarbage(4096)) }),
		conv("safetensors/empty", "model.safetensors: file is 0 bytes, too short for the 8-byte header length",
			func(e *catEnv) string { return e.modelFile("model.safetensors", []byte{}) }),
		conv("safetensors/header-length-huge", "model.safetensors: header length",
			func(e *catEnv) string { return e.modelPatch(stories260k, "model.safetensors", catPutU64(0, 1<<62)) }),
		conv("safetensors/header-not-json", "model.safetensors: header: not valid JSON",
			func(e *catEnv) string {
				return e.modelPatch(stories260k, "model.safetensors", func(b []byte) []byte { b[8] = '['; return b })
			}),
		conv("safetensors/tensor-missing", "model.norm.weight",
			func(e *catEnv) string {
				return e.modelPatch(stories260k, "model.safetensors", catReplace(`"model.norm.weight"`, `"model.norm.weigh_"`))
			}),
		conv("safetensors/dtype-unsupported", "model.safetensors: model.norm.weight: unsupported dtype",
			func(e *catEnv) string {
				return e.modelPatch(stories260k, "model.safetensors", func(b []byte) []byte {
					return catRenameDType(b, "model.norm.weight", "BOOL")
				})
			}),

		// sharded checkpoints: model.safetensors.index.json
		conv("index/not-json", "model.safetensors.index.json: not valid JSON: unexpected end of JSON input",
			func(e *catEnv) string {
				return e.modelPatch(e.fx.sharded, "model.safetensors.index.json", func([]byte) []byte { return []byte("{\"weight_map\": ") })
			}),
		conv("index/empty", "model.safetensors.index.json: not valid JSON: unexpected end of JSON input",
			func(e *catEnv) string {
				return e.modelPatch(e.fx.sharded, "model.safetensors.index.json", func([]byte) []byte { return nil })
			}),
		conv("index/weight_map-missing", "model.safetensors.index.json: weight_map",
			func(e *catEnv) string {
				return e.editJSON(e.fx.sharded, "model.safetensors.index.json", func(v map[string]any) { delete(v, "weight_map") })
			}),
		conv("index/shard-missing", "model.safetensors.index.json: model-00009-of-00009.safetensors: shard file not found",
			func(e *catEnv) string {
				return e.editJSON(e.fx.sharded, "model.safetensors.index.json", func(v map[string]any) {
					v["weight_map"].(map[string]any)["model.norm.weight"] = "model-00009-of-00009.safetensors"
				})
			}),
		conv("index/shard-outside-folder", "model.safetensors.index.json: ../../../../etc/passwd: shard path leaves the checkpoint directory",
			func(e *catEnv) string {
				return e.editJSON(e.fx.sharded, "model.safetensors.index.json", func(v map[string]any) {
					v["weight_map"].(map[string]any)["model.norm.weight"] = "../../../../etc/passwd"
				})
			}),
		conv("index/tensor-not-in-shard", "model.safetensors.index.json: model.layers.9.mlp.up_proj.weight",
			func(e *catEnv) string {
				return e.editJSON(e.fx.sharded, "model.safetensors.index.json", func(v map[string]any) {
					wm := v["weight_map"].(map[string]any)
					wm["model.layers.9.mlp.up_proj.weight"] = wm["model.norm.weight"]
				})
			}),
		conv("index/weight_map-list", "model.safetensors.index.json: weight_map: is an array, want a JSON object",
			func(e *catEnv) string {
				return e.editJSON(e.fx.sharded, "model.safetensors.index.json", func(v map[string]any) { v["weight_map"] = []any{1, 2} })
			}),

		// tokenizer.json
		conv("tokenizer/missing", "tokenizer.json: missing",
			func(e *catEnv) string { return e.modelFile("tokenizer.json", nil) }),
		conv("tokenizer/not-json", "tokenizer.json: unexpected end of JSON input",
			func(e *catEnv) string { return e.modelFile("tokenizer.json", []byte(`{"model": {"type": "BPE",`)) }),
		conv("tokenizer/empty", "tokenizer.json: unexpected end of JSON input",
			func(e *catEnv) string { return e.modelFile("tokenizer.json", []byte{}) }),
		conv("tokenizer/binary", "tokenizer.json: invalid character",
			func(e *catEnv) string { return e.modelFile("tokenizer.json", catGarbage(2000)) }),
		conv("tokenizer/model-type-unknown", "tokenizer.json: model.type",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) { v["model"].(map[string]any)["type"] = "WordPiece9" })
			}),
		conv("tokenizer/model-missing", "tokenizer.json: model",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) { delete(v, "model") })
			}),
		conv("tokenizer/vocab-empty", "tokenizer.json: model.unk_token: \"<unk>\" is not in the vocabulary",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) { v["model"].(map[string]any)["vocab"] = map[string]any{} })
			}),
		conv("tokenizer/vocab-id-beyond-model", "vocab_size: 512 is smaller than the tokenizer's 100001 tokens",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) {
					v["model"].(map[string]any)["vocab"].(map[string]any)["zzzz"] = 100000
				})
			}),
		conv("tokenizer/vocab-negative-id", "tokenizer.json: model.vocab: id -3 is out of range",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) {
					v["model"].(map[string]any)["vocab"].(map[string]any)["zzzz"] = -3
				})
			}),
		conv("tokenizer/merge-unknown-token", "tokenizer.json: model.merges: merges with tokens missing from the vocabulary",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) {
					m := v["model"].(map[string]any)
					m["merges"] = append(m["merges"].([]any), "qqq\u2603 xyz\u2603")
				})
			}),
		conv("tokenizer/merges-not-list", "tokenizer.json: model.merges: merges are neither strings nor pairs of strings",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) { v["model"].(map[string]any)["merges"] = 7 })
			}),
		conv("tokenizer/added-token-id-beyond", "tokenizer.json: added_tokens: id 1099511627776 is out of range",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) {
					v["added_tokens"] = append(v["added_tokens"].([]any), map[string]any{"id": 1 << 40, "content": "<big>", "special": true})
				})
			}),
		conv("tokenizer/normalizer-unknown", "tokenizer.json: normalizer",
			func(e *catEnv) string {
				return e.editJSON(stories260k, "tokenizer.json", func(v map[string]any) { v["normalizer"] = map[string]any{"type": "Frobnicate"} })
			}),
	}

	// The same broken folders through the other verbs that read a model.
	cs = append(cs,
		catCase{name: "run/config/num_hidden_layers-huge", code: exitError, want: "config.json: num_hidden_layers: 10000000",
			args: func(e *catEnv) []string {
				return []string{"run", e.config("num_hidden_layers", 10000000), "Once", "-n", "2"}
			}},
		catCase{name: "run/config/vocab_size-huge", code: exitError, want: "config.json: vocab_size: 1099511627776",
			args: func(e *catEnv) []string { return []string{"run", e.config("vocab_size", 1<<40), "Once", "-n", "2"} }},
		catCase{name: "run/safetensors/truncated", code: exitError, want: "model.safetensors: model.layers.2.mlp.gate_proj.weight: data_offsets [271872, 293888] run past the end of the data section",
			args: func(e *catEnv) []string {
				return []string{"run", e.modelPatch(stories260k, "model.safetensors", catHalf), "Once", "-n", "2"}
			}},
		catCase{name: "run/tokenizer/missing", code: exitError, want: "tokenizer.json: missing",
			args: func(e *catEnv) []string {
				return []string{"run", e.modelFile("tokenizer.json", nil), "Once", "-n", "2"}
			}},
		catCase{name: "bench/config/hidden_size-huge", code: exitError, want: "config.json: hidden_size: 1073741824",
			args: func(e *catEnv) []string {
				return []string{"bench", e.config("hidden_size", 1<<30), "-p", "8", "-n", "2", "-r", "1", "--json", e.o("b.json")}
			}},
		catCase{name: "bench/config/rope_theta-NaN", code: exitError, want: "config.json: not valid JSON: invalid character 'N' looking for beginning of value",
			args: func(e *catEnv) []string {
				return []string{"bench", e.configRaw("rope_theta", "NaN"), "-p", "8", "-n", "2", "-r", "1", "--json", e.o("b.json")}
			}},
		catCase{name: "calibrate/config/max_position_embeddings-zero", code: exitError, want: "config.json: max_position_embeddings: must be in [1, 2147483647], got 0",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", e.config("max_position_embeddings", 0), "--corpus", calibCorpus, "-o", e.o("s.gguf")}, catCalibShort)
			}},
		catCase{name: "calibrate/safetensors/garbage", code: exitError, want: "model.safetensors: header length 7097813307239017862 runs past the end of the file (4096 bytes)",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", e.modelFile("model.safetensors", catGarbage(4096)), "--corpus", calibCorpus, "-o", e.o("s.gguf")}, catCalibShort)
			}},
		catCase{name: "calibrate/tokenizer/not-json", code: exitError, want: "tokenizer.json: unexpected end of JSON input",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", e.modelFile("tokenizer.json", []byte("{")), "--corpus", calibCorpus, "--imatrix", e.o("i.gguf")}, catCalibShort)
			}},
		catCase{name: "verify/ref/config/num_key_value_heads-wrong", code: exitError, want: "config.json: num_key_value_heads",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", e.config("num_key_value_heads", 2), "--corpus", evalCorpus, "--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "verify/ref/safetensors/truncated", code: exitError, want: "model.safetensors: model.layers.2.mlp.gate_proj.weight: data_offsets [271872, 293888] run past the end of the data section",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", e.modelPatch(stories260k, "model.safetensors", catHalf), "--corpus", evalCorpus,
					"--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "convert-gqf/config/num_hidden_layers-huge", code: exitError, want: "config.json: num_hidden_layers: 10000000",
			args: func(e *catEnv) []string {
				return []string{"convert", e.config("num_hidden_layers", 10000000), "--format", "gqf", "--scheme", "f16", "-o", e.o("m.gqf")}
			}},
		catCase{name: "convert-gqf/tokenizer/missing", code: exitError, want: "tokenizer.json: missing",
			args: func(e *catEnv) []string {
				return []string{"convert", e.modelFile("tokenizer.json", nil), "--format", "gqf", "--scheme", "f16", "-o", e.o("m.gqf")}
			}},
		catCase{name: "inspect/folder/safetensors-truncated", code: exitError, want: "model.safetensors: model.layers.2.mlp.gate_proj.weight: data_offsets [271872, 293888] run past the end of the data section",
			args: func(e *catEnv) []string {
				return []string{"inspect", e.modelPatch(stories260k, "model.safetensors", catHalf)}
			}},
		catCase{name: "inspect/folder/no-safetensors", code: exitError, want: "stories260k: no *.safetensors files",
			args: func(e *catEnv) []string { return []string{"inspect", e.modelFile("model.safetensors", nil)} }},
		catCase{name: "run/model-is-text", code: exitError, want: "tinystories-eval.txt: not a model",
			args: func(e *catEnv) []string { return []string{"run", evalCorpus, "Once", "-n", "2"} }},
		catCase{name: "run/model-missing", code: exitError, want: "nope.gguf: no such file or directory",
			args: func(e *catEnv) []string { return []string{"run", e.p("nope.gguf"), "Once", "-n", "2"} }},
		catCase{name: "run/config/hidden_act-gelu", code: exitError, want: "config.json: hidden_act: gelu is not supported",
			args: func(e *catEnv) []string { return []string{"run", e.config("hidden_act", "gelu"), "Once", "-n", "2"} }},
		catCase{name: "inspect/safetensors/truncated", code: exitError, want: "bad.safetensors: header length 4968 runs past the end of the file (2000 bytes)",
			args: func(e *catEnv) []string {
				return []string{"inspect", e.patch(filepath.Join(stories260k, "model.safetensors"), "bad.safetensors", catTruncate(2000))}
			}},
	)

	// GGUF model files.
	ggufRun := func(name, want string, build func(e *catEnv) string, known ...string) catCase {
		c := catCase{name: "run/gguf/" + name, code: exitError, want: want,
			args: func(e *catEnv) []string { return []string{"run", build(e), "Once", "-n", "2"} }}
		if len(known) > 0 {
			c.known = known[0]
		}
		return c
	}
	cs = append(cs,
		ggufRun("bad-magic", `bad.gguf: header: bad magic "GGUX"`,
			func(e *catEnv) string { return e.patch(e.fx.q8, "bad.gguf", catReplace("GGUF", "GGUX")) }),
		ggufRun("version-1", "bad.gguf: header: GGUF version 1 is no longer supported",
			func(e *catEnv) string { return e.patch(e.fx.q8, "bad.gguf", catPutU32(4, 1)) }),
		ggufRun("version-4", "bad.gguf: header: GGUF version 4 is newer than the supported 3",
			func(e *catEnv) string { return e.patch(e.fx.q8, "bad.gguf", catPutU32(4, 4)) }),
		ggufRun("truncated-half", "bad.gguf: blk.…: … bytes of data at offset … lie past the end of the file",
			func(e *catEnv) string { return e.patch(e.fx.q8, "bad.gguf", catHalf) }),
		ggufRun("truncated-in-metadata", "bad.gguf: header: tensor count 47 is impossible in a file of 300 bytes",
			func(e *catEnv) string { return e.patch(e.fx.q8, "bad.gguf", catTruncate(300)) }),
		ggufRun("empty", "bad.gguf: header: file is empty",
			func(e *catEnv) string { return e.write("bad.gguf", nil) }),
		ggufRun("tensor-count-huge", "bad.gguf: header: tensor count 1099511627776 is impossible",
			func(e *catEnv) string { return e.patch(e.fx.q8, "bad.gguf", catPutU64(8, 1<<40)) }),
		ggufRun("metadata-count-huge", "bad.gguf: header: metadata count 1152921504606846976 is impossible",
			func(e *catEnv) string { return e.patch(e.fx.q8, "bad.gguf", catPutU64(16, 1<<60)) }),
		ggufRun("tensor-type-unknown", "bad.gguf: blk.0.attn_q.weight: unknown tensor type 99",
			func(e *catEnv) string {
				return e.patch(e.fx.q8, "bad.gguf", func(b []byte) []byte {
					return catPutU32(catTypeOffset(e.t, b, "blk.0.attn_q.weight"), 99)(b)
				})
			}),
		ggufRun("block_count-more", "bad.gguf: llama.block_count: 7, but the file holds 5 layers",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.block_count", uint32(7)) })
			}),
		ggufRun("block_count-huge", "bad.gguf: llama.block_count: 4294967295, but the file holds 5 layers",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.block_count", uint32(0xFFFFFFFF)) })
			}),
		ggufRun("block_count-fewer", "bad.gguf: llama.block_count: 3, but the file holds 5 layers",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.block_count", uint32(3)) })
			}),
		ggufRun("block_count-float", "bad.gguf: llama.block_count",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.block_count", float32(5)) })
			}),
		ggufRun("block_count-missing", "bad.gguf: llama.block_count",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.del("llama.block_count") })
			}),
		ggufRun("embedding_length-wrong", "bad.gguf: llama.embedding_length: 128, but token_embd.weight has 64 columns",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.embedding_length", uint32(128)) })
			}),
		ggufRun("head_count-zero", "bad.gguf: llama.attention.head_count: must be positive, got 0",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.attention.head_count", uint32(0)) })
			}),
		ggufRun("context_length-zero", "bad.gguf: llama.context_length: must be in [1, 2147483647], got 0",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.context_length", uint32(0)) })
			}),
		ggufRun("freq_base-NaN", "bad.gguf: llama.rope.freq_base: must be finite, got NaN",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.rope.freq_base", float32(catNaN())) })
			}),
		ggufRun("rms_epsilon-negative", "bad.gguf: llama.attention.layer_norm_rms_epsilon: must be greater than 0, got -",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) {
					g.set("llama.attention.layer_norm_rms_epsilon", float32(-1e-5))
				})
			}),
		ggufRun("architecture-unsupported", `bad.gguf: general.architecture: unsupported architecture "bert"`,
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("general.architecture", "bert") })
			}),
		ggufRun("architecture-missing", "bad.gguf: general.architecture",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.del("general.architecture") })
			}),
		ggufRun("tensor-missing", "bad.gguf: blk.4.ffn_down.weight",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.drop("blk.4.ffn_down.weight") })
			}),
		ggufRun("output_norm-missing", "bad.gguf: output_norm.weight",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.drop("output_norm.weight") })
			}),
		ggufRun("tensor-unexpected", "bad.gguf: blk.0.ffn_gate_exps.weight: unexpected tensor",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) {
					g.h.Tensors = append(g.h.Tensors, gguf.TensorInfo{Name: "blk.0.ffn_gate_exps.weight", Type: gguf.F32, Shape: []uint64{4}})
				})
			}),
		ggufRun("tensor-shape-wrong", "bad.gguf: llama.attention.head_count × llama.attention.key_length: 8 × 8, but blk.0.attn_q.weight has 32 rows",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.tensor("blk.0.attn_q.weight").Shape = []uint64{64, 32} })
			}),
		ggufRun("tensor-type-integer", "bad.gguf: blk.0.attn_q.weight",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.tensor("blk.0.attn_q.weight").Type = gguf.I32 })
			}),
		ggufRun("norm-type-integer", "bad.gguf: blk.0.attn_norm.weight: no codec for tensor type I16",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.tensor("blk.0.attn_norm.weight").Type = gguf.I16 })
			}),
		ggufRun("embd-type-F64", "bad.gguf: token_embd.weight: no codec for tensor type F64",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.tensor("token_embd.weight").Type = gguf.F64 })
			}),
		ggufRun("tokens-missing", "bad.gguf: tokenizer.ggml.tokens",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.del("tokenizer.ggml.tokens") })
			}),
		ggufRun("tokens-fewer", "bad.gguf: llama.vocab_size: 512, but tokenizer.ggml.tokens has 100 tokens",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) {
					toks := g.get("tokenizer.ggml.tokens").([]string)
					g.set("tokenizer.ggml.tokens", toks[:100])
				})
			}),
		ggufRun("tokenizer-model-unknown", "bad.gguf: tokenizer.ggml.model",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("tokenizer.ggml.model", "sentencepiece9") })
			}),
		ggufRun("bos-out-of-range", "bad.gguf: tokenizer.ggml.bos_token_id",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("tokenizer.ggml.bos_token_id", uint32(1<<30)) })
			}),
		ggufRun("scores-wrong-length", "bad.gguf: tokenizer.ggml.scores",
			func(e *catEnv) string {
				return e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("tokenizer.ggml.scores", []float32{1, 2, 3}) })
			}),
		catCase{name: "bench/gguf/truncated", code: exitError, want: "bad.gguf: blk.…: … bytes of data at offset … lie past the end of the file (200000 bytes)",
			args: func(e *catEnv) []string {
				return []string{"bench", e.patch(e.fx.q8, "bad.gguf", catTruncate(200000)), "-p", "8", "-n", "2", "-r", "1"}
			}},
		catCase{name: "bench/gguf/block_count-huge", code: exitError, want: "bad.gguf: llama.block_count: 4294967295",
			args: func(e *catEnv) []string {
				return []string{"bench", e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.block_count", uint32(0xFFFFFFFF)) }),
					"-p", "8", "-n", "2", "-r", "1", "--json", e.o("b.json")}
			}},
		catCase{name: "inspect/gguf/bad-magic", code: exitError, want: `bad.gguf: header: bad magic "GGUX"`,
			args: func(e *catEnv) []string {
				return []string{"inspect", e.patch(e.fx.q8, "bad.gguf", catReplace("GGUF", "GGUX")), "--json", e.o("i.json")}
			}},
		catCase{name: "inspect/gguf/truncated", code: exitError, want: "bad.gguf: header: tensor count 47 is impossible in a file of 1000 bytes",
			args: func(e *catEnv) []string {
				return []string{"inspect", e.patch(e.fx.q8, "bad.gguf", catTruncate(1000)), "--json", e.o("i.json")}
			}},
		catCase{name: "inspect/gguf/tensor-count-huge", code: exitError, want: "bad.gguf: header: tensor count",
			args: func(e *catEnv) []string {
				return []string{"inspect", e.patch(e.fx.q8, "bad.gguf", catPutU64(8, 1<<40))}
			}},
		catCase{name: "inspect/garbage", code: exitError, want: "junk.bin: not a GGUF, gqf or safetensors file",
			args: func(e *catEnv) []string { return []string{"inspect", e.write("junk.bin", catGarbage(3000))} }},
		catCase{name: "inspect/empty-file", code: exitError, want: "empty.gguf: header: file is empty",
			args: func(e *catEnv) []string { return []string{"inspect", e.write("empty.gguf", nil)} }},
		catCase{name: "verify/artifact/gguf-truncated", code: exitError, want: "bad.gguf: blk.…: … bytes of data at offset … lie past the end of the file",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.patch(e.fx.q8, "bad.gguf", catHalf), "--ref", stories260k, "--corpus", evalCorpus,
					"--json", e.o("r.json"), "--save-ref", e.o("ref.kld")}, catVerifyShort)
			}},
		catCase{name: "verify/artifact/gguf-tensor-missing", code: exitError, want: "bad.gguf: blk.2.attn_k.weight",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.drop("blk.2.attn_k.weight") }),
					"--ref", stories260k, "--corpus", evalCorpus, "--json", e.o("r.json"), "--plot", e.o("r.png")}, catVerifyShort)
			}},
		catCase{name: "verify/ref/other-vocabulary", code: exitError, want: "q8.gguf: vocabulary: 512 entries, the reference ",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", e.fx.wide, "--corpus", evalCorpus, "--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "verify/ref-logits/other-vocabulary", code: exitError, want: "ref.kld: n_vocab: 512, the artifact ",
			args: func(e *catEnv) []string {
				return []string{"verify", e.fx.wideQ8, "--ref-logits", e.fx.ref, "--gen", "2", "--json", e.o("r.json")}
			}},
		catCase{name: "verify/ref/gguf-bad-version", code: exitError, want: "ref.gguf: header: GGUF version 4",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", e.patch(e.fx.q8, "ref.gguf", catPutU32(4, 4)), "--corpus", evalCorpus,
					"--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "calibrate/gguf/block_count-more", code: exitError, want: "bad.gguf: llama.block_count: 7",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", e.rewrite(e.fx.q8, "bad.gguf", func(g *catGGUF) { g.set("llama.block_count", uint32(7)) }),
					"--corpus", calibCorpus, "-o", e.o("s.gguf")}, catCalibShort)
			}},
		catCase{name: "run/split/part-missing", code: exitError, want: "m-00003-of-00004.gguf: no such file or directory",
			args: func(e *catEnv) []string {
				return []string{"run", e.splitParts(func(part func(int) string) { os.Remove(part(3)) }), "Once", "-n", "2"}
			}},
		catCase{name: "run/split/part-truncated", code: exitError, want: "m-00003-of-00004.gguf: blk.",
			args: func(e *catEnv) []string {
				return []string{"run", e.splitParts(func(part func(int) string) { os.Truncate(part(3), 500000) }), "Once", "-n", "2"}
			}},
		catCase{name: "run/split/not-the-first-part", code: exitError, want: "m-00002-of-00004.gguf: split.no: is 1: open the first part of the 4",
			args: func(e *catEnv) []string {
				e.splitParts(func(func(int) string) {})
				return []string{"run", filepath.Join(e.in, "split", "m-00002-of-00004.gguf"), "Once", "-n", "2"}
			}},
		catCase{name: "bench/split/count-more", code: exitError, want: "m-00001-of-00004.gguf: split.count: file name of a first part must end in \"-00001-of-00005.gguf\"",
			args: func(e *catEnv) []string {
				return []string{"bench", e.splitParts(func(part func(int) string) {
					p := part(1)
					e.rewrite(p, "p1.gguf", func(g *catGGUF) { g.set("split.count", uint16(5)) })
					os.Rename(e.p("p1.gguf"), p)
				}), "-p", "8", "-n", "2", "-r", "1", "--json", e.o("b.json")}
			}},
		catCase{name: "bench/split/tensors-count-wrong", code: exitError, want: "m-00001-of-00004.gguf: split.tensors.count: is 40, but the 4 parts hold 39 tensors",
			args: func(e *catEnv) []string {
				return []string{"bench", e.splitParts(func(part func(int) string) {
					p := part(1)
					e.rewrite(p, "p1.gguf", func(g *catGGUF) { g.set("split.tensors.count", int32(40)) })
					os.Rename(e.p("p1.gguf"), p)
				}), "-p", "8", "-n", "2", "-r", "1"}
			}},
		catCase{name: "verify/artifact/split-part-missing", code: exitError, want: "m-00004-of-00004.gguf: no such file or directory",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.splitParts(func(part func(int) string) { os.Remove(part(4)) }), "--ref", stories3m,
					"--corpus", evalCorpus, "--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "convert/quantized-gguf-as-model", code: exitError, want: "q8.gguf: 31 tensors are not F32, F16 or BF16: blk.0.attn_k.weight (Q8_0)",
			args: func(e *catEnv) []string { return catConvertQ8(e, e.fx.q8) }},
	)

	// gqf files.
	cs = append(cs,
		catCase{name: "inspect/gqf/truncated", code: exitError, want: "bad.gqf: manifest: bytes […) do not lie after the data section inside the file",
			args: func(e *catEnv) []string { return []string{"inspect", e.patch(e.fx.gqf, "bad.gqf", catHalf)} }},
		catCase{name: "inspect/gqf/manifest-garbled", code: exitError, want: "bad.gqf: manifest: proto:",
			args: func(e *catEnv) []string { return []string{"inspect", e.patch(e.fx.gqf, "bad.gqf", catGarbleManifest)} }},
		catCase{name: "export/gqf/truncated", code: exitError, want: "bad.gqf: manifest: bytes […) do not lie after the data section inside the file (5000 bytes)",
			args: func(e *catEnv) []string {
				return []string{"export", e.patch(e.fx.gqf, "bad.gqf", catTruncate(5000)), "--to", "onnx", "-o", e.o("m.onnx")}
			}},
		catCase{name: "export/gqf/header-only", code: exitError, want: "bad.gqf: manifest: bytes […) do not lie after the data section inside the file (24 bytes)",
			args: func(e *catEnv) []string {
				return []string{"export", e.patch(e.fx.gqf, "bad.gqf", catTruncate(24)), "--to", "aimet-json", "-o", e.o("m.json")}
			}},
		catCase{name: "export/gqf/magic-only", code: exitError, want: "bad.gqf: header: 4 bytes, want at least 16 (truncated or not a gqf file)",
			args: func(e *catEnv) []string {
				return []string{"export", e.write("bad.gqf", []byte("GQF\x00")), "--to", "onnx", "-o", e.o("m.onnx")}
			}},
		catCase{name: "export/gqf/garbage", code: exitError, want: "bad.gqf: version: 3691359622 is not supported (want 1 or 2)",
			args: func(e *catEnv) []string {
				return []string{"export", e.write("bad.gqf", append([]byte("GQF\x00"), catGarbage(9000)...)), "--to", "onnx", "-o", e.o("m.onnx")}
			}},
		catCase{name: "export/gqf/version-9", code: exitError, want: "bad.gqf: version: 9 is not supported (want 1 or 2)",
			args: func(e *catEnv) []string {
				return []string{"export", e.patch(e.fx.gqf, "bad.gqf", catPutU32(4, 9)), "--to", "onnx", "-o", e.o("m.onnx")}
			}},
		catCase{name: "export/gqf/manifest-offset-past-end", code: exitError, want: "bad.gqf: manifest: bytes [1125899906842624, +…) do not lie after the data section inside the file",
			args: func(e *catEnv) []string {
				return []string{"export", e.patch(e.fx.gqf, "bad.gqf", catPutU64(8, 1<<50)), "--to", "onnx", "-o", e.o("m.onnx")}
			}},
		catCase{name: "export/gqf/manifest-length-huge", code: exitError, want: "bad.gqf: manifest: bytes […, +1099511627776) do not lie after the data section inside the file",
			args: func(e *catEnv) []string {
				return []string{"export", e.patch(e.fx.gqf, "bad.gqf", catPutU64(16, 1<<40)), "--to", "onnx", "-o", e.o("m.onnx")}
			}},
		catCase{name: "export/gqf/manifest-garbled", code: exitError, want: "bad.gqf: manifest: proto:",
			args: func(e *catEnv) []string {
				return []string{"export", e.patch(e.fx.gqf, "bad.gqf", catGarbleManifest), "--to", "onnx", "-o", e.o("m.onnx")}
			}},
		catCase{name: "export/gguf-not-gqf", code: exitError, want: "q8.gguf: magic: \"GGUF\", want \"GQF\\x00\" (not a gqf file)",
			args: func(e *catEnv) []string { return []string{"export", e.fx.q8, "--to", "onnx", "-o", e.o("m.onnx")} }},
		catCase{name: "export/qdq-without-encodings", code: exitError, want: "f16.gqf: scheme f16 has float activations: there is no QDQ form",
			args: func(e *catEnv) []string {
				return []string{"export", e.fx.gqf, "--to", "onnx", "--qdq", "-o", e.o("m.onnx")}
			}},
		catCase{name: "export/kv-ar-not-below-ctx", code: exitError, want: "f16.gqf: ctx: 32 must exceed ar 32 (the cache holds ctx−ar past positions)",
			args: func(e *catEnv) []string {
				return []string{"export", e.fx.gqf, "--to", "onnx-kv", "--ar", "32", "--ctx", "32", "-o", e.o("kv")}
			}},
		catCase{name: "export/kv-ctx-over-context", code: exitError, want: "f16.gqf: ctx: 100000 exceeds the model's context length",
			args: func(e *catEnv) []string {
				return []string{"export", e.fx.gqf, "--to", "onnx-kv", "--ar", "8", "--ctx", "100000", "-o", e.o("kv")}
			}},
		catCase{name: "export/kv-parts-over-layers", code: exitError, want: "f16.gqf: --parts 99: the model has 5 layers",
			args: func(e *catEnv) []string {
				return []string{"export", e.fx.gqf, "--to", "onnx-kv", "--ar", "8", "--ctx", "32", "--parts", "99", "-o", e.o("kv")}
			}},
		catCase{name: "export/kv-qdq-without-encodings", code: exitError, want: "f16.gqf: scheme f16 has float activations: there is no QDQ form",
			args: func(e *catEnv) []string {
				return []string{"export", e.fx.gqf, "--to", "onnx-kv", "--qdq", "--ar", "8", "--ctx", "32", "-o", e.o("kv")}
			}},
		catCase{name: "export/kv-aimet-ar-not-below-ctx", code: exitError, want: "f16.gqf: ctx: 8 must exceed ar 8",
			args: func(e *catEnv) []string {
				return []string{"export", e.fx.gqf, "--to", "aimet-json", "--ar", "8", "--ctx", "8", "-o", e.o("e.json")}
			}},
		catCase{name: "export/gqf/empty", code: exitError, want: "bad.gqf: header: 0 bytes, want at least 16 (truncated or not a gqf file)",
			args: func(e *catEnv) []string {
				return []string{"export", e.write("bad.gqf", nil), "--to", "onnx", "-o", e.o("m.onnx")}
			}},
		catCase{name: "inspect/gqf/version-9", code: exitError, want: "bad.gqf: version: 9 is not supported",
			args: func(e *catEnv) []string { return []string{"inspect", e.patch(e.fx.gqf, "bad.gqf", catPutU32(4, 9))} }},
		catCase{name: "run/gqf/truncated", code: exitError, want: "bad.gqf: manifest: bytes […) do not lie after the data section inside the file",
			args: func(e *catEnv) []string {
				return []string{"run", e.patch(e.fx.gqf, "bad.gqf", catHalf), "Once", "-n", "2"}
			}},
		catCase{name: "bench/gqf/manifest-garbled", code: exitError, want: "bad.gqf: manifest: proto:",
			args: func(e *catEnv) []string {
				return []string{"bench", e.patch(e.fx.gqf, "bad.gqf", catGarbleManifest), "-p", "8", "-n", "2", "-r", "1"}
			}},
		catCase{name: "verify/artifact/gqf-truncated", code: exitError, want: "bad.gqf: manifest: bytes […) do not lie after the data section inside the file (100000 bytes)",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.patch(e.fx.gqf, "bad.gqf", catTruncate(100000)), "--ref", stories260k, "--corpus", evalCorpus,
					"--json", e.o("r.json"), "--html", e.o("r.html")}, catVerifyShort)
			}},
	)

	// Statistics and imatrix files.
	gqfW8 := func(e *catEnv, extra ...string) []string {
		return append([]string{"convert", stories260k, "--format", "gqf", "--scheme", "w8a16", "-o", e.o("m.gqf")}, extra...)
	}
	cs = append(cs,
		catCase{name: "convert/stats/garbage", code: exitError, want: "bad.stats: entries: no entries (file too short or not an imatrix file)",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.write("bad.stats", catGarbage(5000)), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/empty", code: exitError, want: "bad.stats: entries: no entries (file too short or not an imatrix file)",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.write("bad.stats", nil), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/missing-file", code: exitError, want: "nope.gguf: no such file or directory",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.p("nope.gguf"), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/truncated", code: exitError, want: "bad.gguf: blk.…: … bytes of data at offset … lie past the end of the file",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.patch(e.fx.stats, "bad.gguf", catHalf), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/other-model", code: exitError, want: "other-stats.gguf: model: collected on other (llama, hidden 64, intermediate 128, 2 layers, 4 heads (2 kv) of 16, vocab 512, tensor list …), not on this model (llama, hidden 64, intermediate 172, 5 layers, 8 heads (4 kv) of 8, vocab 512, tensor list …)",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.fx.oStats, "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/imatrix/other-model", code: exitError, want: "other-imatrix.gguf: blk.0.ffn_down.weight: 128 columns in the stats, 172 in the model",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.fx.oImatrix, "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/imatrix/truncated", code: exitError, want: "bad.gguf: blk.….in_sum2: truncated: ",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.patch(e.fx.imatrix, "bad.gguf", catTruncate(3000)), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/imatrix/NaN", code: exitError, want: "bad.gguf: blk.0.ffn_down.weight",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.rewrite(e.fx.imatrix, "bad.gguf", func(g *catGGUF) {
					d := g.data["blk.0.ffn_down.weight.in_sum2"]
					binary.LittleEndian.PutUint32(d[8:], 0x7fc00000)
				}), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/imatrix/dat-garbage", code: exitError, want: "bad.dat: entries: no entries (file too short or not an imatrix file)",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.write("bad.dat", catGarbage(777)), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/a-model-gguf", code: exitError, want: "q8.gguf: general.type",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.fx.q8, "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/type-unknown", code: exitError, want: `bad.gguf: general.type: "gquant.calibration9"`,
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.rewrite(e.fx.stats, "bad.gguf", func(g *catGGUF) {
					g.set("general.type", "gquant.calibration9")
				}), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/tensor-dropped", code: exitError, want: "bad.gguf: blk.0.attn_q.weight",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.rewrite(e.fx.stats, "bad.gguf", func(g *catGGUF) {
					g.drop("blk.0.attn_q.weight.in_sum2")
				}), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert-gqf/stats/other-model", code: exitError, want: "other-stats.gguf: model: collected on other (llama, hidden 64, intermediate 128, 2 layers, 4 heads (2 kv) of 16, vocab 512, tensor list …), not on this model (llama, hidden 64, intermediate 172, 5 layers, 8 heads (4 kv) of 8, vocab 512, tensor list …)",
			args: func(e *catEnv) []string { return gqfW8(e, "--stats", e.fx.oStats) }},
		catCase{name: "convert-gqf/stats/garbage", code: exitError, want: "bad.stats: entries: no entries (file too short or not an imatrix file)",
			args: func(e *catEnv) []string { return gqfW8(e, "--stats", e.write("bad.stats", catGarbage(5000))) }},
		catCase{name: "calibrate/stats/other-model", code: exitError, want: "other-stats.gguf: model: collected on other (llama, hidden 64, intermediate 128, 2 layers, 4 heads (2 kv) of 16, vocab 512, tensor list …), not on this model (llama, hidden 64, intermediate 172, 5 layers, 8 heads (4 kv) of 8, vocab 512, tensor list …)",
			args: func(e *catEnv) []string {
				return []string{"calibrate", stories260k, "--stats", e.fx.oStats, "--imatrix", e.o("i.gguf")}
			}},
		catCase{name: "calibrate/stats/directory", code: exitError, want: "adir: is a directory",
			args: func(e *catEnv) []string {
				d := e.p("adir")
				os.Mkdir(d, 0o755)
				return []string{"calibrate", stories260k, "--stats", d, "--imatrix", e.o("i.gguf")}
			}},
		catCase{name: "calibrate/stats/garbage", code: exitError, want: "bad.stats: entries: no entries (file too short or not an imatrix file)",
			args: func(e *catEnv) []string {
				return []string{"calibrate", stories260k, "--stats", e.write("bad.stats", catGarbage(5000)), "-o", e.o("s.gguf")}
			}},
		catCase{name: "convert/stats/layers-patched", code: exitError, want: "bad.gguf: model: collected on stories260k (llama, hidden 64, intermediate 172, 9 layers, ",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.rewrite(e.fx.stats, "bad.gguf", func(g *catGGUF) {
					g.set("calibration.model.layers", uint32(9))
				}), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/tensors_sha256-patched", code: exitError, want: "bad.gguf: model: collected on stories260k",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.rewrite(e.fx.stats, "bad.gguf", func(g *catGGUF) {
					g.set("calibration.model.tensors_sha256", strings.Repeat("ab", 32))
				}), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert/stats/NaN", code: exitError, want: "bad.gguf: blk.1.ffn_up.weight",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_k_m", "--stats", e.rewrite(e.fx.stats, "bad.gguf", func(g *catGGUF) {
					binary.LittleEndian.PutUint64(g.data["blk.1.ffn_up.weight.in_sum2"][16:], 0x7ff8000000000001)
				}), "-o", e.o("m.gguf")}
			}},
		catCase{name: "convert-gqf/stats/gptq-without-hessians", code: exitError, want: "stats.gguf: blk.0.attn_q.weight: no Hessian (gquant calibrate --hessian)",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--method", "gptq", "--stats", e.fx.stats, "-o", e.o("m.gqf")}
			}},
		catCase{name: "convert/stats/gptq-without-hessians", code: exitError, want: "stats.gguf: blk.0.attn_q.weight: no Hessian (gquant calibrate --hessian)",
			args: func(e *catEnv) []string {
				return []string{"convert", stories260k, "--scheme", "q4_0", "--method", "gptq", "--stats", e.fx.stats, "-o", e.o("m.gguf")}
			}},
		catCase{name: "calibrate/stats/layers-patched", code: exitError, want: "bad.gguf: model: collected on stories260k (llama, hidden 64, intermediate 172, 9 layers, ",
			args: func(e *catEnv) []string {
				return []string{"calibrate", stories260k, "--stats", e.rewrite(e.fx.stats, "bad.gguf", func(g *catGGUF) {
					g.set("calibration.model.layers", uint32(9))
				}), "--w8a16", "--encodings", e.o("e.json")}
			}},
	)

	// stats merge: shards that do not belong together, files that cannot be merged.
	merge := func(name, want string, inputs func(e *catEnv) []string) catCase {
		return catCase{name: "stats/merge/" + name, code: exitError, want: want,
			args: func(e *catEnv) []string {
				return append(append([]string{"stats", "merge"}, inputs(e)...), "-o", e.o("m.stats"))
			}}
	}
	cs = append(cs,
		merge("same-shard-twice", "shard0.stats: calibration.chunk_set: chunks 0–1 are also in …shard0.stats (the same shard twice?)",
			func(e *catEnv) []string { return []string{e.fx.shard0, e.fx.shard1, e.fx.shard0} }),
		merge("incomplete", "shard0.stats: calibration.chunk_set: the inputs hold 2 of the 4 chunks, shard 1 of 2 (chunks 2–3) missing: give every shard, or --partial",
			func(e *catEnv) []string { return []string{e.fx.shard0} }),
		merge("other-model", "other-stats.gguf: calibration.model.intermediate: 128, but 172 in …shard0.stats: statistics of different models do not merge",
			func(e *catEnv) []string { return []string{e.fx.shard0, e.fx.oStats} }),
		merge("other-weights", "bad.stats: calibration.model.weights_sha256: abababababab…, but ",
			func(e *catEnv) []string {
				return []string{e.fx.shard0, e.rewrite(e.fx.shard1, "bad.stats", func(g *catGGUF) {
					g.set("calibration.model.weights_sha256", strings.Repeat("ab", 32))
				})}
			}),
		merge("other-ctx", "stats.gguf: calibration.ctx: 64, but 32 in …shard0.stats: statistics of different chunkings do not merge",
			func(e *catEnv) []string { return []string{e.fx.shard0, e.fx.stats} }),
		merge("other-corpus", "bad.stats: calibration.corpus.sha256: 0000000000…, but ",
			func(e *catEnv) []string {
				return []string{e.fx.shard0, e.rewrite(e.fx.shard1, "bad.stats", func(g *catGGUF) {
					g.set("calibration.corpus.sha256", strings.Repeat("0", 64))
				})}
			}),
		merge("version-2", "old.stats: calibration.version: version 2 statistics hold no exact sums and cannot be merged",
			func(e *catEnv) []string {
				return []string{e.fx.shard0, e.rewrite(e.fx.shard1, "old.stats", func(g *catGGUF) {
					g.set("calibration.version", uint32(2))
					for _, k := range []string{"exact", "windows.chunks", "windows.tokens", "shard.count", "shard.index", "chunk_set"} {
						g.del("calibration." + k)
					}
					for _, ti := range append([]gguf.TensorInfo(nil), g.h.Tensors...) {
						if strings.HasSuffix(ti.Name, "_exact") {
							g.drop(ti.Name)
						}
					}
				})}
			}),
		merge("exact-sum-tampered", "bad.stats: blk.0.attn_q.weight: Σx²[0] = ",
			func(e *catEnv) []string {
				return []string{e.fx.shard0, e.rewrite(e.fx.shard1, "bad.stats", func(g *catGGUF) {
					g.data["blk.0.attn_q.weight.in_sum2_exact"][7] ^= 0x40
				})}
			}),
		merge("mixed-kinds", "imatrix.gguf: general.type: a llama.cpp imatrix, but …shard0.stats holds gquant statistics: statistics of different kinds do not merge",
			func(e *catEnv) []string { return []string{e.fx.shard0, e.fx.imatrix} }),
		merge("imatrix-chunk-size", "other-imatrix.gguf: imatrix.chunk_size: 32, but 64 in …imatrix.gguf: imatrix files of different chunk sizes do not merge",
			func(e *catEnv) []string { return []string{e.fx.imatrix, e.fx.oImatrix} }),
		merge("garbage", "bad.stats: entries: no entries (file too short or not an imatrix file)",
			func(e *catEnv) []string { return []string{e.fx.shard0, e.write("bad.stats", catGarbage(5000))} }),
		merge("missing-input", "nope.stats: no such file or directory",
			func(e *catEnv) []string { return []string{e.fx.shard0, e.p("nope.stats")} }),
		catCase{name: "calibrate/corpus/more-shards-than-chunks", code: exitError, want: "tinystories-calib.txt: --shard 5/6: the corpus gives 4 chunks of 32 tokens, fewer than 6 shards",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", stories260k, "--corpus", calibCorpus, "--shard", "5/6", "-o", e.o("s.gguf")}, catCalibShort)
			}},
	)

	// Corpora and prompts.
	cs = append(cs,
		catCase{name: "calibrate/corpus/empty", code: exitError, want: "empty.txt: the corpus has 1 tokens, fewer than the 128 asked for",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", stories260k, "--corpus", e.write("empty.txt", nil), "-o", e.o("s.gguf")}, catCalibShort)
			}},
		catCase{name: "calibrate/corpus/binary", code: exitError, want: "binary.txt: not UTF-8 text at byte 0",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", stories260k, "--corpus", e.write("binary.txt", catGarbage(20000)), "-o", e.o("s.gguf")}, catCalibShort)
			}},
		catCase{name: "calibrate/corpus/nul-bytes", code: exitError, want: "nul.txt: not text (a NUL byte, binary data) at byte 0",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", stories260k, "--corpus", e.write("nul.txt", make([]byte, 20000)), "--imatrix", e.o("i.gguf")}, catCalibShort)
			}},
		catCase{name: "calibrate/corpus/too-short", code: exitError, want: "short.txt: the corpus has 3 tokens, fewer than the 128 asked for",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", stories260k, "--corpus", e.write("short.txt", []byte("Once.")), "-o", e.o("s.gguf")}, catCalibShort)
			}},
		catCase{name: "calibrate/corpus/missing", code: exitError, want: "nope.txt: no such file or directory",
			args: func(e *catEnv) []string {
				return catArgs([]string{"calibrate", stories260k, "--corpus", e.p("nope.txt"), "-o", e.o("s.gguf")}, catCalibShort)
			}},
		catCase{name: "calibrate/corpus/directory", code: exitError, want: "adir: is a directory",
			args: func(e *catEnv) []string {
				d := e.p("adir")
				os.Mkdir(d, 0o755)
				return catArgs([]string{"calibrate", stories260k, "--corpus", d, "-o", e.o("s.gguf")}, catCalibShort)
			}},
		catCase{name: "verify/corpus/empty", code: exitError, want: "empty.txt: the corpus has 1 tokens, fewer than one window of 64",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", e.write("empty.txt", nil), "--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "verify/corpus/binary", code: exitError, want: "binary.txt: not UTF-8 text at byte 0",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", e.write("binary.txt", catGarbage(20000)), "--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "verify/corpus/too-short", code: exitError, want: "short.txt: the corpus has 6 tokens, fewer than one window of 64",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", e.write("short.txt", []byte("Once upon a time.")),
					"--json", e.o("r.json"), "--save-ref", e.o("ref.kld")}, catVerifyShort)
			}},
		catCase{name: "verify/prompts/empty", code: exitError, want: "prompts.txt: no prompts",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--prompts", e.write("prompts.txt", []byte("\n \n")),
					"--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "verify/prompts/binary", code: exitError, want: "prompts.txt: not UTF-8 text",
			args: func(e *catEnv) []string {
				return catArgs([]string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--prompts", e.write("prompts.txt", catGarbage(300)),
					"--json", e.o("r.json")}, catVerifyShort)
			}},
		catCase{name: "convert-gqf/corpus/empty", code: exitError, want: "empty.txt: the corpus has 1 tokens, fewer than the 1024 asked for",
			args: func(e *catEnv) []string { return gqfW8(e, "--corpus", e.write("empty.txt", nil)) }},
		catCase{name: "convert-gqf/corpus/binary", code: exitError, want: "binary.txt: not UTF-8 text at byte 0",
			args: func(e *catEnv) []string { return gqfW8(e, "--corpus", e.write("binary.txt", catGarbage(20000))) }},
	)

	// AIMET encodings for convert --format gqf --scheme w8a16 --encodings.
	encCase := func(name, want string, build func(e *catEnv) string, known ...string) catCase {
		c := catCase{name: "convert-gqf/encodings/" + name, code: exitError, want: want,
			args: func(e *catEnv) []string { return gqfW8(e, "--encodings", build(e)) }}
		if len(known) > 0 {
			c.known = known[0]
		}
		return c
	}
	editEnc := func(e *catEnv, edit func(v map[string]any)) string {
		var v map[string]any
		if err := json.Unmarshal(e.read(e.fx.enc), &v); err != nil {
			e.t.Fatal(err)
		}
		edit(v)
		b, _ := json.Marshal(v)
		return e.write("enc.json", b)
	}
	firstAct := func(v map[string]any) map[string]any {
		return v["activation_encodings"].([]any)[0].(map[string]any)
	}
	cs = append(cs,
		encCase("not-json", "enc.json: unexpected end of JSON input", func(e *catEnv) string { return e.write("enc.json", []byte(`{"version": "1.0.0", `)) }),
		encCase("empty", "enc.json: unexpected end of JSON input", func(e *catEnv) string { return e.write("enc.json", nil) }),
		encCase("binary", "enc.json: invalid character", func(e *catEnv) string { return e.write("enc.json", catGarbage(1000)) }),
		encCase("truncated", "enc.json: unexpected end of JSON input", func(e *catEnv) string { return e.patch(e.fx.enc, "enc.json", catHalf) }),
		encCase("array", "enc.json: is a list, want a JSON object", func(e *catEnv) string { return e.write("enc.json", []byte(`[]`)) }),
		encCase("no-activations", "enc.json: no encoding for graph activations blk.0.attn_norm, ", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { v["activation_encodings"] = []any{} })
		}),
		encCase("version-unknown", "enc.json: version", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { v["version"] = "7.7.7" })
		}),
		encCase("bitwidth-99", "enc.json: token_embd", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { firstAct(v)["bw"] = 99 })
		}),
		encCase("scale-negative", "enc.json: token_embd", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { firstAct(v)["scale"] = []any{-1.0} })
		}),
		encCase("scale-zero", "enc.json: token_embd", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { firstAct(v)["scale"] = []any{0.0} })
		}),
		encCase("scale-NaN", "enc.json: invalid character 'N'", func(e *catEnv) string {
			b := e.read(e.fx.enc)
			i := bytes.Index(b, []byte(`"scale": [`))
			j := i + bytes.IndexByte(b[i:], ']')
			return e.write("enc.json", append(append(append([]byte(nil), b[:i]...), `"scale": [NaN`...), b[j:]...))
		}),
		encCase("scale-missing", "enc.json: token_embd", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { delete(firstAct(v), "scale") })
		}),
		encCase("offset-out-of-range", "enc.json: token_embd: offset", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { firstAct(v)["offset"] = []any{1e12} })
		}),
		encCase("name-unknown", "enc.json: no encoding for graph activations token_embd", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { firstAct(v)["name"] = "blk.99.q" })
		}),
		encCase("duplicate-entry", "enc.json: token_embd: listed twice in activation_encodings", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) {
				acts := v["activation_encodings"].([]any)
				dup := map[string]any{}
				for k, x := range firstAct(v) {
					dup[k] = x
				}
				dup["scale"] = []any{0.5}
				v["activation_encodings"] = append(acts, dup)
			})
		}),
		encCase("enc_type-unknown", "enc.json: token_embd", func(e *catEnv) string {
			return editEnc(e, func(v map[string]any) { firstAct(v)["enc_type"] = "PER_GALAXY" })
		}),
		encCase("other-model", "other-enc.json: no encoding for graph activations blk.2.attn_norm, ", func(e *catEnv) string { return e.fx.oEnc }),
		catCase{name: "convert-gqf/encodings/missing-file", code: exitError, want: "nope.json: no such file or directory",
			args: func(e *catEnv) []string { return gqfW8(e, "--encodings", e.p("nope.json")) }},
	)

	// Reference log-probabilities (verify --save-ref, llama-perplexity --kl-divergence-base).
	refCase := func(name, want string, build func(e *catEnv) string, known ...string) catCase {
		c := catCase{name: "verify/ref-logits/" + name, code: exitError, want: want,
			args: func(e *catEnv) []string {
				return []string{"verify", e.fx.q8, "--ref-logits", build(e), "--gen", "2", "--json", e.o("r.json")}
			}}
		if len(known) > 0 {
			c.known = known[0]
		}
		return c
	}
	cs = append(cs,
		refCase("truncated-half", "ref.kld: trailer: metadata length … exceeds the file", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catHalf) }),
		refCase("truncated-header", "ref.kld: header: file too short (10 bytes)", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catTruncate(10)) }),
		refCase("truncated-in-tokens", "ref.kld: log-probabilities: file is 100 bytes, want at least 64516 for 2 windows of 64 tokens and a vocabulary of 512 (truncated?)", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catTruncate(100)) }),
		refCase("truncated-in-trailer", "ref.kld: trailer: metadata length … exceeds the file", func(e *catEnv) string {
			b := e.read(e.fx.ref)
			i := bytes.LastIndex(b, []byte("_gqverif"))
			return e.write("ref.kld", b[:i+30])
		}),
		refCase("empty", "ref.kld: header: file too short (0 bytes)", func(e *catEnv) string { return e.write("ref.kld", nil) }),
		refCase("garbage", "ref.kld: header: not a log-probabilities file (magic \"", func(e *catEnv) string { return e.write("ref.kld", catGarbage(5000)) }),
		refCase("n_ctx-zero", "ref.kld: header: n_ctx: 0 out of range [3, 2^24]", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catPutU32(8, 0)) }),
		refCase("n_ctx-huge", "ref.kld: header: n_ctx: 2147483648 out of range [3, 2^24]", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catPutU32(8, 1<<31)) }),
		refCase("n_vocab-other", "ref.kld: log-probabilities: file is … bytes, want at least 3969028 for 2 windows of 64 tokens and a vocabulary of 32000", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catPutU32(12, 32000)) }),
		refCase("n_vocab-negative", "ref.kld: header: n_vocab: -1 out of range [1, 2^24]", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catPutU32(12, 0xFFFFFFFF)) }),
		refCase("n_chunk-huge", "ref.kld: header: n_chunk: 1073741824 out of range [1, 2^24]", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catPutU32(16, 1<<30)) }),
		refCase("token-out-of-vocab", "ref.kld: tokens: 1 token ids outside the vocabulary of 512", func(e *catEnv) string { return e.patch(e.fx.ref, "ref.kld", catPutU32(24, 99999)) }),
		refCase("trailer-json-garbled", "ref.kld: trailer: metadata: invalid character", func(e *catEnv) string {
			b := e.read(e.fx.ref)
			i := bytes.LastIndex(b, []byte(`{"`))
			b[i] = '['
			return e.write("ref.kld", b)
		}),
		catCase{name: "verify/ref-logits/ctx-other", code: exitError, want: "ref.kld: n_ctx: the file was made with windows of 64 tokens, not 128",
			args: func(e *catEnv) []string {
				return []string{"verify", e.fx.q8, "--ref-logits", e.patch(e.fx.ref, "ref.kld", func(b []byte) []byte { return b }),
					"--ctx", "128", "--gen", "2", "--json", e.o("r.json")}
			}},
		refCase("missing-file", "nope.kld: no such file or directory", func(e *catEnv) string { return e.p("nope.kld") }),
	)

	// Bad flag values: usage errors, exit 2, before any work.
	usage := func(name, want string, args func(e *catEnv) []string, known ...string) catCase {
		c := catCase{name: "usage/" + name, code: exitUsage, want: want, args: args}
		if len(known) > 0 {
			c.known = known[0]
		}
		return c
	}
	cs = append(cs,
		usage("convert/scheme-unknown", "q3_x", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--scheme", "q3_x", "-o", e.o("m.gguf")}
		}),
		usage("convert/kv-malformed", `convert: --kv "general.name": want KEY=TYPE:VALUE`, func(e *catEnv) []string {
			return []string{"convert", stories260k, "--kv", "general.name", "-o", e.o("m.gguf")}
		}),
		usage("convert/kv-type-unknown", `type "u8" is not int, float, bool or str`, func(e *catEnv) []string {
			return []string{"convert", stories260k, "--kv", "a=u8:1", "-o", e.o("m.gguf")}
		}),
		usage("convert/kv-gqf", "convert: --kv applies to GGUF output", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--format", "gqf", "--scheme", "f16", "--kv", "a=int:1", "-o", e.o("m.gqf")}
		}),
		usage("convert/format-unknown", `--format: unsupported format "onnx"`, func(e *catEnv) []string {
			return []string{"convert", stories260k, "--format", "onnx", "-o", e.o("m.onnx")}
		}),
		usage("convert/tensor-type-no-equals", "--tensor-type", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--tensor-type", "ffn_up", "-o", e.o("m.gguf")}
		}),
		usage("convert/tensor-type-bad-regexp", "((", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--tensor-type", "((=q8_0", "-o", e.o("m.gguf")}
		}),
		usage("convert/tensor-type-bad-type", "q9_9", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--tensor-type", "ffn_up=q9_9", "-o", e.o("m.gguf")}
		}),
		usage("convert/output-tensor-type-bad", "--output-tensor-type", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--scheme", "q8_0", "--output-tensor-type", "q9_9", "-o", e.o("m.gguf")}
		}),
		usage("convert/token-embedding-type-bad", "--token-embedding-type", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--scheme", "q8_0", "--token-embedding-type", "i32", "-o", e.o("m.gguf")}
		}),
		usage("convert/leave-output-and-output-type", "--leave-output-tensor and --output-tensor-type", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--scheme", "q8_0", "--leave-output-tensor", "--output-tensor-type", "q8_0", "-o", e.o("m.gguf")}
		}),
		usage("convert/pure-gqf", "apply to GGUF output", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--format", "gqf", "--scheme", "w8a16", "--pure", "-o", e.o("m.gqf")}
		}),
		usage("convert/q2_k_s-without-imatrix", "Q2_K needs an importance matrix", func(e *catEnv) []string {
			return []string{"convert", stories3m, "--scheme", "q2_k_s", "-o", e.o("m.gguf")}
		}),
		usage("convert/split-max-size-words", "--split-max-size", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--split-max-size", "lots", "-o", e.o("m.gguf")}
		}),
		usage("convert/threads-not-a-number", "--threads", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--threads", "many", "-o", e.o("m.gguf")}
		}),
		usage("convert/no-arguments", "convert: wrong number of arguments", func(e *catEnv) []string {
			return []string{"convert", "-o", e.o("m.gguf")}
		}),
		usage("convert/two-models", "convert: wrong number of arguments", func(e *catEnv) []string {
			return []string{"convert", stories260k, stories3m, "-o", e.o("m.gguf")}
		}),
		usage("convert/missing-output", "convert: -o OUT is required", func(e *catEnv) []string {
			return []string{"convert", stories260k}
		}),
		usage("convert/method-unknown", `convert: --method: unknown method "magic"`, func(e *catEnv) []string {
			return []string{"convert", stories260k, "--method", "magic", "--stats", e.fx.stats, "-o", e.o("m.gguf")}
		}),
		usage("convert/gqf-group-size", "convert: --group-size: 7", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--format", "gqf", "--scheme", "w4a16", "--group-size", "7", "-o", e.o("m.gqf")}
		}),
		usage("convert/gqf-range-unknown", `convert: --range: "vibes"`, func(e *catEnv) []string {
			return gqfW8(e, "--range", "vibes", "--corpus", calibCorpus)
		}),
		usage("convert/gqf-smooth-negative", "convert: --smooth: ", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--format", "gqf", "--scheme", "w4a8", "--smooth", "-1", "--stats", e.fx.stats, "-o", e.o("m.gqf")}
		}),
		usage("convert/gqf-tensor-type", "--tensor-type applies to GGUF output", func(e *catEnv) []string {
			return []string{"convert", stories260k, "--format", "gqf", "--scheme", "f16", "--tensor-type", "ffn_up=q8_0", "-o", e.o("m.gqf")}
		}),
		usage("calibrate/ctx-negative", "calibrate: --ctx: must not be negative", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--ctx", "-1", "-o", e.o("s.gguf")}
		}),
		usage("calibrate/tokens-negative", "calibrate: --tokens: must not be negative", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--tokens", "-5", "-o", e.o("s.gguf")}
		}),
		usage("calibrate/range-unknown", "--range", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--range", "vibes", "--w8a16", "--encodings", e.o("e.json")}
		}),
		usage("calibrate/encodings-version", "--encodings-version", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--w8a16", "--encodings", e.o("e.json"), "--encodings-version", "9"}
		}),
		usage("calibrate/encodings-without-w8a16", "calibrate: --encodings needs --w8a16", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--encodings", e.o("e.json")}
		}),
		usage("calibrate/hessian-mem-words", "--hessian-mem", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--hessian", "--hessian-mem", "lots", "-o", e.o("s.gguf")}
		}),
		usage("calibrate/shard-out-of-range", "calibrate: --shard: 2/2: want I/N with 0 ≤ I < N", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--shard", "2/2", "-o", e.o("s.gguf")}
		}),
		usage("calibrate/shard-not-a-pair", `calibrate: --shard: "1-4" is not I/N`, func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--shard", "1-4", "-o", e.o("s.gguf")}
		}),
		usage("calibrate/acts-with-stats", "calibrate: --acts applies to a run over a corpus, not --stats", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--stats", e.fx.stats, "--acts", "quant", "--imatrix", e.o("i.gguf")}
		}),
		usage("verify/ref-acts-with-ref-logits", "verify: --ref-acts: the reference is not run with --ref-logits", func(e *catEnv) []string {
			return []string{"verify", e.fx.q8, "--ref-logits", e.fx.q8, "--ref-acts", "quant"}
		}),
		usage("verify/ref-acts-unknown", `verify: --ref-acts: "bf16" is not default, float or quant`, func(e *catEnv) []string {
			return []string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--ref-acts", "bf16"}
		}),
		usage("calibrate/shard-with-stats", "calibrate: --shard needs a run over a corpus, not --stats", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--stats", e.fx.stats, "--shard", "0/2", "-o", e.o("s.gguf")}
		}),
		usage("stats/merge-missing-output", "stats merge: -o OUT is required", func(e *catEnv) []string {
			return []string{"stats", "merge", e.fx.shard0, e.fx.shard1}
		}),
		usage("stats/no-subcommand", "stats: a subcommand is required", func(e *catEnv) []string {
			return []string{"stats"}
		}),
		usage("calibrate/corpus-and-stats", "calibrate: --corpus and --stats exclude each other", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--stats", e.fx.stats, "-o", e.o("s.gguf")}
		}),
		usage("calibrate/nothing-to-write", "calibrate: nothing to write", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus}
		}),
		usage("calibrate/same-output-twice", "name the same file", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "-o", e.o("s.gguf"), "--imatrix", e.o("s.gguf")}
		}),
		usage("calibrate/seed-negative", "--seed", func(e *catEnv) []string {
			return []string{"calibrate", stories260k, "--corpus", calibCorpus, "--seed", "-1", "-o", e.o("s.gguf")}
		}),
		usage("verify/ctx-too-small", "--ctx at least 4", func(e *catEnv) []string {
			return []string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--ctx", "2", "--json", e.o("r.json")}
		}),
		usage("verify/gen-negative", "verify: --gen", func(e *catEnv) []string {
			return []string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--gen", "-1", "--json", e.o("r.json")}
		}),
		usage("verify/plot-stdout", "verify: --plot, --html and --save-ref write files", func(e *catEnv) []string {
			return []string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--plot", "-", "--json", e.o("r.json")}
		}),
		usage("verify/min-snr-not-a-number", "--min-snr", func(e *catEnv) []string {
			return []string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--min-snr", "loud", "--json", e.o("r.json")}
		}),
		usage("verify/max-kl-infinite", "verify: --max-kl: +Inf is not a finite KL", func(e *catEnv) []string {
			return []string{"verify", e.fx.q8, "--ref", stories260k, "--corpus", evalCorpus, "--max-kl", "Inf", "--json", e.o("r.json")}
		}),
		usage("verify/no-artifact", "verify: wrong number of arguments", func(e *catEnv) []string {
			return []string{"verify", "--ref", stories260k, "--corpus", evalCorpus, "--json", e.o("r.json")}
		}),
		usage("run/n-negative", "run: -n: must not be negative", func(e *catEnv) []string {
			return []string{"run", stories260k, "Once", "-n", "-1"}
		}),
		usage("run/acts-unknown", `run: --acts: "fuzzy" is not default, float or quant`, func(e *catEnv) []string {
			return []string{"run", stories260k, "Once", "--acts", "fuzzy"}
		}),
		usage("run/temp-infinite", "run: --temp", func(e *catEnv) []string {
			return []string{"run", stories260k, "Once", "--temp", "+Inf"}
		}),
		usage("run/no-prompt", "run: wrong number of arguments", func(e *catEnv) []string {
			return []string{"run", stories260k}
		}),
		usage("run/top-k-not-a-number", "--top-k", func(e *catEnv) []string {
			return []string{"run", stories260k, "Once", "--top-k", "ten"}
		}),
		usage("bench/reps-zero", "bench: -r: must be at least 1, got 0", func(e *catEnv) []string {
			return []string{"bench", stories260k, "-r", "0", "--json", e.o("b.json")}
		}),
		usage("bench/nothing-to-measure", "bench: -p and -n must not be negative, and not both 0", func(e *catEnv) []string {
			return []string{"bench", stories260k, "-p", "0", "-n", "0"}
		}),
		usage("bench/kernels-unknown", `bench: --kernels: "quantum"`, func(e *catEnv) []string {
			return []string{"bench", stories260k, "--kernels", "quantum", "-p", "8", "-n", "2", "-r", "1"}
		}),
		usage("export/to-unknown", `export: --to "tflite"`, func(e *catEnv) []string {
			return []string{"export", e.fx.gqf, "--to", "tflite", "-o", e.o("m.tflite")}
		}),
		usage("export/qdq-aimet", "export: --qdq applies to --to onnx and onnx-kv", func(e *catEnv) []string {
			return []string{"export", e.fx.gqf, "--to", "aimet-json", "--qdq", "-o", e.o("m.json")}
		}),
		usage("export/kv-flags-onnx", "export: --ar, --ctx and --parts apply to --to onnx-kv", func(e *catEnv) []string {
			return []string{"export", e.fx.gqf, "--to", "onnx", "--ar", "8", "-o", e.o("m.onnx")}
		}),
		usage("export/parts-aimet", "export: --parts applies to --to onnx-kv", func(e *catEnv) []string {
			return []string{"export", e.fx.gqf, "--to", "aimet-json", "--parts", "2", "-o", e.o("m.json")}
		}),
		usage("export/kv-parts-zero", "export: --parts 0: want at least 1", func(e *catEnv) []string {
			return []string{"export", e.fx.gqf, "--to", "onnx-kv", "--parts", "0", "-o", e.o("kv")}
		}),
		usage("export/kv-ar-negative", "export: --ar and --ctx must be positive", func(e *catEnv) []string {
			return []string{"export", e.fx.gqf, "--to", "onnx-kv", "--ar", "-1", "-o", e.o("kv")}
		}),
		usage("export/missing-output", "export: -o OUT is required", func(e *catEnv) []string {
			return []string{"export", e.fx.gqf, "--to", "onnx"}
		}),
		usage("export/encodings-version", `export: --encodings-version "3"`, func(e *catEnv) []string {
			return []string{"export", e.fx.gqf, "--to", "aimet-json", "--encodings-version", "3", "-o", e.o("m.json")}
		}),
		usage("inspect/no-arguments", "inspect: wrong number of arguments", func(e *catEnv) []string {
			return []string{"inspect"}
		}),
		usage("inspect/json-without-value", "--json", func(e *catEnv) []string {
			return []string{"inspect", e.fx.q8, "--json"}
		}),
		usage("unknown-verb", `unknown command "frobnicate"`, func(e *catEnv) []string {
			return []string{"frobnicate", stories260k}
		}),
		usage("unknown-flag", "--no-such-flag", func(e *catEnv) []string {
			return []string{"run", stories260k, "Once", "--no-such-flag"}
		}),
	)
	return cs
}

// catRenameDType replaces the dtype of one tensor in a safetensors header.
func catRenameDType(b []byte, tensor, dtype string) []byte {
	n := binary.LittleEndian.Uint64(b)
	hdr := b[8 : 8+n]
	i := bytes.Index(hdr, []byte(`"`+tensor+`"`))
	j := i + bytes.Index(hdr[i:], []byte(`"dtype":"`)) + len(`"dtype":"`)
	k := j + bytes.IndexByte(hdr[j:], '"')
	newHdr := append(append(append([]byte(nil), hdr[:j]...), dtype...), hdr[k:]...)
	for len(newHdr) < len(hdr) {
		newHdr = append(newHdr, ' ')
	}
	if len(newHdr) != len(hdr) {
		panic("dtype longer than the old one")
	}
	copy(hdr, newHdr)
	return b
}

// catGarbleManifest overwrites the middle of a gqf file's manifest with random bytes.
func catGarbleManifest(b []byte) []byte {
	off := binary.LittleEndian.Uint64(b[8:])
	n := binary.LittleEndian.Uint64(b[16:])
	g := catGarbage(int(n / 2))
	copy(b[off+n/4:], g)
	return b
}

// catNaN is a quiet NaN.
func catNaN() float64 { var z float64; return z / z }

// catContains reports whether s holds want, an ellipsis (…) in want standing for any
// text.
func catContains(s, want string) bool {
	for _, part := range strings.Split(want, "…") {
		j := strings.Index(s, part)
		if j < 0 {
			return false
		}
		s = s[j+len(part):]
	}
	return true
}

// catResult is what one run of the CLI gave.
type catResult struct {
	code           int
	stdout, stderr string
	panic          string
	elapsed        time.Duration
}

// runCatalogued runs the CLI in-process, turning a panic into a result and giving up after
// the limit (the run is then left behind, still going).
func runCatalogued(args []string, limit time.Duration) (catResult, bool) {
	done := make(chan catResult, 1)
	start := time.Now()
	go func() {
		var r catResult
		defer func() {
			if v := recover(); v != nil {
				r.panic = fmt.Sprintf("panic: %v\n%s", v, debug.Stack())
			}
			r.elapsed = time.Since(start)
			done <- r
		}()
		r.code, r.stdout, r.stderr = run(args...)
	}()
	select {
	case r := <-done:
		return r, true
	case <-time.After(limit):
		return catResult{elapsed: limit}, false
	}
}

func TestCatalogue(t *testing.T) {
	fx := newCatFixtures(t)
	cases := catalogue()
	seen := map[string]bool{}
	active := 0
	var known []string
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("case %s listed twice", c.name)
		}
		seen[c.name] = true
		if c.code != exitError && c.code != exitUsage {
			t.Fatalf("case %s: wanted exit %d, the contract allows 1 or 2", c.name, c.code)
		}
		if c.known == "" {
			active++
		} else {
			known = append(known, c.name)
		}
	}
	if active < 80 {
		t.Errorf("the catalogue has %d cases not marked known, want at least 80", active)
	}
	t.Logf("%d cases, %d known to fail: %s", len(cases), len(known), strings.Join(known, ", "))
	const limit = 60 * time.Second
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.known != "" && os.Getenv("GQUANT_CATALOGUE_KNOWN") == "" {
				t.Skip("known: " + c.known + " (GQUANT_CATALOGUE_KNOWN=1 runs it)")
			}
			e := &catEnv{t: t, fx: fx, in: t.TempDir(), out: t.TempDir()}
			args := func() (args []string) {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("building the input: %v", v)
					}
				}()
				return c.args(e)
			}()
			r, finished := runCatalogued(args, limit)
			if !finished {
				t.Fatalf("gquant %s: still running after %v", strings.Join(args, " "), limit)
			}
			if r.panic != "" {
				t.Fatalf("gquant %s: %s", strings.Join(args, " "), r.panic)
			}
			t.Logf("exit %d in %v: %s", r.code, r.elapsed.Round(time.Millisecond), strings.TrimSpace(r.stderr))
			if r.code != c.code {
				t.Errorf("exit code %d, want %d (stderr %q)", r.code, c.code, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "gquant: ") || !strings.HasSuffix(r.stderr, "\n") {
				t.Errorf("stderr is not one line starting with \"gquant: \": %q", r.stderr)
			}
			if !catContains(r.stderr, c.want) {
				t.Errorf("stderr %q does not contain %q", r.stderr, c.want)
			}
			if r.stdout != "" {
				t.Errorf("a failed run printed on stdout: %.200q", r.stdout)
			}
			for _, bad := range []string{"goroutine ", "panic", "runtime error"} {
				if strings.Contains(r.stderr, bad) || strings.Contains(r.stdout, bad) {
					t.Errorf("output holds %q: %q", bad, r.stderr)
				}
			}
			entries, _ := os.ReadDir(e.out)
			for _, ent := range entries {
				t.Errorf("the output folder holds %s after a failed run", ent.Name())
			}
		})
	}
}
