package calibrate

import (
	"errors"
	"fmt"

	"github.com/gquant/gquant/formats/encodings"
	"github.com/gquant/gquant/internal/problems"
	"github.com/gquant/gquant/quantize"
)

// quantScheme names the range setting as AIMET's quant_scheme does.
func quantScheme(m quantize.RangeMode) string {
	switch m {
	case quantize.RangeMinMax:
		return "post_training_tf"
	case quantize.RangePercentile:
		return "post_training_percentile"
	}
	return "post_training_tf_enhanced"
}

// CheckEncodings verifies an encodings file before it is written: every entry is valid
// (formats/encodings), and activation and parameter encodings never mix: a name listed twice,
// or among both activations and parameters, is refused (a converter would silently ignore an
// activation placed among parameters). All problems are reported in one error.
func CheckEncodings(f *encodings.File) error {
	seen := map[string]string{}
	var probs []string
	for _, group := range []struct {
		kind string
		es   []encodings.Encoding
	}{{"activation", f.Activations}, {"parameter", f.Params}} {
		for i := range group.es {
			e := &group.es[i]
			if k, dup := seen[e.Name]; dup {
				probs = append(probs, fmt.Sprintf("%s: listed as %s and as %s", e.Name, k, group.kind))
			}
			seen[e.Name] = group.kind
			if err := e.Validate(); err != nil {
				probs = append(probs, fmt.Sprintf("%s: %v", e.Name, err))
			}
		}
	}
	if len(probs) > 0 {
		return errors.New(problems.Join(probs, 10))
	}
	return nil
}

// WriteEncodings checks the file (CheckEncodings) and writes it as AIMET encodings JSON of the
// given version (encodings.V1 "1.0.0" or encodings.V061 "0.6.1") through a temporary file,
// replacing an existing one.
func WriteEncodings(path string, f *encodings.File, version string) error {
	if err := CheckEncodings(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.WriteFile(path, version, true)
}
