package encodings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/gquant/gquant/internal/problems"
)

// Read reads an encodings file.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// entryV1 is one 1.0.0 entry.
type entryV1 struct {
	Name             string    `json:"name"`
	EncType          string    `json:"enc_type"`
	Dtype            string    `json:"dtype"`
	Bw               int       `json:"bw"`
	IsSym            bool      `json:"is_sym"`
	Scale            []float32 `json:"scale,omitempty"`
	Offset           []int32   `json:"offset,omitempty"`
	BlockSize        int       `json:"block_size,omitempty"`
	CompressedBw     int       `json:"compressed_bw,omitempty"`
	PerBlockIntScale []uint16  `json:"per_block_int_scale,omitempty"`
}

type fileV1 struct {
	Version        string         `json:"version"`
	Activations    []entryV1      `json:"activation_encodings"`
	Params         []entryV1      `json:"param_encodings"`
	QuantizerArgs  *QuantizerArgs `json:"quantizer_args,omitempty"`
	ExcludedLayers []string       `json:"excluded_layers"`
}

// entryV0 is one entry of the dictionary formats (0.4.0 to 0.6.1).
type entryV0 struct {
	Bitwidth    int      `json:"bitwidth"`
	Dtype       string   `json:"dtype,omitempty"`
	IsSymmetric string   `json:"is_symmetric,omitempty"`
	Max         *float64 `json:"max,omitempty"`
	Min         *float64 `json:"min,omitempty"`
	Offset      *int64   `json:"offset,omitempty"`
	Scale       *float64 `json:"scale,omitempty"`
}

// quantizerArgsV0 is 0.6.1's quantizer_args (booleans written as strings or booleans).
type quantizerArgsV0 struct {
	ActivationBitwidth     int             `json:"activation_bitwidth"`
	Dtype                  string          `json:"dtype"`
	IsSymmetric            json.RawMessage `json:"is_symmetric"`
	ParamBitwidth          int             `json:"param_bitwidth"`
	PerChannelQuantization json.RawMessage `json:"per_channel_quantization"`
	QuantScheme            string          `json:"quant_scheme"`
}

// Parse parses an encodings file held in b (path names it in errors).
func Parse(path string, b []byte) (*File, error) {
	var probe struct {
		Version     string          `json:"version"`
		Activations json.RawMessage `json:"activation_encodings"`
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		return nil, fmt.Errorf("%s: is a list, want a JSON object", path)
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%s: %s", path, jsonProblem(err))
	}
	trimmed := bytes.TrimSpace(probe.Activations)
	switch probe.Version {
	case V1:
		return parseV1(path, b)
	case "", "0.4.0", "0.5.0", V061:
		if len(trimmed) > 0 && trimmed[0] == '[' {
			return nil, fmt.Errorf("%s: version: %q with list-shaped encodings (want %q)", path, probe.Version, V1)
		}
		return parseV0(path, b, probe.Version)
	}
	return nil, fmt.Errorf("%s: version: %q is not supported (want 0.4.0, 0.5.0, 0.6.1 or 1.0.0)", path, probe.Version)
}

// jsonProblem words a JSON decoding error: a value of the wrong type names its field and
// what it should be ("offset: number 1000000000000 does not fit int32"), instead of the Go type.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if i := strings.LastIndexByte(field, '.'); i >= 0 {
			field = field[i+1:]
		}
		if field == "" {
			return fmt.Sprintf("%s where a JSON object belongs", te.Value)
		}
		return fmt.Sprintf("%s: %s does not fit %s", field, te.Value, te.Type)
	}
	return err.Error()
}

