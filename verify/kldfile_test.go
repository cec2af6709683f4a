package verify

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/half"
)

// llamaRow builds one stored row by llama-perplexity's rule, written out independently in float64
// (scale and minimum rounded to float32 as the file stores them).
func llamaRow(logits []float32) []uint16 {
	mx, mn := math.Inf(-1), math.Inf(1)
	for _, v := range logits {
		mx, mn = math.Max(mx, float64(v)), math.Min(mn, float64(v))
	}
	mn = math.Max(mn, mx-16)
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v) - mx)
	}
	scale := float32((mx - mn) / 65535)
	minLP := float32(mn - mx - math.Log(z))
	row := make([]uint16, RowLen(len(logits)))
	s, m := math.Float32bits(scale), math.Float32bits(minLP)
	row[0], row[1], row[2], row[3] = uint16(s), uint16(s>>16), uint16(m), uint16(m>>16)
	for i, v := range logits {
		if float64(v) > mn {
			row[4+i] = uint16(math.Round((float64(v) - mn) / float64(scale)))
		}
	}
	return row
}

func randLogits(rng *rand.Rand, v int, sd float64) []float32 {
	x := make([]float32, v)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sd)
	}
	return x
}

func TestQuantizeLogProbs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 20; trial++ {
		V := 31 + trial // odd and even vocabularies
		x := randLogits(rng, V, 1+float64(trial))
		row := make(RefRow, RowLen(V))
		QuantizeLogProbs(row, x)
		want := llamaRow(x)
		if math.Abs(float64(row.Scale()-RefRow(want).Scale())) > 1e-6*float64(RefRow(want).Scale()) ||
			math.Abs(float64(row.MinLogProb()-RefRow(want).MinLogProb())) > 1e-5 {
			t.Fatalf("V=%d: scale %g min %g, want %g %g", V, row.Scale(), row.MinLogProb(), RefRow(want).Scale(), RefRow(want).MinLogProb())
		}
		for i := 0; i < V; i++ {
			if d := int(row[4+i]) - int(want[4+i]); d < -1 || d > 1 { // float32 vs float64 rounding
				t.Fatalf("V=%d: q[%d] = %d, want %d", V, i, row[4+i], want[4+i])
			}
		}
		// Dequantized log-probabilities are within a step of the exact ones above the floor.
		exact := make([]float64, V)
		LogSoftmax(exact, x)
		got := make([]float64, V)
		row.LogProbs(got)
		for i := range got {
			if exact[i] > float64(row.MinLogProb())+1e-3 && math.Abs(got[i]-exact[i]) > float64(row.Scale())+1e-5 {
				t.Fatalf("V=%d: log p[%d] = %g, exact %g (step %g)", V, i, got[i], exact[i], row.Scale())
			}
		}
	}
}

