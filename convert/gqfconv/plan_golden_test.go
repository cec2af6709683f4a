package gqfconv

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden plans in testdata/plans")

// TestGoldenPlans: the gqf plan (dry run) of every scheme for both bundled models, compared
// with testdata/plans (regression records, reviewed when they change; -update rewrites them).
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
			got = append(got, '\n')
			path := filepath.Join("testdata", "plans", model+"-"+s+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./convert/gqfconv -run GoldenPlans -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s %s: the plan differs from %s (review, then rerun with -update)", model, s, path)
			}
		}
	}
}
