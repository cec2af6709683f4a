// Package peers lets tests drive the real interop peers installed from npm (stock llama.cpp
// through node-llama-cpp, onnxruntime-node) and read the shared models' reference.json. It is
// only imported by tests.
//
// A peer test is skipped unless GQUANT_NODE_MODULES names the node_modules folder holding the
// peer (make test sets it), and fails instead of skipping when GQUANT_REQUIRE_PEERS=1, so that
// CI cannot pass without the peers.
package peers

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Require returns node and the node_modules folder holding package pkg ("node-llama-cpp",
// "onnxruntime-node"), or skips the test (fails it under GQUANT_REQUIRE_PEERS=1).
func Require(t testing.TB, pkg string) (node, modules string) {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("GQUANT_REQUIRE_PEERS") == "1" {
			t.Fatalf("interop peer %s unavailable: %s", pkg, why)
		}
		t.Skipf("interop peer %s unavailable: %s (set GQUANT_NODE_MODULES; make test does)", pkg, why)
	}
	modules = os.Getenv("GQUANT_NODE_MODULES")
	if modules == "" {
		missing("GQUANT_NODE_MODULES is not set")
	}
	if _, err := os.Stat(filepath.Join(modules, pkg)); err != nil {
		missing(err.Error())
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing(err.Error())
	}
	return node, modules
}

// Root is the repository's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Script is the path of a driver in testdata/interop ("llamacpp.mjs", "ort.mjs").
func Script(name string) string { return filepath.Join(Root(), "testdata", "interop", name) }

// Run sends req (as a JSON file) to a driver script and decodes its JSON answer into out.
func Run(t testing.TB, node, modules, script string, req, out any) {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	reqPath := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(reqPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, Script(script), reqPath)
	cmd.Env = append(os.Environ(), "GQUANT_NODE_MODULES="+modules)
	answer, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("%s: %v: %s", script, err, ee.Stderr)
		}
		t.Fatalf("%s: %v", script, err)
	}
	if err := json.Unmarshal(answer, out); err != nil {
		t.Fatalf("%s: unexpected answer (%v): %.300s", script, err, answer)
	}
}

// Reference is the part of a shared model's reference.json the tests use.
type Reference struct {
	Prompts []struct {
		Text   string    `json:"text"`
		IDs    []int     `json:"ids"` // with BOS
		Logits []float32 `json:"last_position_logits"`
		Top5   []struct {
			ID    int     `json:"id"`
			Logit float64 `json:"logit"`
		} `json:"last_position_top5"`
	} `json:"prompts"`
	Greedy struct {
		PromptIDs []int `json:"prompt_ids"`
		NewIDs    []int `json:"new_ids"`
	} `json:"greedy"`
}

// LoadReference reads dir/reference.json.
func LoadReference(t testing.TB, dir string) *Reference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", filepath.Join(dir, "reference.json"), err)
	}
	return &r
}

// Stories3m is the path of the bundled stories3m model (testdata/models/stories3m, with its
// README: provenance and license).
func Stories3m(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(Root(), "testdata", "models", "stories3m")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatalf("testdata/models/stories3m is missing: %v", err)
	}
	return dir
}
