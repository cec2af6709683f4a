package sensitivity

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

func sample() *File {
	return &File{
		Key: Key{ModelName: "m", TensorsSHA256: strings.Repeat("a", 64), ConfigSHA256: strings.Repeat("b", 64),
			WeightsSHA256: "w", StatsSHA256: strings.Repeat("c", 64), CorpusName: "calib.txt", CorpusSHA256: "d",
			Ctx: 256, Chunks: 16, Settings: "measurement 1", Candidates: []gguf.Type{gguf.Q2_K, gguf.Q4_K, gguf.IQ2_XXS}},
		Tensors: []Tensor{
			{Name: "blk.0.attn_q.weight", Candidates: []Candidate{
				{Type: gguf.Q2_K, Method: "gptq", Bytes: 21504, Error: 0.25},
				{Type: gguf.Q4_K, Method: "gptq", Bytes: 36864, Error: 0.0125, Probed: true, ProbeKL: 1.5e-5},
				{Type: gguf.IQ2_XXS, Method: "imatrix", Bytes: 16896, Error: 0.5, Probed: true, ProbeKL: 3e-4},
			}},
			{Name: "blk.0.ffn_down.weight", Candidates: []Candidate{
				{Type: gguf.Q4_0, Method: "imatrix", Bytes: 100, Error: 0, Probed: true, ProbeKL: 0},
			}},
		},
	}
}

// TestRoundTrip: a file reads back as written, and the same measurements give the same bytes.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	for _, p := range []string{a, b} {
		if err := Write(p, sample()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(a)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Errorf("read back %+v, wrote %+v", got, sample())
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ba, bb) {
		t.Error("the same measurements wrote different bytes")
	}
}

// TestCheck: a key that differs in what the measurements depend on is refused, naming the
// metadata key; the model's name and the corpus's file name do not count, nor the candidate
// types (the caller may extend the file).
func TestCheck(t *testing.T) {
	k := sample().Key
	same := k
	same.ModelName, same.CorpusName, same.Candidates = "other", "other.txt", []gguf.Type{gguf.Q2_K}
	if err := k.Check("f", same); err != nil {
		t.Errorf("names and candidates only differ: %v", err)
	}
	for key, edit := range map[string]func(*Key){
		"sensitivity.model.tensors_sha256": func(k *Key) { k.TensorsSHA256 = "x" },
		"sensitivity.model.config_sha256":  func(k *Key) { k.ConfigSHA256 = "x" },
		"sensitivity.model.weights_sha256": func(k *Key) { k.WeightsSHA256 = "x" },
		"sensitivity.stats.sha256":         func(k *Key) { k.StatsSHA256 = "x" },
		"sensitivity.corpus.sha256":        func(k *Key) { k.CorpusSHA256 = "x" },
		"sensitivity.ctx":                  func(k *Key) { k.Ctx = 128 },
		"sensitivity.chunks":               func(k *Key) { k.Chunks = 4 },
		"sensitivity.settings":             func(k *Key) { k.Settings = "measurement 2" },
	} {
		want := k
		edit(&want)
		err := k.Check("f.gguf", want)
		if err == nil || !strings.HasPrefix(err.Error(), "f.gguf: "+key+": ") {
			t.Errorf("%s differs: %v", key, err)
		}
	}
}

