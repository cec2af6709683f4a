//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestAMXGroupProducts checks that batches of at least amxMinTokens tokens take the tiles
// under the amx implementation (the self-check passed, the activations are in the tiles'
// layout) and give the avx512vnni bits, for every format, both modes, partial token tiles and
// row ranges that cut blocks.
func TestAMXGroupProducts(t *testing.T) {
	if !hasImpl("amx") {
		t.Skip("no AMX on this CPU")
	}
	restore, _ := SetImpl("amx")
	ok := amxGroupChecked()
	restore()
	if !ok {
		t.Fatal("the AMX self-check of the group kernels failed")
	}
	rng := rand.New(rand.NewPCG(71, 72))
	for _, f := range groupFormats {
		for _, cols := range []int{256, 768} {
			c := genGroupCase(rng, f, 37, cols, gkMixed)
			m := c.matrix(t)
			for _, mode := range []ActMode{ActFloat, ActQuant} {
				for _, nTok := range []int{16, 17, 33, 48} {
					X := groupInputs(rng, nTok, cols)
					want := groupProductImpl(t, "avx512vnni", m, mode, X, nTok, glChunk)
					got := groupProductImpl(t, "amx", m, mode, X, nTok, glAMX)
					for i := range got {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("%v %d cols %v, %d tokens: token %d row %d: amx %v, avx512vnni %v", f, cols, mode, nTok, i/37, i%37, got[i], want[i])
						}
					}
					if nTok == 33 && cols == 768 {
						// Rows spread over a pool: tiles used by several threads at once.
						got := groupPooled(t, m, mode, X, nTok)
						for i := range got {
							if !sameBits(got[i], want[i]) {
								t.Fatalf("%v %v pooled: token %d row %d: amx %v, avx512vnni %v", f, mode, i/37, i%37, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// groupProductImpl computes m × X under impl over uneven row ranges, checking that the
// activations were prepared in layout lay.
func groupProductImpl(t *testing.T, impl string, m *Matrix, mode ActMode, X []float32, nTok int, lay groupLayout) []float32 {
	t.Helper()
	restore, err := SetImpl(impl)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	m.Mode = mode
	var a Acts
	m.Prepare(&a, X, nTok)
	if a.glay != lay {
		t.Fatalf("%s, %d tokens: layout %d, want %d", impl, nTok, a.glay, lay)
	}
	Y := make([]float32, nTok*m.Rows)
	for _, r := range [][2]int{{0, 5}, {5, 16}, {16, 35}, {35, m.Rows}} {
		m.MulActs(Y, &a, r[0], r[1])
	}
	return Y
}

// TestAMXGroupSelfCheck checks that the self-check run before the first group product on the
// tiles catches kernels that compute something else (Go stand-ins that run the real kernel
// and then change one output, so it needs AMX).
func TestAMXGroupSelfCheck(t *testing.T) {
	if !hasImpl("amx") {
		t.Skip("no AMX on this CPU")
	}
	restore, _ := SetImpl("amx")
	defer restore()
	if err := amxGroupSelfCheck(amxGroupA16, amxGroupA8); err != nil {
		t.Fatalf("self-check of the real kernels: %v", err)
	}
	breakIt := func(k func(*groupArgs)) func(*groupArgs) {
		return func(p *groupArgs) {
			k(p)
			*p.y += 1 // one wrong value: the first row of the first token
		}
	}
	if err := amxGroupSelfCheck(breakIt(amxGroupA16), amxGroupA8); err == nil || !strings.Contains(err.Error(), "float") {
		t.Errorf("self-check of a broken a16 kernel: %v", err)
	}
	if err := amxGroupSelfCheck(amxGroupA16, breakIt(amxGroupA8)); err == nil || !strings.Contains(err.Error(), "quant") {
		t.Errorf("self-check of a broken a8 kernel: %v", err)
	}
}

// TestAMXGroupEncodings disassembles the group tile kernels with GNU objdump and checks every
// tile instruction and its operands against the hand-written BYTE encodings' intent.
func TestAMXGroupEncodings(t *testing.T) {
	re := regexp.MustCompile(`^((?:ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|tilestored|tdp\w+)\b.*)$`)
	// Each kernel zeroes its C tiles, issues a tile's first unit on set 0, then alternates
	// sets 1 and 0, each unit storing the other set's C during its first step and zeroing it
	// after its last; the last unit's set is stored and zeroed at the end of the tile.
	ld := func(t int) string { return fmt.Sprintf("tileloadd (%%rax,%%rcx,1),%%tmm%d", t) }
	st := func(t int) string { return fmt.Sprintf("tilestored %%tmm%d,(%%rax,%%rcx,1)", t) }
	zero := func(t int) string { return fmt.Sprintf("tilezero %%tmm%d", t) }
	ssd := func(c int) string { return fmt.Sprintf("tdpbssd %%tmm4,%%tmm2,%%tmm%d", c) }
	usd := func(c int) string { return fmt.Sprintf("tdpbusd %%tmm4,%%tmm3,%%tmm%d", c) }
	cat := func(parts ...[]string) (w []string) {
		for _, p := range parts {
			w = append(w, p...)
		}
		return w
	}
	l := func(s ...string) []string { return s }
	unit16 := func(h, c int, prev ...int) []string { // first step, further steps
		first := l(ld(2), ld(3), ld(4), ssd(h))
		if prev != nil {
			first = append(first, st(prev[0]), usd(c), st(prev[1]))
		} else {
			first = append(first, usd(c))
		}
		rest := l(ld(2), ld(3), ld(4), ssd(h), usd(c))
		if prev != nil {
			rest = append(rest, zero(prev[0]), zero(prev[1]))
		}
		return cat(first, rest)
	}
	unit8 := func(c int, prev ...int) []string {
		w := l(ld(2), ld(4), ssd(c))
		if prev != nil {
			w = append(w, st(prev[0]))
		}
		w = append(w, ld(2), ld(4), ssd(c))
		if prev != nil {
			w = append(w, zero(prev[0]))
		}
		return w
	}
	want := map[string][]string{
		"amxGroupA16": cat(l("ldtilecfg (%rcx)", zero(0), zero(1), zero(5), zero(6)),
			unit16(0, 1), unit16(5, 6, 0, 1), unit16(0, 1, 5, 6),
			l(st(0), st(1), zero(0), zero(1), st(5), st(6), zero(5), zero(6), "tilerelease")),
		"amxGroupA8": cat(l("ldtilecfg (%rcx)", zero(0), zero(5)),
			unit8(0), unit8(5, 0), unit8(0, 5),
			l(st(0), zero(0), st(5), zero(5), "tilerelease")),
	}
	for fn, w := range want {
		got := disassembled(t, fn, re)
		if strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("tile instructions of %s:\n%s\nwant:\n%s", fn, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
}

// groupPooled computes m × X under "amx" with the rows handed out in chunks of 16 to the
// workers of a pool of 3.
func groupPooled(t *testing.T, m *Matrix, mode ActMode, X []float32, nTok int) []float32 {
	restore, _ := SetImpl("amx")
	defer restore()
	p := NewPool(3)
	defer p.Close()
	m.Mode = mode
	var a Acts
	m.PrepareOn(p, &a, X, nTok)
	Y := make([]float32, nTok*m.Rows)
	p.RunDynamic(m.Rows, 16, func(_, lo, hi int) { m.MulActs(Y, &a, lo, hi) })
	return Y
}
