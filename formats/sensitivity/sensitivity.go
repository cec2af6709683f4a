// Package sensitivity reads and writes the measured sensitivities of a model's linear weights
// that `gquant convert --target-bpw` allocates bits from: for every weight, the encodings it
// may take, the bytes each stores and the output error each leaves, and the KL a probe of
// the model measured with the weight alone replaced by one of them. It holds measurements
// only: what convert makes of them (the per-weight gain, the allocation) is convert's.
//
// The file is a GGUF file (formats/gguf) without tensors, general.type "gquant.sensitivity".
// Metadata (all under "sensitivity."): version (u32, 1); the key the measurement is valid for:
// model.name, model.tensors_sha256, model.config_sha256, model.weights_sha256 (as the
// statistics record them, formats/stats.ModelID), stats.sha256 (of the statistics file's
// bytes), corpus.name, corpus.sha256, ctx and chunks (u32: the probe's windows), settings (a
// string naming everything else that changes the numbers: methods, GPTQ options, the
// candidate types, the measurement's version); and the measurements, in model order:
//
//	tensors            [string]  the weights' GGUF names (N)
//	count              [u32]     candidates per weight (N)
//	types              [string]  each candidate's ggml type name, weight after weight
//	methods            [string]  each candidate's rounding method ("gptq", "imatrix")
//	bytes              [u64]     each candidate's stored bytes
//	error              [f64]     each candidate's output error per calibration token,
//	                             Σ_r (ŵ_r − w_r)·H·(ŵ_r − w_r)ᵀ / tokens
//	probe              [u32]     per weight, the candidate (index among its own) the probe used
//	probe_kl           [f64]     per weight, the probe's mean KL with that candidate alone
//
// The same measurements always give the same bytes (keys sorted, as formats/gguf writes them).
package sensitivity

import (
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/gguf"
)

// Type is general.type of a sensitivity file.
const Type = "gquant.sensitivity"

// Version is the layout this package writes and reads.
const Version = 1

const (
	prefix        = "sensitivity."
	keyVersion    = prefix + "version"
	keyModelName  = prefix + "model.name"
	keyTensorsSHA = prefix + "model.tensors_sha256"
	keyConfigSHA  = prefix + "model.config_sha256"
	keyWeightsSHA = prefix + "model.weights_sha256"
	keyStatsSHA   = prefix + "stats.sha256"
	keyCorpusName = prefix + "corpus.name"
	keyCorpusSHA  = prefix + "corpus.sha256"
	keyCtx        = prefix + "ctx"
	keyChunks     = prefix + "chunks"
	keySettings   = prefix + "settings"
	keyTensors    = prefix + "tensors"
	keyCount      = prefix + "count"
	keyTypes      = prefix + "types"
	keyMethods    = prefix + "methods"
	keyBytes      = prefix + "bytes"
	keyError      = prefix + "error"
	keyProbe      = prefix + "probe"
	keyProbeKL    = prefix + "probe_kl"
)

// Key is what a measurement is valid for: the model, the statistics, the probe's windows and
// the settings. A file is used only for the key it was measured with (Check).
type Key struct {
	// ModelName names the model in messages; it is not compared.
	ModelName string
	// TensorsSHA256, ConfigSHA256 and WeightsSHA256 identify the model as formats/stats
	// records it (arch.TensorsDigest, config.json's SHA-256, arch.WeightsDigest).
	TensorsSHA256, ConfigSHA256, WeightsSHA256 string
	// StatsSHA256 is the SHA-256 of the statistics file the errors were measured with.
	StatsSHA256 string
	// CorpusName (not compared) and CorpusSHA256 name the probe's text; Ctx and Chunks its
	// windows.
	CorpusName, CorpusSHA256 string
	Ctx, Chunks              int
	// Settings names everything else that changes the measurements (convert writes it).
	Settings string
}

