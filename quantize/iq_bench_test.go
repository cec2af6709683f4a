package quantize

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gquant/gquant/formats/gguf"
)

// iqBenchTypes are the lattice-grid i-quants, whose neighbour searches make them the slowest
// encoders.
var iqBenchTypes = []gguf.Type{gguf.IQ2_XXS, gguf.IQ2_XS, gguf.IQ2_S, gguf.IQ1_S, gguf.IQ1_M}

// BenchmarkIQEncoders quantizes the i-quants single-threaded and reports MB/s of float32 input:
// by wall time (MB/s) and by the thread's CPU time in its best call (cpu_MB/s, steady on a
// shared machine). With GQUANT_GGML_QBENCH naming a program that times ggml_quantize_chunk
// (usage: PROGRAM TYPE ROWS.f32 NROWS N_PER_ROW [IMATRIX.f32] ITERS, printing the best and the
// median thread CPU seconds per call; testdata/README.md names the harness), each case also
// runs ggml on the same rows in the same run and reports ggml_cpu_MB/s and x_ggml, gquant's
// speed over ggml's (best call against best call, both single-threaded; the grid set-up of
// ggml_quantize_init and of gquant happens before the timing on both sides).
func BenchmarkIQEncoders(b *testing.B) {
	const nrows, n = 16, 4096
	x := gaussianRows(1, nrows, n, 0.02)
	im := make([]float32, n)
	for j := range im {
		im[j] = float32(1 + j%5)
	}
	qbench := os.Getenv("GQUANT_GGML_QBENCH")
	var rowsFile, imFile string
	if qbench != "" {
		dir := b.TempDir()
		rowsFile, imFile = filepath.Join(dir, "rows.f32"), filepath.Join(dir, "imatrix.f32")
		if err := os.WriteFile(rowsFile, floatBytes(x), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(imFile, floatBytes(im), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	mb := float64(4*len(x)) / 1e6
	for _, typ := range iqBenchTypes {
		e, _ := For(typ)
		q := make([]byte, RowBytes(typ, n)*nrows)
		for _, variant := range []string{"plain", "imat"} {
			var w []float32
			if variant == "imat" {
				w = im
			} else if needsImatrix[typ] {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s", typ, variant), func(b *testing.B) {
				e.Quantize(q, x, nrows, n, w) // grid set-up outside the timing
				b.SetBytes(int64(4 * len(x)))
				now, release := threadCPUClock()
				defer release()
				best := time.Duration(1<<63 - 1)
				for b.Loop() {
					t0 := now()
					e.Quantize(q, x, nrows, n, w)
					best = min(best, now()-t0)
				}
				b.ReportMetric(mb/best.Seconds(), "cpu_MB/s")
				if qbench == "" {
					return
				}
				args := []string{ggmlNames[typ], rowsFile, fmt.Sprint(nrows), fmt.Sprint(n)}
				if w != nil {
					args = append(args, imFile)
				}
				args = append(args, "5")
				out, err := exec.Command(qbench, args...).Output()
				if err != nil {
					b.Fatalf("%s %s: %v", qbench, strings.Join(args, " "), err)
				}
				var ggmlBest, ggmlMedian float64
				sc := bufio.NewScanner(strings.NewReader(string(out)))
				if !sc.Scan() {
					b.Fatalf("%s: no output", qbench)
				}
				if _, err := fmt.Sscan(sc.Text(), &ggmlBest, &ggmlMedian); err != nil {
					b.Fatalf("%s: %q: %v", qbench, out, err)
				}
				b.ReportMetric(mb/ggmlBest, "ggml_cpu_MB/s")
				b.ReportMetric(ggmlBest/best.Seconds(), "x_ggml")
			})
		}
	}
}