// TestRefuses: measurements that are not numbers, or name no candidate, are refused on write
// and on read; a file of another kind is refused by its general.type.
func TestRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, edit := range map[string]func(*File){
		"negative error": func(f *File) { f.Tensors[0].Candidates[0].Error = -1 },
		"no probe":       func(f *File) { f.Tensors[1].Candidates[0].Probed = false },
		"probe KL":       func(f *File) { f.Tensors[0].Candidates[1].ProbeKL = -1 },
		"repeated name":  func(f *File) { f.Tensors[1].Name = f.Tensors[0].Name },
		"no candidates":  func(f *File) { f.Tensors[1].Candidates = nil },
		"no types":       func(f *File) { f.Key.Candidates = nil },
		"repeated type":  func(f *File) { f.Key.Candidates = append(f.Key.Candidates, gguf.Q4_K) },
	} {
		f := sample()
		edit(f)
		if err := Write(filepath.Join(dir, "x.gguf"), f); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	other := filepath.Join(dir, "other.gguf")
	if err := gguf.WriteFile(other, &gguf.Header{KVs: []gguf.KV{{Key: "general.type", Value: "model"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(other); err == nil || !strings.Contains(err.Error(), "general.type") {
		t.Errorf("a model file read as a sensitivity file: %v", err)
	}
	// A version 2 file without its candidate list.
	noCands := filepath.Join(dir, "nocands.gguf")
	if err := gguf.WriteFile(noCands, &gguf.Header{KVs: v1KVs(2, "a")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(noCands); err == nil || !strings.Contains(err.Error(), KeyCandidates) {
		t.Errorf("version 2 without %s: %v", KeyCandidates, err)
	}
	// Arrays of mismatched lengths.
	bad := filepath.Join(dir, "bad.gguf")
	if err := gguf.WriteFile(bad, &gguf.Header{KVs: []gguf.KV{
		{Key: "general.type", Value: Type}, {Key: keyVersion, Value: uint32(Version)},
		{Key: keyModelName, Value: ""}, {Key: keyTensorsSHA, Value: ""}, {Key: keyConfigSHA, Value: ""},
		{Key: keyWeightsSHA, Value: ""}, {Key: keyStatsSHA, Value: ""}, {Key: keyCorpusName, Value: ""},
		{Key: keyCorpusSHA, Value: ""}, {Key: keyCtx, Value: uint32(1)}, {Key: keyChunks, Value: uint32(1)},
		{Key: keySettings, Value: ""}, {Key: keyTensors, Value: []string{"a"}}, {Key: keyCount, Value: []uint32{2}},
		{Key: keyTypes, Value: []string{"Q4_K"}}, {Key: keyMethods, Value: []string{"gptq"}},
		{Key: keyBytes, Value: []uint64{1}}, {Key: keyError, Value: []float64{1}},
		{Key: keyProbeKL, Value: []float64{1}},
	}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bad); err == nil || !strings.Contains(err.Error(), "candidates") {
		t.Errorf("mismatched arrays: %v", err)
	}
}

// v1KVs is the metadata of a file of layout version (1: no candidate list) with one tensor,
// name, measured in Q4_K.
func v1KVs(version uint32, name string) []gguf.KV {
	return []gguf.KV{
		{Key: "general.type", Value: Type}, {Key: keyVersion, Value: version},
		{Key: keyModelName, Value: "m"}, {Key: keyTensorsSHA, Value: "t"}, {Key: keyConfigSHA, Value: "c"},
		{Key: keyWeightsSHA, Value: "w"}, {Key: keyStatsSHA, Value: "s"}, {Key: keyCorpusName, Value: "x.txt"},
		{Key: keyCorpusSHA, Value: "x"}, {Key: keyCtx, Value: uint32(128)}, {Key: keyChunks, Value: uint32(4)},
		{Key: keySettings, Value: "measurement 2; candidates Q4_K after the row-length fallback"},
		{Key: keyTensors, Value: []string{name}}, {Key: keyCount, Value: []uint32{1}},
		{Key: keyTypes, Value: []string{"Q4_K"}}, {Key: keyMethods, Value: []string{"gptq"}},
		{Key: keyBytes, Value: []uint64{144}}, {Key: keyError, Value: []float64{0.5}},
		{Key: keyProbe, Value: []uint32{0}}, {Key: keyProbeKL, Value: []float64{1e-4}},
	}
}

// TestVersion1: a file of layout 1 (no candidate list: its settings named the types; one
// probe per weight) reads with Key.Candidates nil and its measurements whole; other versions
// are refused.
func TestVersion1(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "v1.gguf")
	if err := gguf.WriteFile(p, &gguf.Header{KVs: v1KVs(1, "blk.0.attn_q.weight")}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	want := &File{Key: Key{ModelName: "m", TensorsSHA256: "t", ConfigSHA256: "c", WeightsSHA256: "w", StatsSHA256: "s",
		CorpusName: "x.txt", CorpusSHA256: "x", Ctx: 128, Chunks: 4, Settings: "measurement 2; candidates Q4_K after the row-length fallback"},
		Tensors: []Tensor{{Name: "blk.0.attn_q.weight", Candidates: []Candidate{{Type: gguf.Q4_K, Method: "gptq", Bytes: 144, Error: 0.5, Probed: true, ProbeKL: 1e-4}}}}}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("version 1 read as %+v, want %+v", f, want)
	}
	p3 := filepath.Join(dir, "v3.gguf")
	if err := gguf.WriteFile(p3, &gguf.Header{KVs: v1KVs(3, "a")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p3); err == nil || !strings.Contains(err.Error(), "sensitivity.version: 3") {
		t.Errorf("version 3: %v", err)
	}
}