// Check reports, naming the first key that differs, why a file measured with k cannot serve
// want. path names the file.
func (k Key) Check(path string, want Key) error {
	for _, c := range []struct {
		key, have, want string
		what            string
	}{
		{keyTensorsSHA, k.TensorsSHA256, want.TensorsSHA256, "another model's tensors"},
		{keyConfigSHA, k.ConfigSHA256, want.ConfigSHA256, "another config.json"},
		{keyWeightsSHA, k.WeightsSHA256, want.WeightsSHA256, "another model's weights"},
		{keyStatsSHA, k.StatsSHA256, want.StatsSHA256, "other statistics"},
		{keyCorpusSHA, k.CorpusSHA256, want.CorpusSHA256, "another corpus"},
		{keyCtx, fmt.Sprint(k.Ctx), fmt.Sprint(want.Ctx), "other windows"},
		{keyChunks, fmt.Sprint(k.Chunks), fmt.Sprint(want.Chunks), "another number of windows"},
		{keySettings, k.Settings, want.Settings, "other settings"},
	} {
		if c.have != c.want {
			return fmt.Errorf("%s: %s: measured with %s (%q, not %q): measure again (remove the file, or name another)",
				path, c.key, c.what, short(c.have), short(c.want))
		}
	}
	return nil
}

// short cuts a digest to 12 characters for messages.
func short(s string) string {
	if len(s) == 64 {
		return s[:12] + "…"
	}
	return s
}

// Candidate is one encoding a weight may take, and what it costs.
type Candidate struct {
	Type   gguf.Type
	Method string
	Bytes  uint64
	// Error is the output error the encoding leaves, per calibration token:
	// Σ_r (ŵ_r − w_r)·H·(ŵ_r − w_r)ᵀ / tokens, H = Σ xᵀx of the weight's input.
	Error float64
}

// Tensor is one linear weight's measurements.
type Tensor struct {
	Name       string
	Candidates []Candidate
	// Probe is the candidate the probe replaced the weight with, ProbeKL the mean KL it
	// measured (the model with that weight alone replaced, against the model).
	Probe   int
	ProbeKL float64
}

// File is a sensitivity file.
type File struct {
	Key     Key
	Tensors []Tensor
}

// check validates the measurements (finite, non-negative, a probe among the candidates).
func (f *File) check(path string) error {
	seen := map[string]bool{}
	for _, t := range f.Tensors {
		switch {
		case t.Name == "" || seen[t.Name]:
			return fmt.Errorf("%s: %s: tensor %q is empty or repeated", path, keyTensors, t.Name)
		case len(t.Candidates) == 0:
			return fmt.Errorf("%s: %s: no candidates", path, t.Name)
		case t.Probe < 0 || t.Probe >= len(t.Candidates):
			return fmt.Errorf("%s: %s: probe candidate %d of %d", path, t.Name, t.Probe, len(t.Candidates))
		case !(t.ProbeKL >= 0) || math.IsInf(t.ProbeKL, 0):
			return fmt.Errorf("%s: %s: probe KL %g is not a finite non-negative number", path, t.Name, t.ProbeKL)
		}
		seen[t.Name] = true
		for _, c := range t.Candidates {
			if !(c.Error >= 0) || math.IsInf(c.Error, 0) {
				return fmt.Errorf("%s: %s: %v: error %g is not a finite non-negative number", path, t.Name, c.Type, c.Error)
			}
			if c.Type.BlockSize() == 0 || c.Method == "" {
				return fmt.Errorf("%s: %s: candidate %v (%q) is not a known type with a method", path, t.Name, c.Type, c.Method)
			}
		}
	}
	return nil
}

// Write writes f to path (temporary file, then rename).
func Write(path string, f *File) error {
	if err := f.check(path); err != nil {
		return err
	}
	k := f.Key
	var names, types, methods []string
	var count, probe []uint32
	var bytes []uint64
	var errs, probeKL []float64
	for _, t := range f.Tensors {
		names = append(names, t.Name)
		count = append(count, uint32(len(t.Candidates)))
		probe = append(probe, uint32(t.Probe))
		probeKL = append(probeKL, t.ProbeKL)
		for _, c := range t.Candidates {
			types = append(types, c.Type.String())
			methods = append(methods, c.Method)
			bytes = append(bytes, c.Bytes)
			errs = append(errs, c.Error)
		}
	}
	h := &gguf.Header{KVs: []gguf.KV{
		{Key: "general.type", Value: Type},
		{Key: keyVersion, Value: uint32(Version)},
		{Key: keyModelName, Value: k.ModelName},
		{Key: keyTensorsSHA, Value: k.TensorsSHA256},
		{Key: keyConfigSHA, Value: k.ConfigSHA256},
		{Key: keyWeightsSHA, Value: k.WeightsSHA256},
		{Key: keyStatsSHA, Value: k.StatsSHA256},
		{Key: keyCorpusName, Value: k.CorpusName},
		{Key: keyCorpusSHA, Value: k.CorpusSHA256},
		{Key: keyCtx, Value: uint32(k.Ctx)},
		{Key: keyChunks, Value: uint32(k.Chunks)},
		{Key: keySettings, Value: k.Settings},
		{Key: keyTensors, Value: names},
		{Key: keyCount, Value: count},
		{Key: keyTypes, Value: types},
		{Key: keyMethods, Value: methods},
		{Key: keyBytes, Value: bytes},
		{Key: keyError, Value: errs},
		{Key: keyProbe, Value: probe},
		{Key: keyProbeKL, Value: probeKL},
	}}
	return gguf.WriteFile(path, h, nil)
}

