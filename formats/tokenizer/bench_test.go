package tokenizer

import (
	"strings"
	"testing"
)

// corpus returns about n bytes of varied text built from the golden samples.
func corpus(t testing.TB, n int) string {
	g := readGoldenTB(t, "tiny-qwen.json")
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		c := g.Cases[i%len(g.Cases)]
		sb.WriteString(c.Text)
		sb.WriteString(" ")
		sb.WriteString(strings.Repeat("x", i%7)) // vary the words a little
		sb.WriteString("\n")
	}
	return sb.String()
}

func benchEncode(b *testing.B, tk *Tokenizer) {
	text := corpus(b, 1<<20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tk.cache = map[string][]int32{}
		tk.Encode(text, false)
	}
}

func BenchmarkEncodeStories260k1MB(b *testing.B) { benchEncode(b, loadT(b, stories260k)) }
func BenchmarkEncodeTinyQwen1MB(b *testing.B)    { benchEncode(b, loadT(b, "testdata/tiny-qwen")) }
func BenchmarkEncodeQwen3_1MB(b *testing.B)      { benchEncode(b, loadPeer(b, "qwen3")) }
func BenchmarkEncodeLlama3_1MB(b *testing.B)     { benchEncode(b, loadPeer(b, "llama3")) }
func BenchmarkLoadQwen3(b *testing.B) {
	dir := requirePeer(b, "qwen3")
	for i := 0; i < b.N; i++ {
		loadT(b, dir)
	}
}

// BenchmarkLoadGemma3: Gemma 3's 262,144 pieces, 514,906 merges and 6,415 added tokens.
func BenchmarkLoadGemma3(b *testing.B) {
	dir := requirePeer(b, "gemma3")
	for i := 0; i < b.N; i++ {
		loadT(b, dir)
	}
}
func BenchmarkGGUFMetadataGemma3(b *testing.B) {
	tk := loadPeer(b, "gemma3")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tk.GGUFMetadata(); err != nil {
			b.Fatal(err)
		}
	}
}
func BenchmarkEncodeGemma3_1MB(b *testing.B) { benchEncode(b, loadPeer(b, "gemma3")) }
