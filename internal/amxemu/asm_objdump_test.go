//go:build linux && amd64

package amxemu_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gquant/gquant/internal/amxemu"
	"github.com/gquant/gquant/internal/amxemu/amxtest"
)

// TestAsmEncodingsObjdump disassembles the machine code of the amxtest functions, as linked
// into this test binary, with GNU objdump and checks that their BYTE sequences are the AMX
// instructions their comments say.
func TestAsmEncodingsObjdump(t *testing.T) {
	gemm := func(loads []string, tdp, store string) []string {
		return slices.Concat([]string{"ldtilecfg (%rax)"}, loads, []string{tdp, store, "tilerelease"})
	}
	for _, v := range []struct {
		fn   string
		want []string
	}{
		{"LoadConfig", []string{"ldtilecfg (%rax)"}},
		{"StoreConfig", []string{"sttilecfg (%rax)"}},
		{"LoadConfigInline", []string{"ldtilecfg 0x2(%rip)"}},
		{"Release", []string{"tilerelease"}},
		{"GemmSSD", gemm([]string{"tileloadd (%r8,%r9,1),%tmm1", "tileloadd (%r10,%r11,1),%tmm2",
			"tileloadd 0x0(%r13,%r12,1),%tmm0"}, "tdpbssd %tmm2,%tmm1,%tmm0", "tilestored %tmm0,0x0(%r13,%r12,1)")},
		{"GemmSUD", gemm([]string{"tileloadd 0x40(%rsi,%rdx,1),%tmm4", "tileloadd 0x1000(%rdi,%rbx,4),%tmm5",
			"tileloadd (%rcx,%r8,2),%tmm3"}, "tdpbsud %tmm5,%tmm4,%tmm3", "tilestored %tmm3,(%rcx,%r8,2)")},
		{"GemmUSD", gemm([]string{"tileloaddt1 (%r12,%r9,1),%tmm6", "tileloadd (%r11,%r10,1),%tmm7",
			"tileloadd (%rdx,%rsi,1),%tmm5"}, "tdpbusd %tmm7,%tmm6,%tmm5", "tilestored %tmm5,(%rdx,%rsi,1)")},
		{"GemmUUD", gemm([]string{"tileloadd (%rsi,%rdx,1),%tmm0", "tileloadd (%rdi,%rbx,1),%tmm7",
			"tileloadd (%rcx,%r8,1),%tmm6"}, "tdpbuud %tmm7,%tmm0,%tmm6", "tilestored %tmm6,(%rcx,%r8,1)")},
		{"GemmBF16", gemm([]string{"tileloadd (%rsi,%rdx,1),%tmm2", "tileloadd (%rdi,%rbx,1),%tmm3",
			"tileloadd (%rcx,%r8,1),%tmm1"}, "tdpbf16ps %tmm3,%tmm2,%tmm1", "tilestored %tmm1,(%rcx,%r8,1)")},
		{"LoadABC", []string{"tileloadd (%r8,%r9,1),%tmm1", "tileloadd (%r10,%r11,1),%tmm2",
			"tileloadd 0x0(%r13,%r12,1),%tmm0"}},
		{"DotSSD", []string{"tdpbssd %tmm2,%tmm1,%tmm0"}},
		{"StoreC", []string{"tilestored %tmm0,0x0(%r13,%r12,1)"}},
		{"ZeroTile", []string{"ldtilecfg (%rax)", "tileloadd (%rdx,%rsi,1),%tmm4", "tilezero %tmm4",
			"tilestored %tmm4,(%rdi,%rsi,1)", "tilerelease"}},
		{"LoadBroadcast", []string{"ldtilecfg (%rax)", "tileloadd (%rdx,%riz,1),%tmm3",
			"tilestored %tmm3,(%rdi,%rsi,1)", "tilerelease"}},
		{"UD2", []string{"ud2"}},
	} {
		code := amxtest.Code(v.fn)
		if len(code) == 0 {
			t.Fatalf("%s: no machine code found", v.fn)
		}
		lines := amxemu.ObjdumpRawText(t, code)
		var got []string
		for _, l := range lines {
			if strings.Contains(l, "(bad)") && v.fn != "LoadConfigInline" {
				t.Errorf("%s: objdump cannot decode %q", v.fn, l)
			}
			if mn, _, _ := strings.Cut(l, " "); strings.HasPrefix(mn, "tile") || strings.HasPrefix(mn, "tdp") ||
				strings.HasSuffix(mn, "tilecfg") || mn == "ud2" {
				got = append(got, l)
			}
		}
		if !slices.Equal(got, v.want) {
			t.Errorf("%s: objdump shows\n\t%s\nwant\n\t%s", v.fn, strings.Join(got, "\n\t"), strings.Join(v.want, "\n\t"))
		}
	}
}