// writeLlamaFile writes a file the way llama-perplexity does: header, tokens, then rows.
func writeLlamaFile(t *testing.T, path string, ctx, vocab int, tokens []int, rows [][]uint16) {
	var b []byte
	b = append(b, "_logits_"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(ctx))
	b = binary.LittleEndian.AppendUint32(b, uint32(vocab))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(tokens)/ctx))
	for _, tk := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(tk))
	}
	for _, r := range rows {
		for _, v := range r {
			b = binary.LittleEndian.AppendUint16(b, v)
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadLlamaFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const ctx, V, chunks = 8, 11, 3
	tokens := make([]int, ctx*chunks)
	for i := range tokens {
		tokens[i] = rng.IntN(V)
	}
	var rows [][]uint16
	for i := 0; i < chunks*(ctx-1-ctx/2); i++ {
		rows = append(rows, llamaRow(randLogits(rng, V, 3)))
	}
	path := filepath.Join(t.TempDir(), "base.kld")
	writeLlamaFile(t, path, ctx, V, tokens, rows)
	k, err := OpenKLD(path)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if k.Ctx != ctx || k.Vocab != V || k.Chunks != chunks || !slices.Equal(k.Tokens, tokens) || k.Meta != nil || k.HasLogits() {
		t.Fatalf("header: ctx %d vocab %d chunks %d meta %v logits %v", k.Ctx, k.Vocab, k.Chunks, k.Meta, k.HasLogits())
	}
	for c := 0; c < chunks; c++ {
		got, err := k.ReadChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range got {
			if !slices.Equal([]uint16(r), rows[c*k.Scored()+j]) {
				t.Fatalf("chunk %d row %d differs", c, j)
			}
		}
		if lg, err := k.ReadChunkLogits(c); lg != nil || err != nil {
			t.Fatalf("logits from a llama.cpp file: %v %v", lg, err)
		}
	}
}

func TestKLDRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const ctx, V, chunks = 10, 16, 2
	tokens := make([]int, ctx*chunks)
	for i := range tokens {
		tokens[i] = rng.IntN(V)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ref.kld")
	w, err := CreateKLD(path, ctx, V, tokens, true, false)
	if err != nil {
		t.Fatal(err)
	}
	var all [][]float32
	for i := 0; i < chunks*(ctx-1-ctx/2); i++ {
		x := randLogits(rng, V, 2)
		all = append(all, x)
		if err := w.WriteRow(x); err != nil {
			t.Fatal(err)
		}
	}
	meta := &KLDMeta{Reference: "m", Greedy: &GreedyRefData{Gen: 3, Prompts: []GreedyPrompt{{Text: "a", Tokens: []int{1, 2}, Continuation: []int{3, 4, 5}}}}}
	if err := w.Close(meta); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if _, err := CreateKLD(path, ctx, V, tokens, true, false); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("existing file without force: %v", err)
	}
	k, err := OpenKLD(path)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if !k.HasLogits() || k.Meta == nil || k.Meta.Greedy == nil || !slices.Equal(k.Meta.Greedy.Prompts[0].Continuation, []int{3, 4, 5}) {
		t.Fatalf("trailer lost: %+v", k.Meta)
	}
	for c := 0; c < chunks; c++ {
		rows, _ := k.ReadChunk(c)
		lg, err := k.ReadChunkLogits(c)
		if err != nil {
			t.Fatal(err)
		}
		for j := range rows {
			x := all[c*k.Scored()+j]
			if !slices.Equal([]uint16(rows[j]), llamaRowTolerant(t, rows[j], x)) {
				t.Fatalf("row %d/%d", c, j)
			}
			for i, v := range x {
				if lg[j*V+i] != half.F16ToF32(half.F32ToF16(v)) {
					t.Fatalf("logit %d/%d/%d: %g, want fp16 of %g", c, j, i, lg[j*V+i], v)
				}
			}
		}
	}
	// llama.cpp reads only the rows: the same file truncated after them is a valid llama.cpp file.
	b, _ := os.ReadFile(path)
	n := kldHeaderSize + 4*len(tokens) + chunks*(ctx-1-ctx/2)*RowLen(V)*2
	os.WriteFile(path+".llama", b[:n], 0o644)
	if k2, err := OpenKLD(path + ".llama"); err != nil || k2.Meta != nil {
		t.Errorf("rows only: %v", err)
	} else {
		k2.Close()
	}
}

// llamaRowTolerant returns want's row when it matches got to ±1 per entry (float32 rounding), so
// a slices.Equal check reports only real differences.
func llamaRowTolerant(t *testing.T, got RefRow, x []float32) []uint16 {
	want := llamaRow(x)
	for i := 4; i < len(want); i++ {
		if d := int(got[i]) - int(want[i]); d >= -1 && d <= 1 {
			want[i] = got[i]
		}
	}
	copy(want[:4], got[:4])
	return want
}

func TestKLDMalformed(t *testing.T) {
	dir := t.TempDir()
	good := func() []byte {
		p := filepath.Join(dir, "g")
		writeLlamaFile(t, p, 4, 3, []int{0, 1, 2, 1}, [][]uint16{make([]uint16, RowLen(3))})
		b, _ := os.ReadFile(p)
		return b
	}
	cases := map[string]struct {
		edit func([]byte) []byte
		want string
	}{
		"magic":     {func(b []byte) []byte { b[0] = 'x'; return b }, "not a log-probabilities file"},
		"short":     {func(b []byte) []byte { return b[:10] }, "too short"},
		"truncated": {func(b []byte) []byte { return b[:len(b)-2] }, "truncated"},
		"vocab":     {func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 0); return b }, "n_vocab"},
		"token":     {func(b []byte) []byte { binary.LittleEndian.PutUint32(b[20:], 9); return b }, "outside the vocabulary"},
		"trailing":  {func(b []byte) []byte { return append(b, make([]byte, 30)...) }, "unexpected"},
		"trailer": {func(b []byte) []byte {
			b = append(b, "_gqverif"...)
			b = binary.LittleEndian.AppendUint32(b, 1)
			b = binary.LittleEndian.AppendUint32(b, 1)
			b = binary.LittleEndian.AppendUint64(b, 2)
			return append(b, "{}"...) // logits flag set, logits missing
		}, "trailer says"},
	}
	for name, c := range cases {
		p := filepath.Join(dir, name+".kld")
		os.WriteFile(p, c.edit(good()), 0o644)
		k, err := OpenKLD(p)
		if err == nil {
			k.Close()
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (want the path and %q)", name, err, c.want)
		}
	}
}
