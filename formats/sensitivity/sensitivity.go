// Package sensitivity reads and writes the measured sensitivities of a model's weights that
// `gquant convert --target-bpw` allocates bits from: for every weight, the encodings it may
// take, the bytes each stores and the output error each leaves, and the KL a probe of the
// model measured with the weight alone replaced by some of them. It holds measurements only:
// what convert makes of them (the per-weight gains, the allocation) is convert's.
//
// The file is a GGUF file (formats/gguf) without tensors, general.type "gquant.sensitivity".
// Metadata (all under "sensitivity."): version (u32, 2); the key the measurement is valid for:
// model.name, model.tensors_sha256, model.config_sha256, model.weights_sha256 (as the
// statistics record them, formats/stats.ModelID), stats.sha256 (of the statistics file's
// bytes), corpus.name, corpus.sha256, ctx and chunks (u32: the probe's windows), settings (a
// string naming everything else that changes the numbers: methods, GPTQ options, the
// measurement's version), candidates ([string]: the ggml types every weight was measured in
// before its row-length fallback, in the order measured, which each weight's own list
// follows); and the measurements, in model order:
//
//	tensors            [string]  the weights' GGUF names (N)
//	count              [u32]     candidates per weight (N)
//	types              [string]  each candidate's ggml type name, weight after weight
//	methods            [string]  each candidate's rounding method ("gptq", "imatrix")
//	bytes              [u64]     each candidate's stored bytes
//	error              [f64]     each candidate's output error per calibration token,
//	                             Σ_r (ŵ_r − w_r)·H·(ŵ_r − w_r)ᵀ / tokens
//	probe_kl           [f64]     each candidate's probe: the mean KL of the model with the
//	                             weight alone replaced by it, or −1 where it was not probed
//
// The same measurements always give the same bytes (keys sorted, as formats/gguf writes them).
//
// Version 1 had no candidates key (its settings named the candidate types) and one probe per
// weight (probe [u32]: the candidate's index among the weight's; probe_kl [f64] per weight):
// Read reads such a file with Key.Candidates nil and that candidate probed, and what to make
// of it is the caller's.
package sensitivity

import (
	"fmt"
	"math"
	"slices"

	"github.com/gquant/gquant/formats/gguf"
)

// Type is general.type of a sensitivity file.
const Type = "gquant.sensitivity"

// Version is the layout this package writes; Read also reads version 1 (no candidates key).
const Version = 2

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
	// KeyCandidates is the candidate list's key (Key.Candidates), for messages.
	KeyCandidates = prefix + "candidates"
	keyTensors    = prefix + "tensors"
	keyCount      = prefix + "count"
	keyTypes      = prefix + "types"
	keyMethods    = prefix + "methods"
	keyBytes      = prefix + "bytes"
	keyError      = prefix + "error"
	keyProbe      = prefix + "probe" // version 1
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
	// Candidates are the types every weight was measured in, before its row-length fallback,
	// in order (nil in a file of version 1). Check does not compare them: a file measured in
	// fewer types can be extended (convert).
	Candidates []gguf.Type
}

// Check reports, naming the first key that differs, why a file measured with k cannot serve
// want (Candidates aside). path names the file.
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
	// Probed says whether a probe replaced the weight with this encoding; ProbeKL is the mean
	// KL it measured (the model with that weight alone replaced, against the model).
	Probed  bool
	ProbeKL float64
}

// Tensor is one weight's measurements: at least one candidate probed.
type Tensor struct {
	Name       string
	Candidates []Candidate
}

// File is a sensitivity file.
type File struct {
	Key     Key
	Tensors []Tensor
}

// check validates the measurements (finite, non-negative, a probe among the candidates).
func (f *File) check(path string) error {
	for i, t := range f.Key.Candidates {
		if t.BlockSize() == 0 || slices.Contains(f.Key.Candidates[:i], t) {
			return fmt.Errorf("%s: %s: %v is not a known type, or repeated", path, KeyCandidates, t)
		}
	}
	seen := map[string]bool{}
	for _, t := range f.Tensors {
		switch {
		case t.Name == "" || seen[t.Name]:
			return fmt.Errorf("%s: %s: tensor %q is empty or repeated", path, keyTensors, t.Name)
		case len(t.Candidates) == 0:
			return fmt.Errorf("%s: %s: no candidates", path, t.Name)
		case !slices.ContainsFunc(t.Candidates, func(c Candidate) bool { return c.Probed }):
			return fmt.Errorf("%s: %s: no candidate probed", path, t.Name)
		}
		seen[t.Name] = true
		for _, c := range t.Candidates {
			if !(c.Error >= 0) || math.IsInf(c.Error, 0) {
				return fmt.Errorf("%s: %s: %v: error %g is not a finite non-negative number", path, t.Name, c.Type, c.Error)
			}
			if c.Probed && (!(c.ProbeKL >= 0) || math.IsInf(c.ProbeKL, 0)) {
				return fmt.Errorf("%s: %s: %v: probe KL %g is not a finite non-negative number", path, t.Name, c.Type, c.ProbeKL)
			}
			if c.Type.BlockSize() == 0 || c.Method == "" {
				return fmt.Errorf("%s: %s: candidate %v (%q) is not a known type with a method", path, t.Name, c.Type, c.Method)
			}
		}
	}
	return nil
}

