package convert

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/calibrate"
	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/imatrix"
)

// gquant's own stats and the llama.cpp imatrix written from them (with output.weight, as
// llama-imatrix --process-output) give the same bytes, so `gquant convert --stats STATS` equals
// llama-quantize --imatrix with `gquant calibrate --process-output --imatrix` (the equality of
// convert --stats IMATRIX with llama-quantize is TestMatchesLlamaQuantizeImatrix's); and the
// stats change the output. stories3m (untied) covers the head; stories260k a tied one.
func TestStatsAndTheirImatrixGiveTheSameBytes(t *testing.T) {
	dirs := []string{"../testdata/models/stories260k"}
	if _, err := os.Stat("../testdata/models/stories3m/config.json"); err == nil {
		dirs = append(dirs, "../testdata/models/stories3m")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) { statsAndImatrix(t, dir) })
	}
}

func statsAndImatrix(t *testing.T, dir string) {
	tmp := t.TempDir()
	statsPath := filepath.Join(tmp, "stats.gguf")
	res, err := calibrate.Calibrate(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt",
		Ctx: 128, Tokens: 512, Threads: 2, Output: statsPath})
	if err != nil {
		t.Fatal(err)
	}
	imx := filepath.Join(tmp, "imatx.gguf") // as long as stats.gguf: the files then differ in that name only
	if err := res.Stats.WriteImatrix(imx, true); err != nil {
		t.Fatal(err)
	}
	convertTo := func(stats string) []byte {
		out := filepath.Join(t.TempDir(), "m.gguf")
		if _, err := Convert(dir, out, Options{Scheme: "q4_k_m", Stats: stats, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, plain := convertTo(statsPath), convertTo(imx), convertTo("")
	// The files differ in the statistics file they record (quantize.imatrix.file, as
	// llama-quantize records it) and nowhere else.
	if fa, fb := recorded(t, a), recorded(t, b); fa != statsPath || fb != imx {
		t.Errorf("quantize.imatrix.file: %q and %q, want %q and %q", fa, fb, statsPath, imx)
	}
	if !bytes.Equal(bytes.Replace(a, []byte(statsPath), []byte(imx), 1), b) || len(statsPath) != len(imx) {
		t.Error("--stats STATS and --stats IMATRIX(STATS) give different files")
	}
	if bytes.Equal(a, plain) {
		t.Error("the stats did not change the output")
	}
}

// recorded returns the quantize.imatrix.file of a GGUF file's bytes.
func recorded(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := f.String("quantize.imatrix.file")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNaNStatsRejectedBeforeWriting(t *testing.T) {
	dir := "../testdata/models/stories260k"
	tmp := t.TempDir()
	res, err := calibrate.Calibrate(dir, calibrate.Options{Corpus: "../testdata/corpora/tinystories-calib.txt",
		Ctx: 128, Tokens: 256, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := res.Stats.Imatrix(false)
	if err != nil {
		t.Fatal(err)
	}
	imx := filepath.Join(tmp, "bad.gguf")
	if err := imatrix.WriteGGUF(imx, m); err != nil {
		t.Fatal(err)
	}
	// poison one Σx² in the file (the writer itself refuses NaN)
	f, err := gguf.Open(imx)
	if err != nil {
		t.Fatal(err)
	}
	name := m.Entries[3].Name + ".in_sum2"
	i, ok := f.TensorIndex(name)
	if !ok {
		t.Fatalf("%s not in the imatrix file", name)
	}
	off := int64(f.DataOffset + f.Tensors[i].Offset + 5*4)
	f.Close()
	fd, err := os.OpenFile(imx, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var nan [4]byte
	binary.LittleEndian.PutUint32(nan[:], math.Float32bits(float32(math.NaN())))
	if _, err := fd.WriteAt(nan[:], off); err != nil {
		t.Fatal(err)
	}
	fd.Close()
	out := filepath.Join(tmp, "m.gguf")
	_, err = Convert(dir, out, Options{Scheme: "q4_k_m", Stats: imx})
	if err == nil || !(strings.Contains(err.Error(), "NaN") || strings.Contains(err.Error(), "invalid")) {
		t.Fatalf("NaN stats: %v", err)
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Fatal("output written with NaN stats")
	}
}
