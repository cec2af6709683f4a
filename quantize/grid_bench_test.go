package quantize

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// BenchmarkStressRows quantizes the 512×256 stress rows (stressInput, the rows the C harness
// regenerates) with the grid and ternary encoders, single-threaded, plain and with the stress
// imatrix, and reports MB/s of float32 input, by wall time and by the thread's CPU time (threadCPUClock)
// (cpuMB/s). When GQUANT_GGML_MBPS names a file of "<ggml type name> <plain|imat> <cpu MB/s>
// …" lines, ggml_quantize_chunk's speed on the same rows measured by CPU time in the same run
// by the harness (testdata/README.md), it also reports x_ggml, gquant's cpuMB/s over ggml's.
func BenchmarkStressRows(b *testing.B) {
	ggml := map[string]float64{}
	if path := os.Getenv("GQUANT_GGML_MBPS"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 3 {
				continue
			}
			v, err := strconv.ParseFloat(fs[2], 64)
			if err != nil {
				b.Fatalf("%s: %q: %v", path, sc.Text(), err)
			}
			ggml[fs[0]+"/"+fs[1]] = v
		}
		f.Close()
	}
	src, im, nrows, n := stressInput()
	for _, typ := range []gguf.Type{gguf.IQ3_XXS, gguf.IQ3_S, gguf.TQ1_0, gguf.TQ2_0} {
		e, _ := For(typ)
		q := make([]byte, RowBytes(typ, n)*nrows)
		for _, variant := range []string{"plain", "imat"} {
			var w []float32
			if variant == "imat" {
				w = im
			}
			b.Run(fmt.Sprintf("%s/%s", typ, variant), func(b *testing.B) {
				e.Quantize(q, src, nrows, n, w) // builds the lattice outside the timing
				b.SetBytes(int64(4 * len(src)))
				now, release := threadCPUClock()
				defer release()
				c0 := now()
				for b.Loop() {
					e.Quantize(q, src, nrows, n, w)
				}
				cpu := now() - c0
				mb := float64(4*len(src)) * float64(b.N) / 1e6
				if cpu > 0 {
					b.ReportMetric(mb/cpu.Seconds(), "cpuMB/s")
				}
				if base := ggml[ggmlNames[typ]+"/"+variant]; base > 0 && cpu > 0 {
					b.ReportMetric(mb/cpu.Seconds()/base, "x_ggml")
				}
			})
		}
	}
}