// Write writes f to path (temporary file, then rename). The key must name the candidates.
func Write(path string, f *File) error {
	if len(f.Key.Candidates) == 0 {
		return fmt.Errorf("%s: %s: no candidate types", path, KeyCandidates)
	}
	if err := f.check(path); err != nil {
		return err
	}
	k := f.Key
	cands := make([]string, 0, len(k.Candidates))
	for _, t := range k.Candidates {
		cands = append(cands, t.String())
	}
	var names, types, methods []string
	var count []uint32
	var bytes []uint64
	var errs, probeKL []float64
	for _, t := range f.Tensors {
		names = append(names, t.Name)
		count = append(count, uint32(len(t.Candidates)))
		for _, c := range t.Candidates {
			types = append(types, c.Type.String())
			methods = append(methods, c.Method)
			bytes = append(bytes, c.Bytes)
			errs = append(errs, c.Error)
			kl := -1.0
			if c.Probed {
				kl = c.ProbeKL
			}
			probeKL = append(probeKL, kl)
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
		{Key: KeyCandidates, Value: cands},
		{Key: keyTensors, Value: names},
		{Key: keyCount, Value: count},
		{Key: keyTypes, Value: types},
		{Key: keyMethods, Value: methods},
		{Key: keyBytes, Value: bytes},
		{Key: keyError, Value: errs},
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
	v := u32(keyVersion)
	if len(probs) == 0 && v != 1 && v != Version {
		return nil, fmt.Errorf("%s: %s: %d, this build reads versions 1 and %d: measure again", path, keyVersion, v, Version)
	}
	f := &File{Key: Key{
		ModelName: str(keyModelName), TensorsSHA256: str(keyTensorsSHA), ConfigSHA256: str(keyConfigSHA),
		WeightsSHA256: str(keyWeightsSHA), StatsSHA256: str(keyStatsSHA), CorpusName: str(keyCorpusName),
		CorpusSHA256: str(keyCorpusSHA), Ctx: u32(keyCtx), Chunks: u32(keyChunks), Settings: str(keySettings),
	}}
	if v >= 2 {
		cands, err := gf.Strings(KeyCandidates)
		switch {
		case err != nil:
			probs = append(probs, fmt.Sprintf("%s: %v", KeyCandidates, err))
		case len(cands) == 0:
			probs = append(probs, KeyCandidates+": no candidate types")
		}
		for _, c := range cands {
			typ, err := gguf.ParseType(c)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %v", path, KeyCandidates, err)
			}
			f.Key.Candidates = append(f.Key.Candidates, typ)
		}
	}
	names, err1 := gf.Strings(keyTensors)
	count, err2 := gf.Uint32s(keyCount)
	types, err3 := gf.Strings(keyTypes)
	methods, err4 := gf.Strings(keyMethods)
	bytes, err5 := gguf.Lookup[[]uint64](gf, keyBytes)
	errs, err6 := gguf.Lookup[[]float64](gf, keyError)
	probeKL, err7 := gguf.Lookup[[]float64](gf, keyProbeKL)
	var probe []uint32
	var err8 error
	if v == 1 {
		probe, err8 = gf.Uint32s(keyProbe)
	}
	for i, e := range []error{err1, err2, err3, err4, err5, err6, err7, err8} {
		if e != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", []string{keyTensors, keyCount, keyTypes, keyMethods, keyBytes, keyError, keyProbeKL, keyProbe}[i], e))
		}
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", path, probs[0])
	}
	n := len(names)
	if len(count) != n || (v == 1 && (len(probe) != n || len(probeKL) != n)) {
		return nil, fmt.Errorf("%s: %s, %s, %s: %d, %d and %d entries for %d tensors", path, keyCount, keyProbe, keyProbeKL, len(count), len(probe), len(probeKL), n)
	}
	total := 0
	for _, c := range count {
		total += int(c)
	}
	if len(types) != total || len(methods) != total || len(bytes) != total || len(errs) != total || (v >= 2 && len(probeKL) != total) {
		return nil, fmt.Errorf("%s: %s, %s, %s, %s, %s: %d, %d, %d, %d and %d entries for %d candidates", path, keyTypes, keyMethods, keyBytes, keyError, keyProbeKL,
			len(types), len(methods), len(bytes), len(errs), len(probeKL), total)
	}
	at := 0
	for i, name := range names {
		t := Tensor{Name: name}
		for j := 0; j < int(count[i]); j++ {
			typ, err := gguf.ParseType(types[at])
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %s: %v", path, keyTypes, name, err)
			}
			c := Candidate{Type: typ, Method: methods[at], Bytes: bytes[at], Error: errs[at]}
			switch {
			case v == 1 && j == int(probe[i]):
				c.Probed, c.ProbeKL = true, probeKL[i]
			case v >= 2 && probeKL[at] != -1:
				c.Probed, c.ProbeKL = true, probeKL[at]
			}
			t.Candidates = append(t.Candidates, c)
			at++
		}
		f.Tensors = append(f.Tensors, t)
	}
	if err := f.check(path); err != nil {
		return nil, err
	}
	return f, nil
}
