//go:build amd64 && !purego

package kernels

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestGramPairsOK checks that a CPU with AVX512_BF16 passes gramPairsOK, so that AddGram runs
// the pair kernel there: a failure is a bug in the pair kernel or its packing (which the
// check runs), or a CPU whose VDPBF16PS is not Intel's (AddGram then falls back to the AVX-512
// kernel, with the same bits, at half the speed).
func TestGramPairsOK(t *testing.T) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BF16 {
		t.Skip("no AVX512_BF16 on this CPU")
	}
	if !gramPairsOK() {
		t.Fatal("the CPU has AVX512_BF16, but the pair kernel fails gramPairsOK")
	}
	if g := gramFor(avx512Impl); g.name != "avx512bf16" {
		t.Errorf("gramFor(avx512vnni) = %s, want avx512bf16", g.name)
	}
}
