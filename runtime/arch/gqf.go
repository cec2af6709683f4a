package arch

import (
	"encoding/json"
	"fmt"

	"github.com/gquant/gquant/formats/gqf"
)

// SpecFromGQF returns the family and spec of the model a gqf manifest records (its HF
// architecture and config.json), errors prefixed "config: ".
func SpecFromGQF(m *gqf.Manifest) (Family, *Spec, error) {
	fam, err := ForHF(m.GetConfig().GetHfArchitecture())
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(m.GetConfig().GetConfigJson(), &cfg); err != nil {
		return nil, nil, fmt.Errorf("config: %v", err)
	}
	spec, err := fam.SpecFromHF(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	return fam, spec, nil
}

// CheckGQF refuses a model that has no gqf (and so no ONNX) form: a mixture of experts, whose
// routing the primitive graph cannot express. Convert such a model to GGUF.
func CheckGQF(s *Spec) error {
	if s.Experts > 0 {
		return fmt.Errorf("%s: a mixture of experts (%d experts) has no gqf or ONNX form: convert it to GGUF", s.HFArch, s.Experts)
	}
	return nil
}