func parseV1(path string, b []byte) (*File, error) {
	// Entries are decoded one by one, so that a bad one is named.
	var fv struct {
		fileV1
		Activations []json.RawMessage `json:"activation_encodings"`
		Params      []json.RawMessage `json:"param_encodings"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&fv); err != nil {
		return nil, fmt.Errorf("%s: %s", path, jsonProblem(err))
	}
	f := &File{Version: fv.Version, QuantizerArgs: fv.QuantizerArgs, ExcludedLayers: fv.ExcludedLayers}
	var probs []string
	conv := func(raws []json.RawMessage, kind string) []Encoding {
		var out []Encoding
		seen := map[string]bool{}
		for i, raw := range raws {
			var e entryV1
			if err := json.Unmarshal(raw, &e); err != nil {
				var named struct {
					Name string `json:"name"`
				}
				json.Unmarshal(raw, &named)
				name := named.Name
				if name == "" {
					name = fmt.Sprintf("%s[%d]", kind, i)
				}
				probs = append(probs, fmt.Sprintf("%s: %s", name, jsonProblem(err)))
				continue
			}
			if e.Name != "" && seen[e.Name] {
				probs = append(probs, fmt.Sprintf("%s: listed twice in %s", e.Name, kind))
				continue
			}
			seen[e.Name] = true
			enc := Encoding{Name: e.Name, Type: e.EncType, Dtype: e.Dtype, Bitwidth: e.Bw, Symmetric: e.IsSym,
				Scale: e.Scale, Offset: e.Offset, BlockSize: e.BlockSize, CompressedBitwidth: e.CompressedBw,
				PerBlockIntScale: e.PerBlockIntScale}
			if err := enc.Validate(); err != nil {
				name := e.Name
				if name == "" {
					name = fmt.Sprintf("%s[%d]", kind, i)
				}
				probs = append(probs, fmt.Sprintf("%s: %v", name, err))
			}
			out = append(out, enc)
		}
		return out
	}
	f.Activations = conv(fv.Activations, "activation_encodings")
	f.Params = conv(fv.Params, "param_encodings")
	if err := joinProblems(path, probs); err != nil {
		return nil, err
	}
	return f, nil
}

func parseV0(path string, b []byte, version string) (*File, error) {
	var fv struct {
		Activations   map[string][]entryV0 `json:"activation_encodings"`
		Params        map[string][]entryV0 `json:"param_encodings"`
		QuantizerArgs *quantizerArgsV0     `json:"quantizer_args"`
	}
	if err := json.Unmarshal(b, &fv); err != nil {
		return nil, fmt.Errorf("%s: %s", path, jsonProblem(err))
	}
	f := &File{Version: version}
	if q := fv.QuantizerArgs; q != nil {
		f.QuantizerArgs = &QuantizerArgs{ActivationBitwidth: q.ActivationBitwidth, Dtype: q.Dtype,
			IsSymmetric: truthy(q.IsSymmetric), ParamBitwidth: q.ParamBitwidth,
			PerChannelQuantization: truthy(q.PerChannelQuantization), QuantScheme: q.QuantScheme}
	}
	var probs []string
	conv := func(m map[string][]entryV0) []Encoding {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		var out []Encoding
		for _, n := range names {
			enc, err := fromV0(n, m[n])
			if err == nil {
				err = enc.Validate()
			}
			if err != nil {
				probs = append(probs, fmt.Sprintf("%s: %v", n, err))
			}
			out = append(out, enc)
		}
		return out
	}
	f.Activations = conv(fv.Activations)
	f.Params = conv(fv.Params)
	if err := joinProblems(path, probs); err != nil {
		return nil, err
	}
	return f, nil
}

// truthy reads a boolean written as true/false or "True"/"False".
func truthy(raw json.RawMessage) bool {
	s := strings.Trim(strings.TrimSpace(string(raw)), `"`)
	return strings.EqualFold(s, "true")
}

// fromV0 turns a dictionary-format list (one entry per channel) into one encoding.
func fromV0(name string, list []entryV0) (Encoding, error) {
	e := Encoding{Name: name, Type: PerTensor, Dtype: Int}
	if len(list) == 0 {
		return e, fmt.Errorf("no entries")
	}
	if len(list) > 1 {
		e.Type = PerChannel
	}
	for i, x := range list {
		if i == 0 {
			e.Bitwidth = x.Bitwidth
			e.Symmetric = strings.EqualFold(x.IsSymmetric, "true")
			if strings.EqualFold(x.Dtype, "float") {
				e.Dtype = Float
			}
		} else if x.Bitwidth != e.Bitwidth {
			return e, fmt.Errorf("channel %d: bitwidth %d differs from %d", i, x.Bitwidth, e.Bitwidth)
		}
		if e.Dtype == Float {
			continue
		}
		if x.Scale == nil || x.Offset == nil {
			return e, fmt.Errorf("channel %d: scale or offset missing", i)
		}
		if *x.Offset < math.MinInt32 || *x.Offset > math.MaxInt32 {
			return e, fmt.Errorf("channel %d: offset %d out of range", i, *x.Offset)
		}
		e.Scale = append(e.Scale, float32(*x.Scale))
		e.Offset = append(e.Offset, int32(*x.Offset))
	}
	return e, nil
}

// Validate checks one encoding.
func (e *Encoding) Validate() error {
	if e.Name == "" {
		return fmt.Errorf("name: missing")
	}
	if e.Bitwidth < 4 || e.Bitwidth > 32 {
		return fmt.Errorf("bw: %d out of range [4, 32]", e.Bitwidth)
	}
	switch e.Dtype {
	case Float:
		return nil
	case Int:
	default:
		return fmt.Errorf("dtype: %q (want INT or FP)", e.Dtype)
	}
	if len(e.Scale) == 0 || len(e.Scale) != len(e.Offset) {
		return fmt.Errorf("%d scales and %d offsets (want as many, at least one)", len(e.Scale), len(e.Offset))
	}
	for i, s := range e.Scale {
		if !(s > 0) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("scale[%d]: %g is not positive and finite", i, s)
		}
	}
	switch e.Type {
	case PerTensor:
		if len(e.Scale) != 1 {
			return fmt.Errorf("PER_TENSOR with %d scales", len(e.Scale))
		}
	case PerChannel:
	case PerBlock:
		if e.BlockSize <= 0 {
			return fmt.Errorf("PER_BLOCK without block_size")
		}
	case LPBQ:
		if e.BlockSize <= 0 || e.CompressedBitwidth <= 0 || e.CompressedBitwidth >= e.Bitwidth {
			return fmt.Errorf("LPBQ: block_size %d, compressed_bw %d, bw %d", e.BlockSize, e.CompressedBitwidth, e.Bitwidth)
		}
		if len(e.PerBlockIntScale) == 0 || len(e.PerBlockIntScale)%len(e.Scale) != 0 {
			return fmt.Errorf("LPBQ: %d per-block int scales for %d channels", len(e.PerBlockIntScale), len(e.Scale))
		}
	default:
		return fmt.Errorf("enc_type: %q (want PER_TENSOR, PER_CHANNEL, PER_BLOCK or LPBQ)", e.Type)
	}
	return nil
}

func joinProblems(path string, probs []string) error {
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", path, strings.Join(problems.First(probs, 8), "; "))
}
