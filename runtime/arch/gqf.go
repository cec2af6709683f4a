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
