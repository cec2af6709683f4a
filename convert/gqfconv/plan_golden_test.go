package gqfconv

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/internal/golden"
)

// TestGoldenPlans: the gqf plan (dry run) of every scheme for both bundled models, against
// testdata/plans (regression records, reviewed when they change; -update rewrites them).
func TestGoldenPlans(t *testing.T) {
	for _, model := range []string{"stories260k", "stories3m"} {
		dir := filepath.Join("..", "..", "testdata", "models", model)
		for _, s := range Schemes() {
			p, err := Convert(dir, "", Options{Scheme: s, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "plans", model+"-"+s+".json"), append(got, '\n'))
		}
	}
}
