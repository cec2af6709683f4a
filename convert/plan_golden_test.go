package convert

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden plans in testdata/plans")

// checkGolden compares a plan's JSON with testdata/plans/NAME.json (rewritten with -update).
// The golden plans are regression records, reviewed when they change; the choices they hold
// are checked against llama-quantize's by the byte-identity and policy tests.
func checkGolden(t *testing.T, name string, p *Plan) {
	t.Helper()
	got, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "plans", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./convert -run GoldenPlans -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s: the plan differs from %s (review, then go test ./convert -run GoldenPlans -update)", name, path)
	}
}

// TestGoldenPlansGGUF: the GGUF plan of every scheme for both bundled models.
func TestGoldenPlansGGUF(t *testing.T) {
	for _, model := range []string{"stories260k", "stories3m"} {
		dir := filepath.Join("..", "testdata", "models", model)
		for _, s := range SchemeNames() {
			p, err := Convert(dir, "", Options{Scheme: s, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, model+"-"+s, p)
		}
	}
}
