package convert

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gquant/gquant/formats/hf/synth"
)

// BenchmarkConvert measures conversion throughput in MB/s of bf16 input and the process's
// peak RSS, on a synthetic checkpoint (GQUANT_BENCH_PRESET, default tiny-qwen3; use qwen3-0.6b
// for the 1.2 GB Qwen3-0.6B shape) to GQUANT_BENCH_SCHEME (default q4_k_m). When
// GQUANT_LLAMA_QUANTIZE names a llama-quantize binary, the same weights (as the F32 GGUF
// llama-quantize needs) are quantized by it in the same run with the same thread count, and
// the ratio of the two throughputs is reported (both in bf16-equivalent bytes).
//
//	GQUANT_BENCH_PRESET=qwen3-0.6b GQUANT_LLAMA_QUANTIZE=/path/llama-quantize \
//	  go test -run '^$' -bench Convert -benchtime 1x ./convert/
func BenchmarkConvert(b *testing.B) {
	preset := envOr("GQUANT_BENCH_PRESET", "tiny-qwen3")
	scheme := envOr("GQUANT_BENCH_SCHEME", "q4_k_m")
	threads := runtime.GOMAXPROCS(0)
	dir := filepath.Join(os.TempDir(), "gquant-bench-"+preset)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		spec, err := synth.Preset(preset)
		if err != nil {
			b.Fatal(err)
		}
		if err := synth.Generate(dir, spec, synth.Options{Seed: 1, TokenizerDir: "../testdata/models/stories260k", Force: true}); err != nil {
			b.Fatal(err)
		}
	}
	inv, err := Open(dir, InventoryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var inBytes, largestF32 int64
	for _, t := range inv.Tensors {
		n := int64(1)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		inBytes += 2 * n
		largestF32 = max(largestF32, 4*n)
	}
	inv.Close()
	out := filepath.Join(b.TempDir(), "out.gguf")
	b.SetBytes(inBytes)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := Convert(dir, out, Options{Scheme: scheme, Threads: threads, Force: true}); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	ours := float64(inBytes) * float64(b.N) / elapsed.Seconds() / 1e6
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "peakRSS_MB")
	b.ReportMetric(float64(largestF32)/1e6, "largestF32_MB")
	lq := os.Getenv("GQUANT_LLAMA_QUANTIZE")
	if lq == "" {
		return
	}
	f32 := filepath.Join(b.TempDir(), "f32.gguf")
	if _, err := Convert(dir, f32, Options{Scheme: "f32", Threads: threads}); err != nil {
		b.Fatal(err)
	}
	qout := filepath.Join(b.TempDir(), "lq.gguf")
	cmd := exec.Command(lq, f32, qout, scheme, strconv.Itoa(threads))
	t0 := time.Now()
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("llama-quantize: %v\n%s", err, msg)
	}
	theirs := float64(inBytes) / time.Since(t0).Seconds() / 1e6
	if st, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		b.ReportMetric(float64(st.Maxrss)/1024, "llama_peakRSS_MB")
	}
	b.ReportMetric(theirs, "llama_MB/s")
	b.ReportMetric(ours/theirs, "speed_ratio")
	fmt.Fprintf(os.Stderr, "convert %s to %s, %d threads: gquant %.1f MB/s, llama-quantize %.1f MB/s, ratio %.2f\n",
		preset, scheme, threads, ours, theirs, ours/theirs)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
