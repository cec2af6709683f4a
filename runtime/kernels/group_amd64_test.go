//go:build amd64 && !purego

package kernels

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"unsafe"
)

// TestGroupArgsOffsets checks the GA_ offsets of group_amd64.h against groupArgs.
func TestGroupArgsOffsets(t *testing.T) {
	h, err := os.ReadFile("group_amd64.h")
	if err != nil {
		t.Fatal(err)
	}
	var p groupArgs
	want := map[string]uintptr{
		"Y": unsafe.Offsetof(p.y), "LDY": unsafe.Offsetof(p.ldy), "W": unsafe.Offsetof(p.w),
		"WSTRIDE": unsafe.Offsetof(p.wstride), "BLOCKS": unsafe.Offsetof(p.blocks), "MASK": unsafe.Offsetof(p.mask),
		"ACT": unsafe.Offsetof(p.act), "ACTSTEP": unsafe.Offsetof(p.actStep), "GD": unsafe.Offsetof(p.gd),
		"GS": unsafe.Offsetof(p.gs), "METASTEP": unsafe.Offsetof(p.metaStep), "HDR": unsafe.Offsetof(p.hdr),
		"UNITS": unsafe.Offsetof(p.units), "CHUNKS": unsafe.Offsetof(p.chunks), "SSTEP": unsafe.Offsetof(p.sstep),
		"ZOFF": unsafe.Offsetof(p.zoff), "ZCONST": unsafe.Offsetof(p.zconst), "B": unsafe.Offsetof(p.b),
		"LDA": unsafe.Offsetof(p.lda), "KSTEPS": unsafe.Offsetof(p.ksteps), "NT": unsafe.Offsetof(p.nt),
		"CFG": unsafe.Offsetof(p.cfg), "CBUF": unsafe.Offsetof(p.cbuf),
	}
	got := map[string]uintptr{}
	for _, m := range regexp.MustCompile(`(?m)^#define GA_(\w+) (\d+)$`).FindAllStringSubmatch(string(h), -1) {
		v, _ := strconv.Atoi(m[2])
		got[m[1]] = uintptr(v)
	}
	if len(got) != len(want) {
		t.Errorf("group_amd64.h defines %d offsets, groupArgs has %d fields", len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("GA_%s = %d (defined %v), groupArgs has it at %d", k, g, ok, v)
		}
	}
}