// Read reads a sensitivity file and checks it.
func Read(path string) (*File, error) {
	gf, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer gf.Close()
	if typ, err := gf.String("general.type"); err != nil || typ != Type {
		return nil, fmt.Errorf("%s: general.type: not a sensitivity file (want %q)", path, Type)
	}
	var probs []string
	str := func(key string) string {
		v, err := gf.String(key)
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", key, err))
		}
		return v
	}
	u32 := func(key string) int {
		v, err := gf.Uint32(key)
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", key, err))
		}
		return int(v)
	}
	if v := u32(keyVersion); len(probs) == 0 && v != Version {
		return nil, fmt.Errorf("%s: %s: %d, this build reads version %d: measure again", path, keyVersion, v, Version)
	}
	f := &File{Key: Key{
		ModelName: str(keyModelName), TensorsSHA256: str(keyTensorsSHA), ConfigSHA256: str(keyConfigSHA),
		WeightsSHA256: str(keyWeightsSHA), StatsSHA256: str(keyStatsSHA), CorpusName: str(keyCorpusName),
		CorpusSHA256: str(keyCorpusSHA), Ctx: u32(keyCtx), Chunks: u32(keyChunks), Settings: str(keySettings),
	}}
	names, err1 := gf.Strings(keyTensors)
	count, err2 := gf.Uint32s(keyCount)
	types, err3 := gf.Strings(keyTypes)
	methods, err4 := gf.Strings(keyMethods)
	bytes, err5 := gguf.Lookup[[]uint64](gf, keyBytes)
	errs, err6 := gguf.Lookup[[]float64](gf, keyError)
	probe, err7 := gf.Uint32s(keyProbe)
	probeKL, err8 := gguf.Lookup[[]float64](gf, keyProbeKL)
	for i, e := range []error{err1, err2, err3, err4, err5, err6, err7, err8} {
		if e != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", []string{keyTensors, keyCount, keyTypes, keyMethods, keyBytes, keyError, keyProbe, keyProbeKL}[i], e))
		}
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", path, probs[0])
	}
	n := len(names)
	if len(count) != n || len(probe) != n || len(probeKL) != n {
		return nil, fmt.Errorf("%s: %s, %s, %s: %d, %d and %d entries for %d tensors", path, keyCount, keyProbe, keyProbeKL, len(count), len(probe), len(probeKL), n)
	}
	total := 0
	for _, c := range count {
		total += int(c)
	}
	if len(types) != total || len(methods) != total || len(bytes) != total || len(errs) != total {
		return nil, fmt.Errorf("%s: %s, %s, %s, %s: %d, %d, %d and %d entries for %d candidates", path, keyTypes, keyMethods, keyBytes, keyError, len(types), len(methods), len(bytes), len(errs), total)
	}
	at := 0
	for i, name := range names {
		t := Tensor{Name: name, Probe: int(probe[i]), ProbeKL: probeKL[i]}
		for j := 0; j < int(count[i]); j++ {
			typ, err := gguf.ParseType(types[at])
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %s: %v", path, keyTypes, name, err)
			}
			t.Candidates = append(t.Candidates, Candidate{Type: typ, Method: methods[at], Bytes: bytes[at], Error: errs[at]})
			at++
		}
		f.Tensors = append(f.Tensors, t)
	}
	if err := f.check(path); err != nil {
		return nil, err
	}
	return f, nil
}
