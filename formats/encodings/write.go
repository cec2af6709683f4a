package encodings

import (
	"encoding/json"
	"fmt"

	"github.com/gquant/gquant/internal/atomicfile"
)

// Marshal renders the file in version V1 or V061 (which cannot hold PER_BLOCK or LPBQ
// encodings). The output is deterministic.
func (f *File) Marshal(version string) ([]byte, error) {
	var v any
	switch version {
	case V1:
		fv := fileV1{Version: V1, Activations: []entryV1{}, Params: []entryV1{}, QuantizerArgs: f.QuantizerArgs, ExcludedLayers: f.ExcludedLayers}
		if fv.ExcludedLayers == nil {
			fv.ExcludedLayers = []string{}
		}
		for _, e := range f.Activations {
			fv.Activations = append(fv.Activations, toV1(e))
		}
		for _, e := range f.Params {
			fv.Params = append(fv.Params, toV1(e))
		}
		v = fv
	case V061:
		type fileOut struct {
			Version       string               `json:"version"`
			Activations   map[string][]entryV0 `json:"activation_encodings"`
			Params        map[string][]entryV0 `json:"param_encodings"`
			QuantizerArgs map[string]any       `json:"quantizer_args,omitempty"`
		}
		fo := fileOut{Version: V061, Activations: map[string][]entryV0{}, Params: map[string][]entryV0{}}
		for _, e := range f.Activations {
			list, err := toV0(e)
			if err != nil {
				return nil, err
			}
			fo.Activations[e.Name] = list
		}
		for _, e := range f.Params {
			list, err := toV0(e)
			if err != nil {
				return nil, err
			}
			fo.Params[e.Name] = list
		}
		if q := f.QuantizerArgs; q != nil {
			fo.QuantizerArgs = map[string]any{"activation_bitwidth": q.ActivationBitwidth, "dtype": q.Dtype,
				"is_symmetric": pyBool(q.IsSymmetric), "param_bitwidth": q.ParamBitwidth,
				"per_channel_quantization": pyBool(q.PerChannelQuantization), "quant_scheme": q.QuantScheme}
		}
		v = fo
	default:
		return nil, fmt.Errorf("version: %q is not supported for writing (want %s or %s)", version, V1, V061)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func toV1(e Encoding) entryV1 {
	return entryV1{Name: e.Name, EncType: e.Type, Dtype: e.Dtype, Bw: e.Bitwidth, IsSym: e.Symmetric,
		Scale: e.Scale, Offset: e.Offset, BlockSize: e.BlockSize, CompressedBw: e.CompressedBitwidth,
		PerBlockIntScale: e.PerBlockIntScale}
}

// pyBool writes a boolean as AIMET's dictionary formats do ("True"/"False").
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// toV0 expands an encoding into 0.6.1's per-channel list, with min and max derived from
// scale and offset: min = offset·scale, max = (offset + 2^bw − 1)·scale.
func toV0(e Encoding) ([]entryV0, error) {
	if e.Dtype == Float {
		return []entryV0{{Bitwidth: e.Bitwidth, Dtype: "float"}}, nil
	}
	if e.Type == PerBlock || e.Type == LPBQ {
		return nil, fmt.Errorf("%s: %s encodings cannot be written as version %s (use %s)", e.Name, e.Type, V061, V1)
	}
	steps := float64(uint64(1)<<e.Bitwidth - 1)
	var out []entryV0
	for i, s := range e.Scale {
		sc, off := float64(s), int64(e.Offset[i])
		mn, mx := float64(off)*sc, (float64(off)+steps)*sc
		out = append(out, entryV0{Bitwidth: e.Bitwidth, Dtype: "int", IsSymmetric: pyBool(e.Symmetric),
			Min: &mn, Max: &mx, Offset: &off, Scale: &sc})
	}
	return out, nil
}

// WriteFile writes the file in the given version through a temporary file renamed into
// place; an existing file is replaced only when force is set.
func (f *File) WriteFile(path, version string, force bool) error {
	if err := atomicfile.CheckNew(path, force); err != nil {
		return err
	}
	b, err := f.Marshal(version)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.WriteFile(path, b)
}
